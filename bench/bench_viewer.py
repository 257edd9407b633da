"""`picontext export` vs Pi's HTML export on the same generated sessions, and both pages opened in
headless Chromium. Not a test: numbers go to stdout (and docs/viewer.md / docs/performance.md).

    .venv/bin/python bench/bench_viewer.py [--sizes 10000,100000]

export: wall time of the whole CLI call (picontext export / a node process running Pi's
exportFromFile). open: ms from navigation start until the page's load event, and for ours until
the tree and the plot are drawn (`body[data-ready]`); Pi's page draws during load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from gen_sessions import generate  # noqa: E402

PI_EXPORT = HERE.parent / "tests/differential/node/node_modules/@earendil-works/pi-coding-agent/dist/core/export-html"
NODE = """const { exportFromFile } = await import(process.argv[1] + "/index.js");
await exportFromFile(process.argv[2], { outputPath: process.argv[3] });"""


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t0


def open_ms(driver: object, page: Path, ours: bool) -> tuple[int, int | None]:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(page.as_uri())  # type: ignore[attr-defined]
    ready = None
    if ours:
        WebDriverWait(driver, 120).until(lambda d: d.execute_script("return document.body.dataset.ready"))
        ready = int(driver.execute_script("return document.body.dataset.ready"))  # type: ignore[attr-defined]
    load = driver.execute_script(  # type: ignore[attr-defined]
        "const t = performance.getEntriesByType('navigation')[0]; return Math.round(t.loadEventEnd)")
    return int(load), ready


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    args = parser.parse_args()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    profile = tempfile.mkdtemp(prefix="bench-viewer-")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1500,950",
                 f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path="/usr/bin/chromedriver"))
    driver.set_page_load_timeout(300)
    picontext = str(Path(sys.executable).with_name("picontext"))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for size in map(int, args.sizes.split(",")):
                session = Path(tmp) / f"s{size}.jsonl"
                generate(str(session), size)
                ours, theirs = Path(tmp) / f"ours{size}.html", Path(tmp) / f"pi{size}.html"
                row: dict[str, object] = {"entries": size, "sessionMB": round(session.stat().st_size / 1e6, 1)}
                row["exportS"] = round(timed([picontext, "export", str(session), "-o", str(ours)]), 2)
                row["piExportS"] = round(timed(["node", "--input-type=module", "-e", NODE, str(PI_EXPORT),
                                                str(session), str(theirs)]), 2)
                row["pageMB"] = round(ours.stat().st_size / 1e6, 1)
                row["piPageMB"] = round(theirs.stat().st_size / 1e6, 1)
                open_ms(driver, ours, True)  # warm the browser's caches once
                row["loadMs"], row["readyMs"] = open_ms(driver, ours, True)
                row["piLoadMs"], _ = open_ms(driver, theirs, False)
                print(json.dumps(row), flush=True)
    finally:
        driver.quit()
        subprocess.run(["rm", "-rf", profile], check=False)
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
