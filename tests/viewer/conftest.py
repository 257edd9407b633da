"""A real headless Chromium (Debian's /usr/bin/chromium) driven through its chromedriver.

No browser is downloaded: selenium gets both paths. Without them the browser tests skip, except
in CI (CI=true), where a missing browser is a failure.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("PICONTEXT_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("PICONTEXT_CHROMEDRIVER", "/usr/bin/chromedriver")
SHOTS = Path(os.environ.get("PICONTEXT_SCREENSHOTS", Path(tempfile.gettempdir()) / "picontext-screenshots"))


def _missing() -> str | None:
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (os.path.exists(path) or shutil.which(path)):
            return f"{path} not found (scripts/install/chromium.sh installs it)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    return None


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    why = _missing()
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(f"browser tests need Chromium in CI: {why}")
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="picontext-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1500,950"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="session")
def shots() -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    return SHOTS
