from __future__ import annotations

from pathlib import Path

from tool_helpers import call, text_of

from picontext.agent.tools import EditTool, ReadTool, WriteTool
from picontext.agent.tools.truncate import DEFAULT_MAX_LINES


async def test_read_relative_path(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\ntwo\nthree\n")
    result = await call(ReadTool(str(tmp_path)), path="a.txt")
    assert not result.is_error
    assert text_of(result) == "one\ntwo\nthree"


async def test_read_offset_limit_says_how_to_continue(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("\n".join(f"line {i}" for i in range(1, 11)))
    result = await call(ReadTool(str(tmp_path)), path="a.txt", offset=3, limit=2)
    assert text_of(result).startswith("line 3\nline 4\n\n[6 more lines in file. Use offset=5 to continue.]")


async def test_read_large_file_is_truncated_with_hint(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("\n".join(f"l{i}" for i in range(1, 3001)))
    result = await call(ReadTool(str(tmp_path)), path="big.txt")
    text = text_of(result)
    assert f"[Showing lines 1-{DEFAULT_MAX_LINES} of 3000. Use offset={DEFAULT_MAX_LINES + 1} to continue.]" in text
    assert result.details["truncation"]["truncatedBy"] == "lines"


async def test_read_errors_are_clear(tmp_path: Path) -> None:
    tool = ReadTool(str(tmp_path))
    (tmp_path / "d").mkdir()
    (tmp_path / "short.txt").write_text("x\n")
    missing = await call(tool, path="nope.txt")
    assert missing.is_error and text_of(missing) == "File not found: nope.txt"
    directory = await call(tool, path="d")
    assert directory.is_error and "is a directory" in text_of(directory)
    beyond = await call(tool, path="short.txt", offset=5)
    assert beyond.is_error and "beyond the end" in text_of(beyond)


async def test_read_image_is_an_attachment(tmp_path: Path) -> None:
    (tmp_path / "p.png").write_bytes(b"\x89PNG\r\n\x1a\n0000")
    result = await call(ReadTool(str(tmp_path)), path="p.png")
    assert [b["type"] for b in result.content] == ["text", "image"]
    assert result.content[1]["mimeType"] == "image/png"


async def test_write_creates_parents_and_overwrites(tmp_path: Path) -> None:
    tool = WriteTool(str(tmp_path))
    result = await call(tool, path="sub/dir/f.txt", content="héllo")
    assert not result.is_error
    assert text_of(result) == "Successfully wrote 6 bytes to sub/dir/f.txt"
    await call(tool, path="sub/dir/f.txt", content="new")
    assert (tmp_path / "sub/dir/f.txt").read_text() == "new"


async def test_write_to_directory_fails(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    result = await call(WriteTool(str(tmp_path)), path="d", content="x")
    assert result.is_error and "is a directory" in text_of(result)


async def test_edit_replaces_unique_text_with_diff(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    result = await call(EditTool(str(tmp_path)), path="m.py", oldText="    return 2", newText="    return 3")
    assert not result.is_error, text_of(result)
    assert f.read_text() == "def f():\n    return 1\n\ndef g():\n    return 3\n"
    assert result.details["firstChangedLine"] == 5
    assert "-    return 2\n+    return 3\n" in result.details["diff"]


async def test_edit_no_match_and_multiple_matches(tmp_path: Path) -> None:
    f = tmp_path / "m.txt"
    f.write_text("a\nb\na\n")
    tool = EditTool(str(tmp_path))
    none = await call(tool, path="m.txt", oldText="zzz", newText="y")
    assert none.is_error and text_of(none).startswith("Could not find the exact text in m.txt")
    many = await call(tool, path="m.txt", oldText="a", newText="c")
    assert many.is_error and text_of(many).startswith("Found 2 occurrences of oldText in m.txt")
    assert f.read_text() == "a\nb\na\n"


async def test_edit_other_errors(tmp_path: Path) -> None:
    (tmp_path / "m.txt").write_text("abc")
    tool = EditTool(str(tmp_path))
    assert "File not found" in text_of(await call(tool, path="x.txt", oldText="a", newText="b"))
    assert "must not be empty" in text_of(await call(tool, path="m.txt", oldText="", newText="b"))
    assert "identical" in text_of(await call(tool, path="m.txt", oldText="abc", newText="abc"))


async def test_edit_keeps_crlf_and_bom(tmp_path: Path) -> None:
    f = tmp_path / "w.txt"
    f.write_bytes("\ufeffone\r\ntwo\r\nthree\r\n".encode())
    result = await call(EditTool(str(tmp_path)), path="w.txt", oldText="one\ntwo", newText="1\n2")
    assert not result.is_error, text_of(result)
    assert f.read_bytes() == "\ufeff1\r\n2\r\nthree\r\n".encode()
