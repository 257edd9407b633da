"""An entry of a long line released by the session (`SessionManager.release_contents`, used by a
compaction that shortens a kept tool output of megabytes): the projection rebuilt after it is the
pure pipeline's, reading only the entry's head when a context edit replaces its content, and the
whole entry again when nothing does (a compaction that failed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from picontext.session import store
from picontext.session.long_lines import hollow_content
from picontext.session.manager import SessionManager
from picontext.session.projection import build_session_projection

HEADER = {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-12-02T00:00:00.000Z", "cwd": "/w"}


def write_session(path: Path, turns: int, huge_chars: int) -> None:
    """`turns` user/assistant pairs, then a tool output of `huge_chars` characters (`e{turns}`)."""
    values: list[Any] = [HEADER]
    parent = None
    for i in range(turns + 1):
        role = "toolResult" if i == turns else "user" if i % 2 == 0 else "assistant"
        content: Any = f"turn {i} " * 20 if role == "user" else [{"type": "text", "text": f"answer {i} " * 20}]
        message = {"role": role, "content": content, "timestamp": i}
        if role == "toolResult":
            line = "2026-12-02T12:00:00Z [build] linking \"module\" ... ok \\ é 😀\n"
            message.update(toolCallId="c", toolName="read", isError=False,
                           content=[{"type": "text", "text": line * (huge_chars // len(line) + 1)}])
        values.append({"type": "message", "id": f"e{i}", "parentId": parent,
                       "timestamp": "2026-12-02T00:00:01.000Z", "message": message})
        parent = f"e{i}"
    path.write_text("".join(json.dumps(v, ensure_ascii=False) + "\n" for v in values))

HUGE_ID = "e6"


def _opened(tmp_path: Path) -> SessionManager:
    path = tmp_path / "s.jsonl"
    write_session(path, 6, 1_200_000)
    manager = SessionManager.open(str(path), str(tmp_path))
    manager.get_branch()  # every entry parsed
    manager.build_session_projection()
    return manager


def _whole_reads(monkeypatch: Any) -> list[int]:
    reads: list[int] = []
    load_long = store.FileLines.load_long

    def counted(self: Any, offset: int, length: int, *, texts: bool = True) -> Any:
        if texts:
            reads.append(length)
        return load_long(self, offset, length, texts=texts)

    monkeypatch.setattr(store.FileLines, "load_long", counted)
    return reads


def _pure(manager: SessionManager) -> Any:
    return build_session_projection(manager.get_branch())


def test_a_released_output_shortened_and_compacted_is_never_read_back(tmp_path: Path, monkeypatch: Any) -> None:
    manager = _opened(tmp_path)
    kept = manager.build_session_projection().messages[-3]  # an answer of the kept tail
    reads = _whole_reads(monkeypatch)
    manager.release_contents([HUGE_ID])
    manager.append_context_edits([(HUGE_ID, {"content": "shortened"})])
    manager.append_compaction("summary", "e4", 1000)
    projection = manager.build_session_projection()
    assert reads == []
    assert projection.messages[-1]["content"] == [{"type": "text", "text": "shortened"}]
    assert projection.messages[-3] is kept  # the kept tail's messages stay the same objects
    head = next(item.source_entry for item in projection.entries if item.source_entry.get("id") == HUGE_ID)
    assert head["message"]["content"] == [{"type": "text", "text": ""}]  # the head: its long text left in the file
    pure = _pure(manager)  # the branch parsed whole: the output is read back now
    assert reads != []
    assert list(projection.messages) == list(pure.messages)


def test_a_released_output_not_edited_is_read_back_whole(tmp_path: Path) -> None:
    manager = _opened(tmp_path)
    before = list(manager.build_session_projection().messages)
    manager.release_contents([HUGE_ID])
    after = manager.build_session_projection()
    assert list(after.messages) == before
    assert list(after.messages) == list(_pure(manager).messages)


def test_a_released_output_hidden_by_an_edit_is_not_read_back(tmp_path: Path, monkeypatch: Any) -> None:
    manager = _opened(tmp_path)
    reads = _whole_reads(monkeypatch)
    manager.release_contents([HUGE_ID])
    manager.append_context_edits([(HUGE_ID, None)])
    projection = manager.build_session_projection()
    assert reads == []
    assert all(m.get("role") != "toolResult" for m in projection.messages)
    assert list(projection.messages) == list(_pure(manager).messages)


def test_a_head_with_a_long_string_outside_the_content_is_not_used() -> None:
    marker = "\x00picontext-long-0a1b2c:0"
    assert hollow_content({"id": "x", "message": {"role": "toolResult", "content": [{"text": marker}]}}) == {
        "id": "x", "message": {"role": "toolResult", "content": [{"text": ""}]}}
    assert hollow_content({"id": "x", "message": {"role": "toolResult", "details": marker, "content": []}}) is None
    assert hollow_content({"id": marker, "message": {"role": "toolResult", "content": []}}) is None
