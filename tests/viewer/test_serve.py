"""`picontext serve` as a real process on 127.0.0.1, watched in headless Chromium while its session grows."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from viewer_sessions import EXAMPLE

from serving import serve_process, url_of


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    shutil.copy(EXAMPLE, sessions / "2026-03-02T09-14-04-871Z_019cae3d-5a1b-7c2e-9f10-4b3d2a1c0e9f.jsonl")
    small = sessions / "2026-03-03T10-00-00-000Z_019cae3d-0000-7000-8000-000000000001.jsonl"
    lines = [{"type": "session", "version": 3, "id": "019cae3d-0000-7000-8000-000000000001",
              "timestamp": "2026-03-03T10:00:00.000Z", "cwd": "/home/dana/src/other"},
             {"type": "message", "id": "b0000001", "parentId": None, "timestamp": "2026-03-03T10:00:01.000Z",
              "message": {"role": "user", "content": "first question", "timestamp": 1}}]
    small.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with serve_process("--dir", str(sessions)) as first:
        yield url_of(first), small


def test_serve_lists_sessions_and_refuses_the_rest(served: tuple[str, Path]) -> None:
    url, _ = served
    listing = httpx.get(url)
    assert listing.status_code == 200
    assert "Split invoicer/core.py into modules" in listing.text and "first question" in listing.text
    assert listing.text.count('class="session"') == 2
    assert httpx.get(url + "view/0123456789abcdef").status_code == 404
    assert httpx.get(url + "view/..%2F..%2Fetc%2Fpasswd").status_code == 404
    assert httpx.get(url + "api/view/0123456789abcdef").status_code == 404
    # A page of another origin resolving to 127.0.0.1 (DNS rebinding) is refused.
    assert httpx.get(url, headers={"Host": "evil.example:80"}).status_code == 403


def test_served_view_refreshes_as_the_session_grows(browser: Any, served: tuple[str, Path], shots: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    url, small = served
    browser.get(url)
    link = next(a for a in browser.find_elements("css selector", "a.session") if a.text == "first question")
    link.click()
    WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.body.dataset.lines"))
    tree = browser.find_element("id", "tree")
    assert tree.get_attribute("data-count") == "1"
    assert "No model requests on this branch." in browser.find_element("id", "tab-context").text

    reply = {"type": "message", "id": "b0000002", "parentId": "b0000001", "timestamp": "2026-03-03T10:00:02.000Z",
             "message": {"role": "assistant", "content": [{"type": "text", "text": "an answer that arrived later"}],
                         "provider": "anthropic", "model": "claude-sonnet-4-5", "stopReason": "stop",
                         "usage": {"input": 900, "output": 20, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 920},
                         "timestamp": 2}}
    with small.open("a") as f:
        f.write(json.dumps(reply) + "\n")
    WebDriverWait(browser, 20).until(lambda d: d.find_element("id", "tree").get_attribute("data-count") == "2")
    rows = browser.execute_script("return Array.from(document.querySelectorAll('#tree .row')).map(r => r.textContent)")
    assert any("an answer that arrived later" in r and "leaf" in r for r in rows)
    assert browser.find_element("css selector", "svg.plot").get_attribute("data-requests") == "1"
    assert int(browser.execute_script("return document.body.dataset.refreshed")) >= 1
    browser.save_screenshot(str(shots / "serve-refreshed.png"))
    assert [m for m in browser.get_log("browser") if m.get("level") == "SEVERE"] == []


def _serve(args: list[str], cwd: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "picontext", "serve", "--port", "0", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert " on http://127.0.0.1:" in first, first
    return proc, first.split(" on ", 1)[1].split(" ", 1)[0]


def test_serve_lists_this_projects_sessions_or_all(tmp_path: Path) -> None:
    from picontext.session import paths

    here, there = tmp_path / "here", tmp_path / "there"
    for project, words in ((here, "question from here"), (there, "question from there")):
        project.mkdir()
        directory = Path(paths.default_session_dir(str(project), create=True))
        header = {"type": "session", "version": 3, "id": f"019cae3d-0000-7000-8000-00000000000{len(words) % 10}",
                  "timestamp": "2026-03-03T10:00:00.000Z", "cwd": str(project)}
        message = {"type": "message", "id": "c0000001", "parentId": None, "timestamp": "2026-03-03T10:00:01.000Z",
                   "message": {"role": "user", "content": words, "timestamp": 1}}
        (directory / "2026-03-03T10-00-00-000Z_s.jsonl").write_text(json.dumps(header) + "\n" + json.dumps(message)
                                                                     + "\n")
    for args, expected in (([], ["question from here"]), (["--all"], ["question from here", "question from there"])):
        proc, url = _serve(args, here)
        try:
            page = httpx.get(url).text
            assert sorted(w for w in ("question from here", "question from there") if w in page) == expected
        finally:
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=15) == 0


def test_serve_defaults_to_this_machine_on_port_8377() -> None:
    from picontext.cli.main import build_parser

    args = build_parser().parse_args(["serve"])
    assert (args.host, args.port, args.dir, args.all) == ("127.0.0.1", 8377, None, False)
