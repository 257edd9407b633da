"""Type-confused sessions in a real headless Chromium: the page shows any field of any type.

A `usage.cost.total` that was an object broke the entry view (`n.toFixed is not a function`); an
object with a `toString` member breaks `String()`. Sessions from the hardening generator (any
field replaced by a list, an object, a number, null, a bool or removed) are exported, every
entry is opened and every tab drawn, without a script error.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hardening"))
from confused_sessions import BASE, PATHS, confuse, write
from hostile_files import run_cli
from test_markdown_in_browser import load_showing_all

VALUES = [[], ["x"], {}, {"a": 1}, {"total": 1}, {"toString": "x", "valueOf": 1}, 0, 1.5, -1, None, True, False,
          "", "x", "e05"]
# Fields the page formats or joins, in groups of which no path lies under another.
AIMED = [
    [("e05", "message", "usage", "cost", "total"), ("e11", "usage", "cost", "total"), ("e11", "tokensBefore"),
     ("e11", "details", "verifiedFacts", "modifiedFiles"), ("e05", "message", "content", 2, "name"),
     ("e06", "message", "toolName"), ("e08", "customType"), ("e17", "label"), ("e11", "details", "summaryModel"),
     ("e11", "details", "promptCache", "reason"), ("e03", "message", "sections", "rules")],
    [("e05", "message", "usage", "cost"), ("e11", "details", "verifiedFacts", "errors"),
     ("e11", "details", "readFiles"), ("e05", "message", "provider"),
     ("e10", "message", "usage", "input"), ("e15", "message", "errorMessage")],
    [("e05", "message", "usage"), ("e11", "usage"), ("e11", "details", "verifiedFacts", "lastUserRequest")],
]


def _path(aimed: tuple[Any, ...]) -> tuple[Any, ...]:
    index = next(n for n, e in enumerate(BASE) if e.get("id") == aimed[0])
    return (index, *aimed[1:])


def open_everything(browser: Any, page: Path) -> int:
    load_showing_all(browser, page)
    return browser.execute_script(  # type: ignore[no-any-return]
        "const t = document.getElementById('tree'); const n = Number(t.dataset.count); let opened = 0;"
        "t.querySelector('.row').click();"
        "for (let k = 0; k < n; k++) { if (k) t.dispatchEvent(new KeyboardEvent('keydown', {key: 'ArrowDown'}));"
        "  document.querySelectorAll('#tab-entry details').forEach(d => d.open = true);"
        "  if (document.getElementById('tab-entry').dataset.index !== undefined) opened++; }"
        "for (const tab of ['context', 'compactions', 'dropped', 'session']) {"
        "  document.querySelector(`#tabs button[data-tab='${tab}']`).click();"
        "  document.querySelectorAll('details').forEach(d => d.open = true); }"
        "return opened;")


def test_type_confused_sessions_render(browser: Any, tmp_path: Path) -> None:
    rng = random.Random(19)
    # Every value in every aimed field (15 sessions), and a few random confusions.
    cases = [[(_path(aimed), VALUES[(k + shift) % len(VALUES)]) for aimed in group]
             for g, group in enumerate(AIMED) for k in range(5) for shift in (5 * g,)]
    cases += [[(rng.choice(PATHS), rng.choice(VALUES)) for _ in range(6)] for _ in range(3)]
    for n, mutations in enumerate(cases):
        session = write(tmp_path / f"c{n}.jsonl", confuse(mutations))
        page = tmp_path / f"c{n}.html"
        result = run_cli("export", str(session), "-o", str(page))
        assert result.code == 0, (mutations, result.err)
        opened = open_everything(browser, page)
        assert opened == len(BASE) - 1, mutations
        errors = [m for m in browser.get_log("browser") if m.get("level") == "SEVERE"]
        assert errors == [], (mutations, errors)
