"""The interactive chat driven in a real terminal (tmux): type a prompt, see the streamed reply and
the footer, run /compact and /tree, leave with /quit."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from picontext.testing import ScriptedModelServer, reply, text, tokens, tool_call
from terminal import PICONTEXT, Terminal, chat_home


@pytest.fixture(autouse=True)
def _tmux_is_required() -> None:
    # Never a skip: a run without tmux would be green without ever testing the real terminal.
    assert shutil.which("tmux") is not None, "tmux is not installed: run scripts/install/tmux.sh"


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server
        server.assert_complete()


def test_chat_prompt_footer_compact_tree_quit(server: ScriptedModelServer, tmp_path: Path) -> None:
    home = Path(os.environ["PICONTEXT_DIR"])
    provider = {"baseUrl": server.url + "/v1", "api": "openai-completions", "apiKey": "k",
                "models": [{"id": "m1", "contextWindow": 200_000}]}
    (home / "models.json").write_text(json.dumps({"providers": {"scripted": provider}}))
    (home / "settings.json").write_text(json.dumps({"compaction": {"keepRecentTokens": 10}}))
    server.expect(
        reply(tool_call("write", {"path": "notes.md", "content": "# Notes\n"}), usage=tokens(1_000, 20)),
        reply(text("I created **notes.md** with a heading.\n\n- first point\n- second point"),
              usage=tokens(74_000, 60)).slow(0.05),
        text("## Goal\nKeep notes in notes.md."),
    )
    env = {"PICONTEXT_DIR": str(home), "TERM": "xterm-256color", "PATH": os.environ.get("PATH", "")}
    term = Terminal(f"{shlex.quote(sys.executable)} -m picontext --model scripted/m1", tmp_path, env)
    try:
        term.wait_for("/help for commands")
        term.type("please write notes.md")
        screen = term.wait_for("── scripted/m1  37.0%/200k (auto)")
        assert "▸ write path=notes.md" in screen
        assert "I created notes.md with a heading." in screen  # Markdown rendered: no ** left
        assert "• first point" in screen
        assert (tmp_path / "notes.md").read_text() == "# Notes\n"

        term.type("/compact")
        screen = term.wait_for("Context compacted (manual)")
        # the footer shows the estimate of the compacted context, not "?", until a reply reports usage
        screen = term.wait_for("── scripted/m1  ~")
        assert re.search(r"── scripted/m1  ~\d+\.\d%/200k \(auto\)", screen)
        term.send("C-o")  # the summary can be opened
        term.wait_for("── compaction summary ──")
        term.wait_for("Keep notes in notes.md.")

        term.type("/tree")
        screen = term.wait_for("↑↓ move", "◀ you are here", "compaction")  # the arrow-key tree selector
        term.send("Home")
        term.wait_until(lambda screen: any(line.startswith("›") and "user: please write notes.md" in line
                                           for line in screen.splitlines()))
        term.send("l")  # label the entry, then back in the selector on the same entry
        term.wait_for("Label for")
        term.type("first ask")
        term.wait_until(lambda screen: any(line.startswith("›") and "user: please write notes.md" in line
                                           and "[first ask]" in line for line in screen.splitlines()))
        term.send("Enter")
        term.wait_for("Summarize the branch you leave?", "› [n] No summary")  # arrows choose; nothing pre-typed
        term.send("Enter")
        term.wait_for("Moved to")
        term.wait_for("\n> please write notes.md")  # the user message is back in the editor, to edit and resend

        term.send("C-u")
        term.type("/quit")
        screen = term.wait_for("EXITED-0")
        assert "Session saved:" in screen
    finally:
        term.close()
    [path] = list((home / "sessions").rglob("*.jsonl"))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    kinds = [entry["type"] for entry in lines]
    assert "compaction" in kinds
    assert [e["label"] for e in lines if e["type"] == "label"] == ["first ask"]


def test_chat_needs_a_terminal(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "picontext", "chat", "--no-session"], capture_output=True,
                            text=True, stdin=subprocess.DEVNULL, cwd=tmp_path, timeout=60)
    assert result.returncode == 2 and "needs a terminal" in result.stderr


# -- getting in and out, sessions by id, the conversation redrawn --------------------------------




def test_prompt_argument_ctrl_c_twice_then_continue_and_resume_by_id(server: ScriptedModelServer,
                                                                     tmp_path: Path) -> None:
    home, env = chat_home(server.url)
    server.expect(text("I fixed the off-by-one in app.py."), text("Still fixed."))
    term = Terminal(f'{PICONTEXT} "fix the bug in app.py"', tmp_path, env)
    try:
        screen = term.wait_for("── scripted/m1")
        assert "> fix the bug in app.py" in screen and "I fixed the off-by-one in app.py." in screen
        term.type("/compact")
        screen = term.wait_for("Nothing to compact")
        assert "Compaction failed" not in screen  # a notice, not an error
        term.send("-l", "/sess")
        term.send("Tab")  # completes the slash command
        term.wait_for("> /session")
        term.send("Enter")
        screen = term.wait_for("cost: $")
        assert "tokens: input 10 · output 5 · cache read 0 · cache write 0" in screen and "{'input'" not in screen
        term.type("/context")
        screen = term.wait_for("reported by the provider")
        for part in ("system prompt", "tool definitions", "user messages", "assistant messages", "free",
                     "estimated total (chars/4)"):
            assert part in screen
        term.send("-l", "/model scr")
        term.send("Tab")  # completes the model up to the common part
        term.wait_for("> /model scripted/m")
        term.type("2")
        term.wait_for("Model: scripted/m2")
        term.type("/help")
        term.wait_for("/exit", "/new", "/resume", "Esc aborts")
        term.send("C-c")
        term.wait_for("Press Ctrl+C again to exit")
        term.send("C-c")
        term.wait_for("EXITED-0")
    finally:
        term.close()
    [path] = list((home / "sessions").rglob("*.jsonl"))
    session_id = json.loads(path.read_text().splitlines()[0])["id"]
    assert server.requests[0].json["messages"][-1]["content"] == "fix the bug in app.py"  # text-only: one string

    # -c redraws the conversation so far
    term = Terminal(f"{PICONTEXT} -c", tmp_path, env)
    try:
        screen = term.wait_for("── end of the conversation so far ──")
        assert "> fix the bug in app.py" in screen and "I fixed the off-by-one in app.py." in screen
        term.type("/exit")
        term.wait_for("EXITED-0")
    finally:
        term.close()

    # a session id prefix works for --session and -r (and opens the same file: no new file appears)
    for flag in ("--session", "-r"):
        term = Terminal(f"{PICONTEXT} {flag} {session_id[:13]}", tmp_path, env)
        try:
            screen = term.wait_for("── end of the conversation so far ──")
            assert "I fixed the off-by-one in app.py." in screen
            if flag == "-r":
                term.type("and now?")
                term.wait_for("Still fixed.")
            term.type("/exit")
            term.wait_for("EXITED-0")
        finally:
            term.close()
    assert list((home / "sessions").rglob("*.jsonl")) == [path]
    assert "Still fixed." in path.read_text()

    # -r alone: an arrow-key list of the directory's sessions
    term = Terminal(f"{PICONTEXT} -r", tmp_path, env)
    try:
        term.wait_for("Resume which session?", f"{session_id[:13]}  fix the bug in app.py")
        term.send("Enter")
        screen = term.wait_for("── end of the conversation so far ──")
        assert "Still fixed." in screen
        term.type("/exit")
        term.wait_for("EXITED-0")
    finally:
        term.close()


def test_unknown_session_id_is_an_error_not_a_new_file(tmp_path: Path) -> None:
    home = Path(os.environ["PICONTEXT_DIR"])
    result = subprocess.run([sys.executable, "-m", "picontext", "-p", "hi", "--session", "01a22be0-643d"],
                            capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd=tmp_path, timeout=60,
                            env={**os.environ, "PICONTEXT_DIR": str(home)})
    assert result.returncode == 2
    assert "no session with id '01a22be0-643d'" in result.stderr
    assert list(tmp_path.iterdir()) == []


# -- while the model works ----------------------------------------------------------------------


def test_typing_during_a_reply_queues_it_and_esc_aborts_once(server: ScriptedModelServer, tmp_path: Path) -> None:
    _, env = chat_home(server.url)
    hold = threading.Event()
    story = threading.Event()
    server.expect(
        reply(text("Writing the file now."), tool_call("write", {"path": "a.txt", "content": "A\n"}))
        .hold_after(3, hold),
        text("Done, and I added the title you asked for."),
        reply(text("Once upon a time there was a very long story that never ends")).hold_after(4, story),
    )
    term = Terminal(f"{PICONTEXT}", tmp_path, env)
    try:
        term.wait_for("/help for commands")
        term.type("write a.txt")
        term.wait_for("Writing")
        term.send("-l", "also add a title")  # typed while the reply streams: not echoed into it
        term.wait_for("✎ also add a title")
        term.send("Enter")
        term.wait_for("queued steering message")
        hold.set()
        screen = term.wait_for("Done, and I added the title you asked for.")
        assert "> also add a title" in screen
        steered = server.requests[1].json["messages"]
        assert steered[-1] == {"role": "user", "content": "also add a title"}  # text-only: one string
        term.wait_for("── scripted/m1")

        term.type("tell me a story")
        term.wait_for("Once upon")
        term.send("-l", "make it short")
        term.send("Enter")
        term.wait_for("⏎ queued steering message")
        term.send("Escape")
        screen = term.wait_for("(aborted)")
        story.set()
        screen = term.wait_for("── scripted/m1", timeout=20)
        assert screen.count("Once upon") == 1  # the partial reply printed once
        assert "also add a title" not in screen.split("tell me a story")[1]
        # the queued message was not sent after the abort: it is back in the editor
        screen = term.wait_for("Queued messages not sent are back in the editor.")
        term.wait_for("> make it short")
        assert len(server.requests) == 3
        term.send("C-u")
        term.type("/exit")
        term.wait_for("EXITED-0")
    finally:
        story.set()
        hold.set()
        term.close()


def test_tool_output_keeps_lines_collapsed_ctrl_o_expands_and_edits_show_a_diff(server: ScriptedModelServer,
                                                                               tmp_path: Path) -> None:
    _, env = chat_home(server.url)
    (tmp_path / "app.py").write_text("def f():\n    return 1\n")
    server.expect(
        tool_call("bash", {"command": "seq 1 10"}),
        tool_call("edit", {"path": "app.py", "oldText": "    return 1", "newText": "    return 2"}),
        text("Counted and fixed."),
    )
    term = Terminal(f"{PICONTEXT}", tmp_path, env)
    try:
        term.wait_for("/help for commands")
        term.type("count then fix")
        screen = term.wait_for("Counted and fixed.")
        lines = screen.splitlines()
        first = next(i for i, line in enumerate(lines) if "✓ 1" in line)
        assert [line.strip() for line in lines[first + 1:first + 4]] == ["2", "3", "4"]
        assert "… +6 lines (Ctrl+O to expand)" in screen
        assert "-    return 1" in screen and "+    return 2" in screen
        term.wait_for("── scripted/m1")
        term.send("C-o")
        header = "── output of bash (10 lines) ──"
        # the header can be drawn a moment before the lines under it: wait for the last one
        screen = term.wait_until(lambda s: header in s and "10" in s.split(header)[1])
        after = screen.split(header)[1]
        assert [line.strip() for line in after.strip().splitlines()[:10]] == [str(n) for n in range(1, 11)]
        term.send("C-u")
        term.type("/exit")
        term.wait_for("EXITED-0")
    finally:
        term.close()
    assert (tmp_path / "app.py").read_text() == "def f():\n    return 2\n"


# -- inspection commands on a terminal --------------------------------------------------------------


def test_inspection_pages_through_pager_and_fits_the_terminal(tmp_path: Path) -> None:
    from picontext.session.manager import SessionManager

    home = Path(os.environ["PICONTEXT_DIR"])
    sm = SessionManager.create(str(tmp_path))
    for n in range(30):
        sm.append_message({"role": "user", "content": f"question {n} " + "word " * 60, "timestamp": n})
        sm.append_message({"role": "assistant", "content": [{"type": "text", "text": f"answer {n} " + "x " * 80}],
                           "api": "x", "provider": "p", "model": "m", "stopReason": "stop", "timestamp": n,
                           "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                                     "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}})
    env = {"PICONTEXT_DIR": str(home), "TERM": "xterm-256color", "PATH": os.environ.get("PATH", ""),
           "PAGER": "sed s/^/PAGED:/"}
    term = Terminal(f"{PICONTEXT} show", tmp_path, env)
    try:
        screen = term.wait_for("EXITED-0")
        assert "PAGED:" in screen and "question 29" in screen  # taller than the screen: paged
    finally:
        term.close()
    for command in (f"{PICONTEXT} show --no-pager", f"{PICONTEXT} tree --no-pager", f"{PICONTEXT} context --no-pager"):
        term = Terminal(command, tmp_path, env)
        try:
            screen = term.wait_for("EXITED-0")
            assert "PAGED:" not in screen
            assert "answer 29" in screen
            # capture-pane -J joins wrapped lines: a line wider than the terminal would show here
            assert max(len(line) for line in screen.splitlines()) <= 120, command
        finally:
            term.close()


def test_show_keeps_markers_on_their_line_and_tree_shows_the_leaf_mark(tmp_path: Path) -> None:
    """At the terminal's width a long entry is shortened, never its `[compacted]` marker wrapped
    onto a line of its own, nor `<- leaf` and labels cut off the end of the tree."""
    from picontext.session.manager import SessionManager

    home = Path(os.environ["PICONTEXT_DIR"])
    sm = SessionManager.create(str(tmp_path))
    ids = [sm.append_message({"role": "user", "content": f"question {n} " + "word " * 60, "timestamp": n})
           for n in range(6)]
    sm.append_message({"role": "assistant", "content": [{"type": "text", "text": "ok"}], "api": "x", "provider": "p",
                       "model": "m", "stopReason": "stop", "timestamp": 7, "usage": {}})  # the file is written
    sm.append_compaction("the summary " * 30, ids[3], 5_000)
    omitted = sm.append_context_edit(ids[5], None)
    replaced = sm.append_context_edit(ids[3], {"content": "shorter " * 30})
    sm.append_label_change(ids[4], "checkpoint")
    leaf = sm.append_message({"role": "user", "content": "the newest question " + "word " * 60, "timestamp": 9})
    env = {"PICONTEXT_DIR": str(home), "TERM": "xterm-256color", "PATH": os.environ.get("PATH", "")}
    term = Terminal(f"{PICONTEXT} show --no-pager", tmp_path, env)
    try:
        screen = term.wait_for("EXITED-0")
    finally:
        term.close()
    compacted = [line for line in screen.splitlines() if "[compacted]" in line]
    assert [line.split()[1] for line in compacted] == ids[:3]  # marker and entry on one line
    assert all(line.rstrip().endswith("[compacted]") and len(line) <= 120 for line in compacted)
    lines = screen.splitlines()
    assert next(line for line in lines if f" {ids[5]} " in line).rstrip().endswith(f"[omitted by {omitted}]")
    assert next(line for line in lines if f" {ids[3]} " in line).rstrip().endswith(f"[replaced by {replaced}]")
    term = Terminal(f"{PICONTEXT} tree --no-pager", tmp_path, env)
    try:
        screen = term.wait_for("EXITED-0")
    finally:
        term.close()
    lines = screen.splitlines()
    assert next(line for line in lines if line.startswith(leaf)).rstrip().endswith("<- leaf")
    assert next(line for line in lines if line.startswith(ids[4])).rstrip().endswith("[checkpoint]")
    assert max(len(line) for line in lines) <= 120


def test_follow_up_with_alt_enter_and_compaction_spinner_cancelled_with_esc(server: ScriptedModelServer,
                                                                            tmp_path: Path) -> None:
    _, env = chat_home(server.url, {"compaction": {"keepRecentTokens": 10}})
    hold = threading.Event()
    summary = threading.Event()
    server.expect(
        reply(text("Looking at the code now, it is a long and careful look.")).hold_after(3, hold),
        reply(text("The tests pass."), usage=tokens(74_000, 10)),
        reply(text("## Goal\nNever seen: cancelled.")).hold_after(1, summary),
    )
    term = Terminal(f"{PICONTEXT}", tmp_path, env)
    try:
        term.wait_for("/help for commands")
        term.type("look at the code")
        term.wait_for("Looking")
        term.send("-l", "then run the tests")
        term.wait_for("✎ then run the tests")
        term.send("M-Enter")  # Alt+Enter: a follow-up, delivered when the agent would stop
        term.wait_for("queued follow-up")
        hold.set()
        screen = term.wait_for("The tests pass.")
        assert "> then run the tests" in screen
        assert server.requests[1].json["messages"][-1]["content"] == "then run the tests"
        term.wait_for("── scripted/m1  37.0%/200k")

        term.type("/compact")
        term.wait_for("· Esc to cancel")  # the spinner says how to cancel, with the elapsed time moving
        term.wait_until(lambda screen: re.search(r"Compacting context… [1-9]\d*s · Esc to cancel", screen) is not None)
        term.send("Escape")
        screen = term.wait_for("Compaction cancelled")
        summary.set()
        term.wait_for("── scripted/m1  37.0%/200k")  # nothing changed

        term.type("/model")
        term.wait_for("Models with a key", "● scripted/m1", "  scripted/m2")
        term.type("/new")
        term.wait_for("New session")
        term.type("/resume")
        term.wait_for("Resume which session?", "look at the code")
        term.send("Enter")  # the first one, the only other session
        screen = term.wait_for("── end of the conversation so far ──")
        assert "The tests pass." in screen.split("Resumed")[1]
        term.type("/exit")
        term.wait_for("EXITED-0")
    finally:
        hold.set()
        summary.set()
        term.close()


def test_a_reply_taller_than_the_terminal_streams_its_last_screenful_then_prints_once(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    _, env = chat_home(server.url)
    hold = threading.Event()
    body = "\n\n".join(f"row {n}" for n in range(60))
    server.expect(reply(text(body)).hold_after(1 + 2 * 50, hold))  # 50 rows streamed, then held
    term = Terminal(f"{PICONTEXT}", tmp_path, env)
    try:
        term.wait_for("/help for commands")
        term.type("sixty rows please")
        # The live region keeps to the screen: its last part (waited for together: under load the
        # note can be drawn a redraw before the held row is).
        term.wait_for("lines above", "row 49")
        hold.set()

        def rows(screen: str) -> list[str]:
            return [line.strip() for line in screen.splitlines() if line.strip().startswith("row ")]

        expected = [f"row {n}" for n in range(60)]  # the whole reply, once, in order
        try:
            term.wait_until(lambda screen: "── scripted/m1" in screen and rows(screen) == expected)
        except AssertionError:
            assert rows(term.screen()) == expected  # a row twice or missing stays so: show the diff
        term.type("/exit")
        term.wait_for("EXITED-0")
    finally:
        hold.set()
        term.close()


def test_an_unreachable_server_is_named_in_the_chat_at_once(tmp_path: Path) -> None:
    with ScriptedModelServer() as gone:
        url = gone.url
    _, env = chat_home(url)
    term = Terminal(f"{PICONTEXT} --no-session", tmp_path, env)
    try:
        term.wait_for("/help for commands")
        term.type("hello?")
        screen = term.wait_for("running?", timeout=60)
        assert f"is the server at {url}/v1 running?" in screen.replace("\n", "")
        # Nothing listens on this machine's port: refused is not transient, so no back-off first.
        assert "Retrying" not in screen and "Giving up" not in screen
        term.type("/exit")
        term.wait_for("EXITED-0")
    finally:
        term.close()


def test_exit_typed_while_the_model_answers_waits_and_is_not_queued(server: ScriptedModelServer,
                                                                    tmp_path: Path) -> None:
    _, env = chat_home(server.url)
    hold = threading.Event()
    server.expect(reply(text("Thinking it over, slowly and at length.")).hold_after(2, hold))
    term = Terminal(f"{PICONTEXT} --no-session", tmp_path, env)
    try:
        term.wait_for("/help for commands")
        term.type("hello?")
        term.wait_for("Esc: abort")  # the reply is on its way (held by the server)
        term.type("/exit")  # typed while the reply streams: a command is not queued as a message
        term.wait_for("/exit runs once the model is done")
        hold.set()
        term.wait_for("> /exit")  # kept in the editor
        term.send("Enter")
        screen = term.wait_for("EXITED-0")
        assert "queued" not in screen
    finally:
        hold.set()
        term.close()


def test_continue_redraws_recent_turns_with_compactions_and_branch_summaries_marked(tmp_path: Path) -> None:
    from picontext.session.manager import SessionManager

    _, env = chat_home("http://127.0.0.1:9")  # nothing is sent: the redraw only reads the file
    usage = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}

    def turn(sm: SessionManager, n: int) -> str:
        sm.append_message({"role": "user", "content": f"question {n}", "timestamp": n})
        return sm.append_message({"role": "assistant", "content": [{"type": "text", "text": f"answer {n}"}],
                                  "api": "openai-completions", "provider": "scripted", "model": "m1",
                                  "stopReason": "stop", "timestamp": n, "usage": usage})

    sm = SessionManager.create(str(tmp_path))
    for n in range(4):
        turn(sm, n)
    kept = turn(sm, 4)
    sm.append_compaction("The user asked five questions.", kept, 5_000)
    fork_point = turn(sm, 5)
    turn(sm, 6)
    sm.branch_with_summary(fork_point, "Question 6 was a dead end.")
    turn(sm, 7)
    term = Terminal(f"{PICONTEXT} -c", tmp_path, env)
    try:
        screen = term.wait_for("── end of the conversation so far ──")
        shown = screen.split("Ctrl+D to leave.")[1]
        # the last five turns on the path (questions 2, 3, 4, 5 and 7); the four entries before them counted
        assert "question 1" not in shown and "> question 2" in shown
        assert "… 4 earlier entries (picontext show for the whole branch)" in shown
        assert "── compacted: 5,000 tokens summarized; the model sees the summary from here ──" in shown
        assert "── summary of a branch left ──" in shown and "Question 6 was a dead end." in shown
        assert "question 6" not in shown  # the branch left is not on the path
        order = [shown.index(s) for s in ("> question 4", "── compacted", "> question 5", "── summary of a branch",
                                          "> question 7", "answer 7")]
        assert order == sorted(order)
        term.type("/exit")
        term.wait_for("EXITED-0")
    finally:
        term.close()


def test_print_mode_on_a_terminal_does_not_wait_for_stdin(server: ScriptedModelServer, tmp_path: Path) -> None:
    _, env = chat_home(server.url)
    server.expect(text("Hello from print mode."))
    term = Terminal(f'{PICONTEXT} -p "say hello" --no-session', tmp_path, env)
    try:
        screen = term.wait_for("EXITED-0")
        assert "Hello from print mode." in screen
    finally:
        term.close()
    assert server.requests[0].json["messages"][-1]["content"] == "say hello"
