"""The exported page in a real headless Chromium: tree, filters, search, plot, compactions, safety.

Expected values come from the session files themselves (walked here, independently of the
viewer's code) or from other picontext commands (`dropped --json`); screenshots go to
$PICONTEXT_SCREENSHOTS (default /tmp/picontext-screenshots).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from viewer_sessions import EXAMPLE, HOSTILE, write_big, write_hostile

SETTINGS_KINDS = {"label", "custom", "context_edit", "model_change", "thinking_level_change"}


def export(session: Path, out: Path, *extra: str) -> Path:
    subprocess.run([sys.executable, "-m", "picontext", "export", str(session), "-o", str(out), *extra],
                   check=True, capture_output=True)
    return out


def read_entries(session: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in session.read_text(encoding="utf-8").split("\n")[1:] if line.strip()]


def branch_of(entries: list[dict[str, Any]], leaf: str | None = None) -> list[dict[str, Any]]:
    by_id = {e["id"]: e for e in entries}
    current: dict[str, Any] | None = by_id[leaf] if leaf else entries[-1]
    path = []
    while current is not None:
        path.append(current)
        current = by_id.get(current.get("parentId"))
    return path[::-1]


def is_tool_only_turn(e: dict[str, Any]) -> bool:
    m = e.get("message") if e.get("type") == "message" else None
    if not m or m.get("role") != "assistant":
        return False
    content = m.get("content")
    texts = [b for b in content if b.get("type") == "text" and b.get("text", "").strip()] if isinstance(
        content, list) else [content] if isinstance(content, str) and content.strip() else []
    return not texts and m.get("stopReason") in (None, "stop", "toolUse")


def pi_filter(entries: list[dict[str, Any]], mode: str, leaf: str, labels: dict[str, str]) -> list[str]:
    """Pi's export filters, written from its documented rules."""
    out = []
    for e in entries:
        role = e["message"].get("role") if e.get("type") == "message" else None
        if e["id"] == leaf:
            ok = True
        elif mode != "all" and is_tool_only_turn(e):
            ok = False
        elif mode == "user-only":
            ok = role == "user"
        elif mode == "no-tools":
            ok = e["type"] not in SETTINGS_KINDS and role != "toolResult"
        elif mode == "labeled-only":
            ok = e["id"] in labels
        elif mode == "all":
            ok = True
        else:
            ok = e["type"] not in SETTINGS_KINDS
        if ok:
            out.append(e["id"])
    return out


