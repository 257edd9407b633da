from __future__ import annotations

from pathlib import Path

import pytest
from tool_helpers import call, text_of

from picontext.agent.tools import FindTool, GrepTool, LsTool
from picontext.agent.tools.find import glob_match
from picontext.agent.tools.truncate import truncate_head, truncate_line, truncate_tail


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("needle in git\n")
    (tmp_path / "src" / "a.py").write_text("import os\nneedle = 1\nprint(needle)\n")
    (tmp_path / "src" / "pkg" / "b.ts").write_text("const Needle = 2;\n")
    (tmp_path / "README.md").write_text("# readme\n")
    (tmp_path / ".env").write_text("X=1\n")
    (tmp_path / "bin.dat").write_bytes(b"needle\0\0")
    return tmp_path


async def test_ls_sorted_dirs_marked(tree: Path) -> None:
    result = await call(LsTool(str(tree)))
    assert text_of(result) == ".env\n.git/\nbin.dat\nREADME.md\nsrc/"
    limited = await call(LsTool(str(tree)), path="src", limit=1)
    assert text_of(limited).startswith("a.py\n\n[1 of 2 entries shown")


async def test_ls_errors(tree: Path) -> None:
    assert text_of(await call(LsTool(str(tree)), path="nope")) == "Path not found: nope"
    assert text_of(await call(LsTool(str(tree)), path="README.md")) == "Not a directory: README.md"
    (tree / "empty").mkdir()
    assert text_of(await call(LsTool(str(tree)), path="empty")) == "(empty directory)"


async def test_grep_matches_with_paths_and_lines(tree: Path) -> None:
    result = await call(GrepTool(str(tree)), pattern="needle")
    assert text_of(result) == "src/a.py:2: needle = 1\nsrc/a.py:3: print(needle)"


async def test_grep_options(tree: Path) -> None:
    tool = GrepTool(str(tree))
    assert "src/pkg/b.ts:1: const Needle = 2;" in text_of(await call(tool, pattern="needle", ignoreCase=True))
    only_ts = await call(tool, pattern="needle", ignoreCase=True, glob="*.ts")
    assert text_of(only_ts) == "src/pkg/b.ts:1: const Needle = 2;"
    ctx = await call(tool, pattern="^needle", context=1)
    assert text_of(ctx) == "src/a.py-1- import os\nsrc/a.py:2: needle = 1\nsrc/a.py-3- print(needle)"
    literal = await call(tool, pattern="print(", literal=True)
    assert text_of(literal) == "src/a.py:3: print(needle)"
    limited = await call(tool, pattern="needle", limit=1)
    assert text_of(limited).startswith("src/a.py:2: needle = 1\n\n[stopped at 1 matches")
    assert text_of(await call(tool, pattern="zzz")) == "No matches found"
    bad = await call(tool, pattern="(")
    assert bad.is_error and "Invalid regular expression" in text_of(bad)


async def test_find_by_name_and_path_glob(tree: Path) -> None:
    tool = FindTool(str(tree))
    assert text_of(await call(tool, pattern="*.py")) == "src/a.py"
    assert text_of(await call(tool, pattern="src/**/*.ts")) == "src/pkg/b.ts"
    assert text_of(await call(tool, pattern="*.{py,ts}")) == "src/a.py\nsrc/pkg/b.ts"
    assert text_of(await call(tool, pattern="config")).startswith("No files found")
    assert text_of(await call(tool, pattern="*", path="missing")) == "Path not found: missing"


def test_glob_match() -> None:
    assert glob_match("**/*.py", "a.py") and glob_match("**/*.py", "x/y/a.py")
    assert glob_match("src/*.py", "src/a.py") and not glob_match("src/*.py", "src/x/a.py")
    assert glob_match("[ab].txt", "a.txt") and not glob_match("[!ab].txt", "a.txt")


def test_truncation_head_tail_line() -> None:
    text = "\n".join(str(i) for i in range(10))
    head = truncate_head(text, max_lines=3)
    assert (head.content, head.truncated_by, head.total_lines) == ("0\n1\n2", "lines", 10)
    tail = truncate_tail(text, max_lines=3)
    assert tail.content == "7\n8\n9"
    by_bytes = truncate_head("aaaa\nbbbb\ncccc", max_bytes=9)
    assert (by_bytes.content, by_bytes.truncated_by) == ("aaaa\nbbbb", "bytes")
    huge = truncate_head("x" * 100, max_bytes=10)
    assert huge.first_line_exceeds_limit and huge.content == ""
    assert truncate_tail("y" * 100, max_bytes=10).content == "y" * 10
    assert truncate_line("z" * 10, 4) == ("zzzz... [truncated]", True)
    assert not truncate_head("short").truncated
