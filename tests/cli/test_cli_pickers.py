"""The /tree selector's rows and folding (the keys themselves are driven in tmux by
test_cli_interactive.py)."""

from __future__ import annotations

from typing import Any

from picontext.cli.modes.pickers import TreePicker, tree_rows
from picontext.session.manager import SessionManager

USAGE = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
         "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 1}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}], "api": "x", "provider": "p",
            "model": "m", "stopReason": "stop", "timestamp": 2, "usage": USAGE}


def branched() -> tuple[SessionManager, dict[str, str]]:
    """u1 -> a1 -> {u2 -> a2, u3 -> a3 (leaf)}, a model change (not shown) between u1 and a1."""
    sm = SessionManager.in_memory("/p")
    ids = {"u1": sm.append_message(user("plan"))}
    sm.append_model_change("p", "m2")
    ids["a1"] = sm.append_message(assistant("two options"))
    ids["u2"] = sm.append_message(user("try A"))
    ids["a2"] = sm.append_message(assistant("A failed"))
    sm.branch(ids["a1"])
    ids["u3"] = sm.append_message(user("try B"))
    ids["a3"] = sm.append_message(assistant("B works"))
    sm.append_label_change(ids["u1"], "start")
    return sm, ids


def test_rows_draw_the_tree_skip_hidden_entries_and_mark_path_leaf_and_labels() -> None:
    sm, ids = branched()
    rows = tree_rows(sm)
    assert [(r.prefix, r.text) for r in rows] == [
        ("", "user: plan"), ("", "assistant: two options"),
        ("├─ ", "user: try A"), ("│  ", "assistant: A failed"),
        ("└─ ", "user: try B"), ("   ", "assistant: B works"),
    ]
    by_id = {r.id: r for r in rows}
    assert by_id[ids["a1"]].parent == ids["u1"]  # the model change between them is passed over
    assert [r.leaf for r in rows] == [False] * 5 + [True]  # the label entry is the file's leaf: its row is marked
    assert [r.on_path for r in rows] == [True, True, False, False, True, True]
    assert by_id[ids["u1"]].label == "start"


def test_fold_hides_a_subtree_and_unfold_brings_it_back() -> None:
    sm, ids = branched()
    picker = TreePicker(tree_rows(sm))
    assert picker.selected == ids["a3"]
    picker.fold()  # a leaf row: folding moves to its parent
    assert picker.selected == ids["u3"]
    picker.selected = ids["a1"]
    picker.fold()
    assert [r.id for r in picker.visible()] == [ids["u1"], ids["a1"]]
    assert "(+4 folded)" in "".join(text for _, text in picker.text())
    picker.unfold()
    assert len(picker.visible()) == 6
    picker.move(-10)
    assert picker.selected == ids["u1"]


def test_resume_alone_offers_the_20_most_recent_sessions(monkeypatch: Any) -> None:
    """docs/cli.md: `-r` alone picks one of the 20 most recent sessions of this directory (newest
    first, as the repository lists them); the answer is the one picked."""
    import datetime
    import sys
    from types import SimpleNamespace

    from picontext.cli.modes import pickers

    when = datetime.datetime(2026, 1, 1)
    infos = [SimpleNamespace(id=f"{n:04d}aaaa-0000", file=f"/s/{n}.jsonl", name=None, first_message=f"task {n}",
                             modified=when, message_count=2) for n in range(25)]
    offered: list[list[tuple[str, str]]] = []

    async def choose(question: str, options: list[tuple[str, str]]) -> str:
        offered.append(options)
        return "20"

    monkeypatch.setattr(pickers, "choose", choose)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert pickers.pick_session("/w", infos=infos) == "/s/19.jsonl"
    assert [key for key, _ in offered[0]] == [str(n) for n in range(1, 21)]
    assert "task 0" in offered[0][0][1] and "task 19" in offered[0][-1][1]