def open_page(browser: Any, page: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(page.as_uri())
    WebDriverWait(browser, 60).until(lambda d: d.execute_script("return document.body.dataset.lines"))
    browser.get_log("browser")  # start each page with an empty console


def tree_rows(browser: Any) -> list[dict[str, str]]:
    return browser.execute_script(
        "return Array.from(document.querySelectorAll('#tree .row')).map(r => ({id: r.dataset.id, "
        "kind: r.dataset.kind, cls: r.className, text: r.textContent}))")


def all_tree_ids(browser: Any) -> list[str]:
    """Scroll the lazily drawn tree from top to bottom, collecting every row's id in order."""
    seen: dict[int, str] = {}
    browser.execute_script("document.getElementById('tree').scrollTop = 0")
    while True:
        rows = browser.execute_script(
            "const t = document.getElementById('tree'); t.dispatchEvent(new Event('scroll'));"
            "return [t.scrollTop + t.clientHeight >= t.scrollHeight - 1, "
            "Array.from(t.querySelectorAll('.row')).map(r => [parseInt(r.style.top), r.dataset.id])]")
        for top, rid in rows[1]:
            seen[top] = rid
        if rows[0]:
            break
        browser.execute_script("const t = document.getElementById('tree'); t.scrollTop += t.clientHeight")
    return [seen[k] for k in sorted(seen)]


def click_filter(browser: Any, mode: str) -> int:
    browser.find_element("css selector", f"#filters button[data-filter='{mode}']").click()
    return int(browser.find_element("id", "tree").get_attribute("data-count"))


def open_summarized(browser: Any, card: Any) -> list[Any]:
    """Unfold a compaction's summarized entries (filled on the toggle event) and return their links."""
    from selenium.webdriver.support.ui import WebDriverWait

    card.find_element("css selector", "details.summarized > summary").click()
    return WebDriverWait(browser, 10).until(
        lambda d: card.find_elements("css selector", "details.summarized a.ref"))  # type: ignore[no-any-return]


def console_errors(browser: Any) -> list[dict[str, Any]]:
    return [m for m in browser.get_log("browser") if m.get("level") == "SEVERE"]


def test_example_session_tree_filters_plot_and_compaction(browser: Any, shots: Path, tmp_path: Path) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    page = export(EXAMPLE, tmp_path / "example.html")
    entries = read_entries(EXAMPLE)
    leaf = entries[-1]["id"]
    labels = {e["targetId"]: e["label"] for e in entries if e["type"] == "label" and e.get("label")}
    open_page(browser, page)
    assert browser.find_element("id", "title").text == "Split invoicer/core.py into modules"
    facts = browser.find_element("id", "facts").text
    for fact in ("id 019cae3d-5a1b-7c2e-9f10-4b3d2a1c0e9f", "cwd /home/dana/src/invoicer", "version 3",
                 f"entries {len(entries)}", f"branch {len(branch_of(entries))}", "compactions 1", f"leaf {leaf}"):
        assert fact in facts

    # The tree: every entry under "all", the leaf marked, compaction entries shown as such.
    assert click_filter(browser, "all") == len(entries)
    ids = all_tree_ids(browser)
    assert sorted(ids) == sorted(e["id"] for e in entries)
    leaf_rows = [r for r in tree_rows(browser) if "leaf" in r["text"] and r["id"] == leaf]
    assert leaf_rows, "the current leaf is marked"
    on_branch = {e["id"] for e in branch_of(entries)}
    grey = set(browser.execute_script(
        "const D = []; const t = document.getElementById('tree');"
        "for (t.scrollTop = 0;; t.scrollTop += t.clientHeight) { t.dispatchEvent(new Event('scroll'));"
        "  await new Promise(r => setTimeout(r, 0));"
        "  t.querySelectorAll('.row.off-branch').forEach(r => D.push(r.dataset.id));"
        "  if (t.scrollTop + t.clientHeight >= t.scrollHeight - 1) return D; }"))
    assert grey == {e["id"] for e in entries} - on_branch and grey
    for mode in ("default", "no-tools", "user-only", "labeled-only"):
        expected = pi_filter(entries, mode, leaf, labels)
        assert click_filter(browser, mode) == len(expected), mode
        assert sorted(all_tree_ids(browser)) == sorted(expected), mode
    user_messages = [e for e in entries if e["type"] == "message" and e["message"]["role"] == "user"]
    assert click_filter(browser, "user-only") == len(user_messages) + 1  # and the leaf, always
    users = tree_rows(browser)
    assert {r["kind"] for r in users if r["id"] != leaf} == {"user"}

    # Search narrows to entries holding every word.
    click_filter(browser, "all")
    browser.find_element("id", "search").send_keys("rounding invoice")
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 10).until(lambda d: d.find_element("id", "tree").get_attribute("data-count") != str(
        len(entries)))
    found = all_tree_ids(browser)
    by_id = {e["id"]: json.dumps(e).lower() for e in entries}
    assert found and all(("rounding" in by_id[i] and "invoice" in by_id[i]) or i == leaf for i in found)
    browser.find_element("id", "search").clear()
    browser.execute_script("document.getElementById('search').dispatchEvent(new Event('input'))")
    click_filter(browser, "default")

    # The plot: one point per request of the branch, the compaction marked with tokens before/after.
    branch = branch_of(entries)
    requests = [e for e in branch if e["type"] == "message" and e["message"]["role"] == "assistant"]
    svg = browser.find_element("css selector", "svg.plot")
    assert svg.get_attribute("data-requests") == str(len(requests))
    assert browser.find_elements("css selector", "svg.plot path.rep") and browser.find_elements(
        "css selector", "svg.plot path.est")
    [mark] = browser.find_elements("css selector", "svg.plot g.mark-compaction")
    compaction = next(e for e in branch if e["type"] == "compaction")
    assert mark.get_attribute("data-entry") == compaction["id"]
    assert mark.get_attribute("data-before") == str(compaction["tokensBefore"])
    ActionChains(browser).move_to_element(mark.find_element("css selector", "line")).perform()
    tip = browser.find_element("id", "tip")
    assert "tokens before 22,625" in tip.text and "after" in tip.text
    # claude-sonnet-4-5's 1M window would flatten the curve: it stays off the scale, said in words
    assert "window 1,000,000 and threshold 983,616 tokens are above this scale" in browser.find_element(
        "id", "tab-context").text
    browser.save_screenshot(str(shots / "example-context.png"))

    # The compaction: its summarized entries are what `picontext dropped` lists, each opening its text.
    dropped = json.loads(subprocess.run([sys.executable, "-m", "picontext", "dropped", str(EXAMPLE), "--json"],
                                        check=True, capture_output=True, text=True).stdout)
    compacted = [d["id"] for d in dropped if d["why"] == "compacted"]
    browser.find_element("css selector", "#tabs button[data-tab='compactions']").click()
    card = browser.find_element("css selector", ".card.compaction")
    assert card.get_attribute("data-entry") == compaction["id"]
    assert "## Goal" not in card.text and "Goal" in card.text  # the summary's Markdown is rendered
    listed = [a.text for a in open_summarized(browser, card)]
    assert listed == compacted
    assert "kept from" in card.text and compaction["firstKeptEntryId"] in card.text
    browser.save_screenshot(str(shots / "example-compaction.png"))
    first = next(e for e in entries if e["id"] == compacted[0])
    card.find_element("css selector", "details.summarized a.ref").click()
    entry_tab = browser.find_element("id", "tab-entry")
    assert entry_tab.is_displayed()
    assert first["message"]["content"][:60] in entry_tab.text
    assert "compacted by " + compaction["id"] in entry_tab.text

    # An assistant turn: thinking folded, tool calls shown with their arguments.
    turn = next(e for e in entries if e["type"] == "message" and e["message"]["role"] == "assistant"
                and any(b["type"] == "thinking" for b in e["message"]["content"]))
    browser.find_element("css selector", "#tabs button[data-tab='dropped']").click()
    rows = browser.find_elements("css selector", "#tab-dropped tr.dropped")
    assert [(r.get_attribute("data-id"), r.get_attribute("data-why")) for r in rows] == [
        (d["id"], d["why"]) for d in dropped]
    browser.find_element("css selector", f"#tab-dropped tr[data-id='{turn['id']}'] a.ref").click()
    thinking = browser.find_element("css selector", "#tab-entry details.thinking")
    assert thinking.get_attribute("open") is None
    assert browser.find_elements("css selector", "#tab-entry .tool .name")
    usage = turn["message"]["usage"]
    assert (f"anthropic/claude-sonnet-4-5 · stop {turn['message']['stopReason']} · input {usage['input']:,}"
            in browser.find_element("id", "tab-entry").text)
    browser.save_screenshot(str(shots / "example-entry.png"))

    # Down/Up in the tree open the next and previous shown entries.
    from selenium.webdriver.common.keys import Keys

    click_filter(browser, "user-only")
    shown = [r["id"] for r in tree_rows(browser)]
    browser.find_element("css selector", "#tree .row").click()
    tree = browser.find_element("id", "tree")
    tree.send_keys(Keys.ARROW_DOWN)
    assert browser.find_element("id", "tab-entry").get_attribute("data-index") is not None
    assert shown[1] in browser.find_element("css selector", "#tab-entry .entry-head").text
    tree.send_keys(Keys.ARROW_UP)
    assert shown[0] in browser.find_element("css selector", "#tab-entry .entry-head").text
    click_filter(browser, "default")

    # Hovering a request shows its numbers; clicking opens it.
    browser.find_element("css selector", "#tabs button[data-tab='context']").click()
    svg = browser.find_element("css selector", "svg.plot")
    left_axis = svg.size["width"] * 64 // 1000  # the first request sits on the y axis (x=64 of the 1000-wide viewBox)
    ActionChains(browser).move_to_element_with_offset(svg, -svg.size["width"] // 2 + left_axis + 1, 0).perform()
    first_request = requests[0]
    assert f"request #1 · {first_request['id']}" in browser.find_element("id", "tip").text
    assert "reported usage  " + f"{first_request['message']['usage']['totalTokens']:,}" in browser.find_element(
        "id", "tip").text
    ActionChains(browser).click().perform()
    assert browser.find_element("id", "tab-entry").get_attribute("data-index") is not None
    assert first_request["id"] in browser.find_element("id", "tab-entry").text
    assert console_errors(browser) == []


def test_big_session_opens_lazily(browser: Any, shots: Path, tmp_path: Path) -> None:
    session = write_big(tmp_path / "big.jsonl", 30_000, compact_every=2500)
    page = export(session, tmp_path / "big.html")
    entries = read_entries(session)
    open_page(browser, page)
    ready_ms = int(browser.execute_script("return document.body.dataset.ready"))
    print(f"30k entries: {page.stat().st_size / 1e6:.1f} MB page, drawn {ready_ms} ms after navigation start")

    assert click_filter(browser, "all") == len(entries)
    assert len(tree_rows(browser)) < 120, "rows are drawn for the viewport only"
    expected_users = pi_filter(entries, "user-only", entries[-1]["id"], {})
    assert click_filter(browser, "user-only") == len(expected_users)
    branch = branch_of(entries)
    requests = [e for e in branch if e["type"] == "message" and e["message"]["role"] == "assistant"]
    compactions = [e for e in branch if e["type"] == "compaction"]
    assert browser.find_element("css selector", "svg.plot").get_attribute("data-requests") == str(len(requests))
    marks = browser.find_elements("css selector", "svg.plot g.mark-compaction")
    assert [m.get_attribute("data-entry") for m in marks] == [c["id"] for c in compactions]
    browser.save_screenshot(str(shots / "big-context.png"))

    # The last compaction summarized the entries between the previous cut and its own.
    last = compactions[-1]
    position = {e["id"]: i for i, e in enumerate(branch)}
    previous_cut = position[compactions[-2]["firstKeptEntryId"]]
    expected = [e["id"] for e in branch[previous_cut: position[last["firstKeptEntryId"]]]
                if e["type"] == "message"]
    browser.find_element("css selector", "#tabs button[data-tab='compactions']").click()
    card = browser.find_elements("css selector", ".card.compaction")[-1]
    links = open_summarized(browser, card)
    assert card.find_element("css selector", "details.summarized").get_attribute("data-count") == str(len(expected))
    shown = [a.text for a in links]
    assert shown == expected[:200]
    card.find_elements("css selector", "details.summarized a.ref")[5].click()
    text = browser.find_element("id", "tab-entry").text
    original = next(e for e in entries if e["id"] == expected[5])
    assert original["id"] in text and "compacted by" in text

    # The leaf is at the bottom of the tree.
    click_filter(browser, "default")
    browser.execute_script("const t = document.getElementById('tree'); t.scrollTop = t.scrollHeight;"
                           "t.dispatchEvent(new Event('scroll'))")
    assert any(r["id"] == entries[-1]["id"] and "leaf" in r["text"] for r in tree_rows(browser))
    assert console_errors(browser) == []


def test_hostile_session_text_runs_no_script(browser: Any, shots: Path, tmp_path: Path) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    session = write_hostile(tmp_path / f"x{HOSTILE[:8]}.jsonl".replace("<", "_").replace(">", "_"))
    page = export(session, tmp_path / "hostile.html")
    html = page.read_text(encoding="utf-8")
    assert "<img" not in html and "<script>window" not in html and "</script><!--" not in html
    open_page(browser, page)
    assert click_filter(browser, "all") == len(read_entries(session))
    # Open every entry, every tab, every fold, and hover the plot: everything that renders text.
    for index in range(len(read_entries(session))):
        browser.execute_script(f"document.querySelector('#tree .row[data-index=\"{index}\"]').click()")
        browser.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")
    for tab in ("context", "compactions", "dropped", "session"):
        browser.find_element("css selector", f"#tabs button[data-tab='{tab}']").click()
        browser.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")
    browser.find_element("css selector", "#tabs button[data-tab='compactions']").click()
    card = browser.find_element("css selector", ".card.compaction")
    browser.execute_script("arguments[0].open = false", card.find_element("css selector", "details.summarized"))
    open_summarized(browser, card)[0].click()
    browser.save_screenshot(str(shots / "hostile.png"))

    assert browser.execute_script("return window.__pwned") is None
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018
    assert console_errors(browser) == []
    assert browser.execute_script("return document.scripts.length") == 3  # the page's own three
    assert browser.execute_script("return document.querySelectorAll('img, iframe, object, embed').length") == 0
    assert browser.execute_script("return document.querySelectorAll('a[href^=\"javascript\"]').length") == 0
    # The text is shown, literally.
    body = browser.execute_script("return document.body.textContent")
    assert "<script>window.__pwned = 1; alert(1)</script>" in body
    assert browser.find_element("id", "title").text.startswith("name <script>")
    badge = browser.find_element("css selector", "#tree .row[data-id='a0000002'] .badge.label")
    assert badge.text == f"label {HOSTILE}"


def test_demo_session_shows_its_overflow_recovery(browser: Any, shots: Path, tmp_path: Path) -> None:
    """`picontext demo` overflows once and recovers by compacting: the plot and the card say so."""
    out = subprocess.run([sys.executable, "-m", "picontext", "demo", "--fast", "--dir", str(tmp_path / "demo")],
                         check=True, capture_output=True, text=True, timeout=300).stdout
    session = Path(next(line for line in out.splitlines() if line.startswith("Session file: "))[14:].strip())
    entries = read_entries(session)
    branch = branch_of(entries)
    overflowed = [e["id"] for e in branch if e["type"] == "message" and e["message"]["role"] == "assistant"
                  and e["message"].get("stopReason") == "error"]
    compactions = [e for e in branch if e["type"] == "compaction"]
    assert overflowed and len(compactions) >= 2
    page = export(session, tmp_path / "demo.html")
    open_page(browser, page)
    marks = browser.find_elements("css selector", "svg.plot .mark-overflow")
    assert [m.get_attribute("data-entry") for m in marks] == overflowed
    recoveries = browser.find_elements("css selector", "svg.plot g.mark-compaction.overflow")
    # the recovery is the compaction that follows the overflowed request
    after = next(c for c in compactions if branch.index(c) > branch.index(next(
        e for e in branch if e["id"] == overflowed[-1])))
    assert [m.get_attribute("data-entry") for m in recoveries] == [after["id"]]
    table = browser.find_element("css selector", "table.plot-compactions").text
    assert "overflow recovery" in table and f"{compactions[0]['tokensBefore']:,}" in table
    browser.save_screenshot(str(shots / "demo-context.png"))
    browser.find_element("css selector", "#tabs button[data-tab='compactions']").click()
    cards = browser.find_elements("css selector", ".card.compaction")
    assert [c.get_attribute("data-entry") for c in cards] == [c["id"] for c in compactions]
    assert "Overflow recovery" in cards[[c["id"] for c in compactions].index(after["id"])].text
    facts = compactions[-1]["details"]["verifiedFacts"]
    ledger = cards[-1].find_element("css selector", ".ledger").text
    assert facts["lastUserRequest"] and facts["lastUserRequest"] in ledger
    assert console_errors(browser) == []


@pytest.mark.parametrize("name", ["real-before-compaction", "real-large-session"])
def test_real_pi_sessions_render(browser: Any, tmp_path: Path, name: str) -> None:
    """Sessions Pi wrote (v1 files, migrated on read) open, and their entries render without a script error."""
    session = Path(__file__).resolve().parents[1] / "fixtures" / "sessions" / "v1" / f"{name}.jsonl"
    page = export(session, tmp_path / f"{name}.html")
    open_page(browser, page)
    lines = [line for line in session.read_text(encoding="utf-8").split("\n")[1:] if line.strip()]
    assert click_filter(browser, "all") == len(lines)
    kinds = browser.execute_script("return Array.from(new Set(Array.from(document.querySelectorAll('#tree .row'))"
                                   ".map(r => r.dataset.kind)))")
    assert "user" in kinds and "assistant" in kinds
    # Every 8th row, in chunks (a script call has a time limit).
    opened = 0
    for start in range(0, len(lines), 100):
        opened += browser.execute_script(
            "const [from, to] = arguments; const t = document.getElementById('tree'); let ok = 0;"
            "for (let i = from; i < to; i++) { if (i % 8) continue;"
            "  t.scrollTop = i * 22; t.dispatchEvent(new Event('scroll'));"
            "  const row = t.querySelector('.row[style*=\"top: ' + (i * 22) + 'px\"]'); row.click();"
            "  if (document.getElementById('tab-entry').dataset.index === row.dataset.index) ok++; }"
            "return ok", start, min(start + 100, len(lines)))
    assert opened == len(range(0, len(lines), 8))
    assert console_errors(browser) == []


def test_compaction_card_shows_the_summary_calls_cache_reads_and_writes(browser: Any, tmp_path: Path) -> None:
    """A compaction written with compaction.reusePromptCache: its usage and whether the prefix was reused."""
    session = tmp_path / "cached.jsonl"
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(lines):
        entry = json.loads(line)
        if entry.get("type") == "compaction":
            entry["usage"] = {"input": 40, "output": 310, "cacheRead": 15200, "cacheWrite": 25, "totalTokens": 15575,
                              "cost": {"input": 0.00012, "output": 0.00465, "cacheRead": 0.00456,
                                       "cacheWrite": 0.0000938, "total": 0.0094238}}
            entry["details"] = {**(entry.get("details") or {}), "summaryModel": "anthropic/claude-x",
                                "promptCache": {"reused": True, "prefixMessages": 12}}
            lines[n] = json.dumps(entry)
    session.write_text("\n".join(lines) + "\n", encoding="utf-8")
    open_page(browser, export(session, tmp_path / "cached.html"))
    browser.find_element("css selector", "#tabs button[data-tab='compactions']").click()
    cost = browser.find_element("css selector", ".card.compaction .summary-cost").text
    assert cost == ("summary call by anthropic/claude-x: input 40 · output 310 · cache read 15,200 · cache write 25"
                    " · $0.0094 · over the session's cached prefix")
    assert console_errors(browser) == []
    # The example's own compaction: its usage, no summary model and no prompt-cache note recorded.
    open_page(browser, export(EXAMPLE, tmp_path / "plain.html"))
    browser.find_element("css selector", "#tabs button[data-tab='compactions']").click()
    plain = browser.find_element("css selector", ".card.compaction .summary-cost").text
    assert plain == "summary call: input 22,625 · output 1,204 · cache read 0 · cache write 0 · $0.0859"


def test_failed_summary_attempts_show_in_the_entry_tree(browser: Any, tmp_path: Path) -> None:
    """`picontext.compaction-failed` records (compaction/fallback.py) are listed with the conversation,
    where the other custom entries (settings) are hidden by the default filter."""
    session = tmp_path / "failed.jsonl"
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    last = json.loads(lines[-1])
    records = []
    for attempt, step in ((1, "retry"), (2, "fallback")):
        record = {"type": "custom", "customType": "picontext.compaction-failed", "id": f"f00d000{attempt}",
                  "parentId": last["id"], "timestamp": last["timestamp"],
                  "data": {"version": 1, "reason": "overflow", "attempt": attempt, "kind": "length", "next": step,
                           "error": "Summarization failed: generation hit the token cap"}}
        records.append(record)
        last = record
    session.write_text("\n".join([*lines, *(json.dumps(r) for r in records)]) + "\n", encoding="utf-8")
    open_page(browser, export(session, tmp_path / "failed.html"))

    def failed_rows() -> list[dict[str, str]]:
        """Every drawn row of the failure records, the tree scrolled from top to bottom (it draws lazily)."""
        seen: dict[str, dict[str, str]] = {}
        browser.execute_script("document.getElementById('tree').scrollTop = 0")
        while True:
            seen.update({r["id"]: r for r in tree_rows(browser) if r["kind"] == "compaction_failed"})
            if browser.execute_script(
                    "const t = document.getElementById('tree'); t.dispatchEvent(new Event('scroll'));"
                    "if (t.scrollTop + t.clientHeight >= t.scrollHeight - 1) return true;"
                    "t.scrollTop += t.clientHeight; t.dispatchEvent(new Event('scroll')); return false"):
                return [seen[k] for k in sorted(seen)]

    shown = failed_rows()
    assert [r["id"] for r in shown] == ["f00d0001", "f00d0002"]
    assert "compaction failed · overflow attempt 1: length -> retry: Summarization failed" in shown[0]["text"]
    click_filter(browser, "user-only")
    assert [r["id"] for r in failed_rows()] == ["f00d0002"]  # only as the leaf, which every filter shows
    click_filter(browser, "default")
    assert [r["id"] for r in failed_rows()] == ["f00d0001", "f00d0002"]
    assert console_errors(browser) == []
