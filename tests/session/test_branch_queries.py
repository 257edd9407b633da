"""Branch questions on the request path (position of an entry, newest compaction, entries after,
a lazy view) agree with get_branch() and do not parse the branch."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from picontext.session.manager import SessionManager
from picontext.session.store import RawLine


def _session(tmp_path: Path, turns: int, seed: int) -> SessionManager:
    rng = random.Random(seed)
    sm = SessionManager.create("/w", str(tmp_path))
    for i in range(turns):
        sm.append_message({"role": "user", "content": f"q{i}", "timestamp": i})
        sm.append_message({"role": "assistant", "content": [{"type": "text", "text": "a"}], "api": "x",
                           "provider": "p", "model": "m", "usage": {}, "stopReason": "stop", "timestamp": i})
        roll = rng.random()
        if roll < 0.1 and i > 2:
            sm.append_compaction("S", sm.get_branch()[-3]["id"], 10)
        elif roll < 0.2 and i > 2:
            sm.branch(sm.get_branch()[-4]["id"])
        elif roll < 0.3:
            users = [e["id"] for e in sm.get_branch() if e["type"] == "message" and e["message"]["role"] == "user"]
            sm.append_context_edit(users[-1], None)
    return sm


def _check(sm: SessionManager) -> None:
    branch = sm.get_branch()
    view = sm.branch_view()
    assert list(view) == branch and len(view) == len(branch)
    assert list(reversed(view)) == branch[::-1]
    compactions = [i for i, e in enumerate(branch) if e["type"] == "compaction"]
    assert sm.latest_compaction_position() == (compactions[-1] if compactions else None)
    for i, entry in enumerate(branch):
        assert sm.branch_position(entry["id"]) == i
        assert sm.entries_after(entry["id"]) == branch[i + 1 :]
    assert sm.branch_position("not-an-id") is None and sm.entries_after("not-an-id") == []
    projected = sm.build_session_projection().entries
    assert sm.context_has_edits() == any(item.source_entry.get("type") == "context_edit" for item in projected)
    for entry in branch:
        expected = any(item.source_entry.get("id") == entry["id"] and item.messages for item in projected)
        assert sm.contributes_to_context(entry["id"]) == expected


def test_answers_equal_get_branch(tmp_path: Path) -> None:
    for seed in range(6):
        sm = _session(tmp_path / str(seed), 30, seed)
        _check(sm)
        sm.append_message({"role": "user", "content": "more", "timestamp": 99})  # incremental path
        _check(sm)
        _check(SessionManager.open(sm.get_session_file() or ""))  # rebuilt path


def test_request_questions_parse_nothing_but_the_context(tmp_path: Path) -> None:
    sm = _session(tmp_path, 200, 3)
    compaction_id = sm.append_compaction("S", sm.get_branch()[-3]["id"], 10)
    sm.append_message({"role": "user", "content": "last", "timestamp": 1})
    reopened = SessionManager.open(sm.get_session_file() or "")
    reopened.build_session_projection()
    index: Any = reopened._index  # counting the entries still unparsed is the point
    unparsed = sum(type(e) is RawLine for e in index.entries)
    assert unparsed > 300
    last_id = reopened.get_leaf_id()
    reopened.latest_compaction_position()
    reopened.branch_position(last_id)
    assert reopened.entries_after(compaction_id)[-1]["id"] == last_id
    view = reopened.branch_view()
    assert view[-1]["id"] == last_id
    assert sum(type(e) is RawLine for e in index.entries) == unparsed


def _file(tmp_path: Path, name: str, links: list[tuple[str, str | None]]) -> str:
    """A session file whose entries are user messages with these (id, parentId), in this order."""
    import json

    lines = [{"type": "session", "version": 3, "id": "s-" + name, "timestamp": "2026-03-01T10:00:00.000Z", "cwd": "/w"}]
    lines += [{"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-03-01T10:00:01.000Z",
               "message": {"role": "user", "content": f"m{i}", "timestamp": i}}
              for i, (entry_id, parent) in enumerate(links)]
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def _check_positions(sm: SessionManager, ids: list[str]) -> None:
    on_branch = [e.get("id") for e in sm.get_branch()]
    for entry_id in [*ids, "nope"]:
        expected = on_branch.index(entry_id) if entry_id in on_branch else None  # the first occurrence, as Pi
        assert sm.branch_position(entry_id) == expected, entry_id


def test_branch_questions_when_parents_come_after_children_in_the_file(tmp_path: Path) -> None:
    """The index answers branch positions for a path written in file order; one whose parents
    were appended after their children (a hand-made file) is answered the same."""
    links = [("r", None), ("c", "p"), ("p", "r"), ("d", "c"), ("o", "r")]
    sm = SessionManager.open(_file(tmp_path, "order", links))
    sm.branch("d")
    assert [e["id"] for e in sm.get_branch()] == ["r", "p", "c", "d"]
    _check_positions(sm, [i for i, _ in links])
    sm.append_context_edit("c", None)  # on the branch although written before its parent
    from picontext.errors import NotOnActiveBranch

    try:
        sm.append_context_edit("o", None)
        raise AssertionError("an entry of another branch was edited")
    except NotOnActiveBranch:
        pass
    _check_positions(sm, [i for i, _ in links])


def test_branch_questions_with_a_duplicated_id(tmp_path: Path) -> None:
    """An id written twice: the branch position is its first occurrence on the branch (Pi's
    lookup by id), not the index's latest entry of that id."""
    links = [("r", None), ("x", "r"), ("y", "r"), ("y", "x"), ("z", "y"), ("w", "r")]
    sm = SessionManager.open(_file(tmp_path, "dup", links))
    sm.branch("z")
    assert [e["id"] for e in sm.get_branch()] == ["r", "x", "y", "z"]
    _check_positions(sm, [i for i, _ in links])
    sm.append_message({"role": "user", "content": "more", "timestamp": 9})
    _check_positions(sm, [i for i, _ in links])
    sm.append_context_edit("y", None)
    _check_positions(sm, [i for i, _ in links])


def test_an_appended_duplicate_id_is_noticed_by_the_index() -> None:
    """Another writer's line may repeat an id: from then on the index no longer claims an id
    names one entry, so branch positions take the general (first occurrence) path."""
    from picontext.session.index import EntryIndex

    index = EntryIndex()
    index.load([{"type": "session", "id": "s"}, {"type": "message", "id": "a", "parentId": None}])
    assert index.ids_unique()
    index.add({"type": "message", "id": "b", "parentId": "a"})
    assert index.ids_unique()
    index.add({"type": "message", "id": "a", "parentId": "b"})
    assert not index.ids_unique()
    with_list_id = EntryIndex()
    with_list_id.load([{"type": "session", "id": "s"}, {"type": "message", "id": ["a"], "parentId": None}])
    assert not with_list_id.ids_unique()
