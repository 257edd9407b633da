"""The page's Markdown renderer in a real headless Chromium: it always ends.

A bullet list whose lines end in CRLF, or that holds U+2028/2029, froze the tab for good (the
list loop stopped advancing). Here such text sits in every place the page renders Markdown (a
message, thinking, a compaction summary drawn when the page loads), next to thousands of random
Markdown-ish strings and long adversarial runs (`[[[[`, backticks of many lengths, nested
quotes) that a backtracking parser would take hours over. Every entry is opened; each must
render before the script call's time limit, with no script error.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

TS = "2026-03-02T09:14:05.000Z"
SCRIPT_LIMIT_S = 120  # a page that stops advancing never answers; one that renders answers in ms
CRLF = ["- one\r\n- two\r\n- three", "1. one\r\n2. two\r\n", "- one\r- two\r- three", "* one\u2028still one\n* two",
        "- a\u2029b\r\n- c", "# Title\u2028more\r\n\r\n- x\r\n> quoted\r\n> - item\r\n", "- [x] done\r\n- [ ] todo\r\n"]
CRLF_ITEMS = [["one", "two", "three"], ["one", "two"], ["one", "two", "three"], ["one\u2028still one", "two"],
              ["a\u2029b", "c"], ["x", "item"], ["☑ done", "☐ todo"]]
TOKENS = ["-", "*", "**", "+", "1.", "2)", "#", "###", ">", "`", "``", "```", "~~~", "[", "]", "(", ")", "](",
          "http://h", "[a](http://h)", "_", "__", "[ ]", "[x]", " ", "  ", "\t", "\r", "\n", "\r\n", "\u2028",
          "\u2029", "a", "word", "é", "\x00", "\x1b", "<b>", "&amp;", "\ud800", "---", "* * *"]
ADVERSARIAL = ["[" * 200_000, "`" * 1 + "``" * 50_000 + "x", "".join("`" * n + "a" for n in range(1, 700)),
               "*a" * 100_000, "**a" * 70_000, "](" * 100_000 + ")", "[a](" * 50_000 + " )", "> " * 50_000 + "x",
               "\n".join("> " * k + "q" for k in range(300)), "- " * 100_000, "-\r\n" * 50_000, "#" * 100_000,
               "1" * 200_000 + ".", "```\n" * 30_000, "[a]" * 60_000]


def random_markdown(rng: random.Random) -> str:
    return "".join(rng.choice(TOKENS) for _ in range(rng.randint(0, 60)))


def write_session(path: Path, texts: list[str], summary: str) -> Path:
    """One user message per text, linear; every 7th text goes into an assistant's text and
    thinking instead; the last compaction's summary (rendered as the page loads) is `summary`."""
    lines: list[dict[str, Any]] = [{"type": "session", "version": 3, "id": "md", "timestamp": TS, "cwd": "/md"}]
    parent = None
    for n, text in enumerate(texts):
        eid = f"m{n:06d}"
        if n % 7 == 3:
            message: dict[str, Any] = {"role": "assistant", "content": [
                {"type": "thinking", "thinking": text}, {"type": "text", "text": text}],
                "provider": "p", "model": "m", "stopReason": "stop", "timestamp": n}
        else:
            message = {"role": "user", "content": text, "timestamp": n}
        lines.append({"type": "message", "id": eid, "parentId": parent, "timestamp": TS, "message": message})
        parent = eid
    lines.append({"type": "compaction", "id": "c0", "parentId": parent, "timestamp": TS, "summary": summary,
                  "firstKeptEntryId": parent, "tokensBefore": 10})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def load_showing_all(browser: Any, page: Path) -> None:
    """Open the page, wait for its entries, empty the console log, show every entry in the tree."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser.set_script_timeout(SCRIPT_LIMIT_S)
    browser.get(page.as_uri())
    WebDriverWait(browser, SCRIPT_LIMIT_S).until(lambda d: d.execute_script("return document.body.dataset.lines"))
    browser.get_log("browser")
    browser.find_element("css selector", "#filters button[data-filter='all']").click()


def open_every_entry(browser: Any, session: Path, tmp_path: Path) -> list[int]:
    """Export, load, then walk every row of the "all" filter with the Down key (each opens its
    entry synchronously); returns the entry index shown after each step."""
    page = tmp_path / (session.stem + ".html")
    subprocess.run([sys.executable, "-m", "picontext", "export", str(session), "-o", str(page)], check=True,
                   capture_output=True, timeout=300)
    load_showing_all(browser, page)
    return browser.execute_script(  # type: ignore[no-any-return]
        "const t = document.getElementById('tree'); const n = Number(t.dataset.count); const seen = [];"
        "t.querySelector('.row').click(); seen.push(Number(document.getElementById('tab-entry').dataset.index));"
        "for (let k = 1; k < n; k++) {"
        "  t.dispatchEvent(new KeyboardEvent('keydown', {key: 'ArrowDown'}));"
        "  seen.push(Number(document.getElementById('tab-entry').dataset.index)); }"
        "return seen;")


def severe(browser: Any) -> list[Any]:
    return [m for m in browser.get_log("browser") if m.get("level") == "SEVERE"]


def test_crlf_and_line_separator_lists_render(browser: Any, tmp_path: Path) -> None:
    session = write_session(tmp_path / "crlf.jsonl", CRLF, summary="## Done\r\n- a\r\n- b\u2028c\r\n")
    seen = open_every_entry(browser, session, tmp_path)
    assert seen == list(range(len(CRLF) + 1))
    assert severe(browser) == []
    # The summary drawn at load time: a list of two items.
    browser.find_element("css selector", "#tabs button[data-tab='compactions']").click()
    assert browser.execute_script(
        "return Array.from(document.querySelectorAll('.card.compaction details .md li')).map(l => l.textContent)"
    ) == ["a", "b\u2028c"]
    for n, items in enumerate(CRLF_ITEMS):
        browser.execute_script(f"document.querySelector('#tree .row[data-index=\"{n}\"]').click()")
        assert browser.execute_script(
            "return Array.from(document.querySelectorAll('#tab-entry .block > .md li, #tab-entry .block > .md "
            "blockquote li')).map(l => l.textContent)") == items, CRLF[n]


@pytest.mark.parametrize("seed", [1, 2])
def test_random_markdown_always_renders(browser: Any, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    # 1,500 strings, 25 to an entry (each step of the walk costs the page ~0.1 s under load)
    texts = ["\n".join(random_markdown(rng) for _ in range(25)) for _ in range(60)]
    session = write_session(tmp_path / f"fuzz{seed}.jsonl", texts, summary=random_markdown(rng) * 50)
    assert open_every_entry(browser, session, tmp_path) == list(range(len(texts) + 1))
    assert severe(browser) == []


def test_adversarial_runs_render_in_linear_time(browser: Any, tmp_path: Path) -> None:
    session = write_session(tmp_path / "adversarial.jsonl", ADVERSARIAL, summary=ADVERSARIAL[0])
    assert open_every_entry(browser, session, tmp_path) == list(range(len(ADVERSARIAL) + 1))
    assert severe(browser) == []


def test_markdown_still_renders_markdown(browser: Any, tmp_path: Path) -> None:
    text = ("# Head\n\nsome **bold** and *em* and `code` and ``a ` b`` and [site](https://example.com) and "
            "[js](javascript:alert(1)) and ```unclosed\n\n- [x] item one\n- item `two`\n\n> quote **q**\n\n---\n"
            "```py\nprint(1)\n```")
    session = write_session(tmp_path / "md.jsonl", [text], summary="s")
    open_every_entry(browser, session, tmp_path)
    browser.execute_script("document.querySelector('#tree .row[data-index=\"0\"]').click()")
    md = "#tab-entry .block > .md"
    got = browser.execute_script(
        "const md = document.querySelector(arguments[0]); const q = s => Array.from(md.querySelectorAll(s));"
        "return {h: q('h3').map(e => e.textContent), strong: q(':scope > p strong').map(e => e.textContent),"
        " em: q('em').map(e => e.textContent), code: q('p code').map(e => e.textContent),"
        " links: q('a').map(e => [e.textContent, e.getAttribute('href')]), li: q('li').map(e => e.textContent),"
        " quote: q('blockquote strong').map(e => e.textContent), hr: q('hr').length,"
        " pre: q('pre code').map(e => [e.textContent, e.dataset.lang || ''])}", md)
    assert got == {"h": ["Head"], "strong": ["bold"], "em": ["em"], "code": ["code", "a ` b"],
                   "links": [["site", "https://example.com"]], "li": ["☑ item one", "item two"], "quote": ["q"],
                   "hr": 1, "pre": [["print(1)", "py"]]}
    assert "[js](javascript:alert(1))" in browser.find_element("css selector", md).text
    assert "```unclosed" in browser.find_element("css selector", md).text
    assert severe(browser) == []
