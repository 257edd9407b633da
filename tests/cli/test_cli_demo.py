"""`picontext demo` runs offline to the end, leaves a valid session with compactions, tells one
consistent story in its numbers, and ends with commands that work as printed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from picontext.cli.demo_cmds import WINDOW, how_to_run_picontext
from picontext.cli.loading import load_session

# The console script installed beside this interpreter (`.venv/bin/picontext` in a clone).
PROGRAM = Path(sys.executable).parent / "picontext"


@dataclass
class Demo:
    out: str
    caller: Path  # the directory it ran from (stdout a pipe)
    home: Path  # its PICONTEXT_DIR
    project: Path

    def env(self, path: str = "/usr/bin:/bin") -> dict[str, str]:
        return _env(path, self.home)


def _env(path: str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(PATH=path, PICONTEXT_DIR=str(home))
    return env


def _run_demo(root: Path, path: str) -> Demo:
    """The demo as a user runs it: its console script, from a directory of their own."""
    caller, home = root / "caller", root / "home"
    caller.mkdir()
    home.mkdir()
    result = subprocess.run([str(PROGRAM), "demo", "--fast", "--dir", str(root / "demo")], cwd=caller,
                            capture_output=True, text=True, env=_env(path, home), timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    return Demo(result.stdout, caller, home, root / "demo" / "project")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    """One run without picontext on PATH, shared by the tests that only read what it did."""
    return _run_demo(tmp_path_factory.mktemp("demo"), "/usr/bin:/bin")


def _footers(out: str) -> list[tuple[float, int]]:
    """(percent, tokens) of every footer line, in order."""
    return [(float(p), int(t.replace(",", "")))
            for p, t in re.findall(r"^── demo/scripted-12k  ~?(\d+\.\d)%/12k \(auto\) · ~?([\d,]+) tokens", out, re.M)]


def test_demo_runs_offline_and_leaves_a_compacted_session(demo: Demo) -> None:
    out, project = demo.out, demo.project
    match = re.search(r"Session file: (\S+\.jsonl)", out)
    assert match, out
    path = Path(match.group(1))
    assert path.is_file() and path.is_relative_to(demo.home / "sessions")  # the project's own session directory
    listed = subprocess.run([sys.executable, "-m", "picontext", "sessions", "--json"], cwd=project,
                            capture_output=True, text=True, env=demo.env(os.environ["PATH"]), timeout=60)
    assert [row["path"] for row in json.loads(listed.stdout)] == [str(path)]

    session = load_session(str(path))  # a valid session file
    kinds = [e["type"] for e in session.entries]
    assert "▸ bash" in out and "▸ write" in out and "▸ edit" in out and "▸ read" in out
    assert "Context compacted" in out and "─ demo/scripted-12k" in out and "/12k" in out
    assert re.search(r"~\d+\.\d%/12k", out)  # the estimate right after a compaction, before a reply reports usage

    assert sorted(p.name for p in project.iterdir()) == ["corpus.txt", "sample.txt", "test_wordstats.py",
                                                         "wordstats.py"]
    tests = subprocess.run([sys.executable, "-m", "unittest", "-q", "test_wordstats"], cwd=project,
                           capture_output=True, text=True, timeout=60)
    assert tests.returncode == 0 and "Ran 3 tests" in tests.stderr, tests.stderr  # the tool calls wrote working code

    # The runtime compacts by itself: at the threshold, and after an overflow error.
    assert "Context compacted (threshold)" in out and "(auto)" in out
    assert "Context compacted (overflow)" in out and "retrying the request" in out
    assert kinds.count("compaction") == 2 and "context_edit" in kinds
    omitted = [e for e in session.entries if e["type"] == "context_edit"]
    assert omitted[0]["replacement"] is None
    messages = [e["message"] for e in session.entries if e["type"] == "message"]
    assert messages[-1]["role"] == "assistant" and messages[-1]["stopReason"] == "stop"
    assert json.loads(path.read_text().splitlines()[0])["type"] == "session"


def test_the_numbers_of_the_demo_tell_one_story(demo: Demo) -> None:
    """The model counts tokens as picontext estimates them, so the footer before the paste plus
    the paste is exactly what the overflow error reports and what the compaction says it had."""
    out = demo.out
    footers = _footers(out)
    assert len(footers) > 15
    for percent, count in footers:
        assert percent == round(count / WINDOW * 100, 1)  # the percentage is of the count beside it
    before_paste = out.split("> CI fails", 1)[0]
    last_footer = _footers(before_paste)[-1][1]
    pasted = int(re.search(r"\[pasted: \d+ lines, ([\d,]+) tokens\]", out).group(1).replace(",", ""))  # type: ignore[union-attr]
    refused = int(re.search(r"your messages resulted in (\d+) tokens", out).group(1))  # type: ignore[union-attr]
    before, after = (int(n.replace(",", "")) for n in re.search(  # type: ignore[union-attr]
        r"Context compacted \(overflow\): ([\d,]+) → ([\d,]+) tokens", out).groups())
    assert last_footer + pasted == refused == before > WINDOW > after
    assert _footers(out.split("overflowed", 1)[1])[0][1] == refused  # the footer at the failed turn says it too
    threshold_before = int(re.search(r"Context compacted \(threshold\): ([\d,]+) →", out).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert _footers(out.split("Context compacted (threshold)", 1)[0])[-1][1] == threshold_before > 9_000


def test_demo_output_in_a_pipe_is_plain_and_names_no_keys(demo: Demo) -> None:
    out = demo.out
    assert "Ctrl+O" not in out and "Esc" not in out  # the demo takes no keys
    lines = out.splitlines()
    assert not [line for line in lines if line != line.rstrip()]  # no padding to a width
    assert "Done: `wordstats.py` counts words, unique words and the three most common ones, as a module or " \
           "from the command line" in out  # a reply is one line as written, not wrapped at 80 columns


def test_the_commands_it_prints_work_as_printed(demo: Demo) -> None:
    """Without picontext on PATH the commands name the program's path and say how to activate;
    each printed line, pasted into a shell in the same directory, works."""
    out = demo.out
    tail = out.split("Look inside", 1)[1].splitlines()[1:]
    commands = [line.strip() for line in tail if line.startswith("  ")]
    assert len(commands) == 4
    session_id = re.search(r"_([0-9a-f-]{36})\.jsonl", out).group(1)  # type: ignore[union-attr]
    assert commands[0] == f"{PROGRAM} tree {session_id[:13]}"  # outside the caller's directory: its full path
    assert "source " in tail[-1] and "activate" in tail[-1]
    for command in commands:
        done = subprocess.run(["bash", "-c", command], cwd=demo.caller, capture_output=True, text=True,
                              env=demo.env(), timeout=60)
        assert done.returncode == 0, (command, done.stderr)
        assert session_id[:8] in done.stdout or "compaction" in done.stdout


def test_with_picontext_on_path_the_commands_say_just_picontext(tmp_path: Path) -> None:
    out = _run_demo(tmp_path, f"{PROGRAM.parent}:/usr/bin:/bin").out
    tail = out.split("Look inside", 1)[1].splitlines()[1:]
    assert tail[0].strip().startswith("picontext tree ")
    assert tail[3].strip().endswith("&& picontext sessions")
    assert all(len(line) <= 80 for line in tail[:3]) and "activate" not in out.split("Look inside", 1)[1]


def test_a_program_below_the_current_directory_is_named_relative_to_it(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "picontext").write_text("#!/bin/sh\n")
    (bin_dir / "activate").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(bin_dir / "picontext"), "demo"])
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    command, anywhere, hint = how_to_run_picontext()
    assert (command, anywhere) == (".venv/bin/picontext", str(bin_dir / "picontext"))
    assert hint == ("picontext is not on your PATH; `source .venv/bin/activate` puts it there, then `picontext ...` "
                    "works")
