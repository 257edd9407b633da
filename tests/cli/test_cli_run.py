"""`picontext run` as a real subprocess against ScriptedModelServer (a user model in models.json)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inprocess import run_main

from picontext.scripted import ScriptedModelServer, http_error, overflow, rate_limit, raw_stream, text, tool_call


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server
        server.assert_complete()


def configure(home: Path, base_url: str, *, api_key: str | None = "test-key") -> None:
    provider: dict[str, object] = {"baseUrl": base_url, "api": "openai-completions", "models": [{"id": "m1"}]}
    if api_key is not None:
        provider["apiKey"] = api_key
    (home / "models.json").write_text(json.dumps({"providers": {"scripted": provider}}))


def run(home: Path, cwd: Path, *args: str, stdin: str | None = None, command: tuple[str, ...] = ("run",)
        ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PICONTEXT_DIR"] = str(home)
    if stdin is None and command == ("run",):
        return run_main("run", *args, cwd=cwd, env=env)
    # a real pipe on stdin, or the words routed by `python -m picontext` itself
    return subprocess.run(
        [sys.executable, "-m", "picontext", *command, *args], capture_output=True, text=True, cwd=cwd, env=env,
        timeout=60, input=stdin, stdin=subprocess.DEVNULL if stdin is None else None,
    )


@pytest.fixture
def home() -> Path:
    return Path(os.environ["PICONTEXT_DIR"])


def session_files(home: Path) -> list[Path]:
    return sorted((home / "sessions").rglob("*.jsonl"))


def test_text_mode_runs_tools_and_saves_session(server: ScriptedModelServer, home: Path, tmp_path: Path) -> None:
    configure(home, server.url + "/v1")
    server.expect(tool_call("write", {"path": "hello.txt", "content": "hi there"}), text("Created hello.txt."))
    result = run(home, tmp_path, "-p", "create hello.txt", "--model", "scripted/m1")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Created hello.txt.\n"
    assert "[write] path='hello.txt'" in result.stderr
    assert (tmp_path / "hello.txt").read_text() == "hi there"
    [path] = session_files(home)
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    roles = [e["message"]["role"] for e in entries if e["type"] == "message"]
    assert roles == ["system", "user", "assistant", "toolResult", "assistant"]
    assert server.requests[0].headers["authorization"] == "Bearer test-key"


def test_json_mode_one_event_per_line(server: ScriptedModelServer, home: Path, tmp_path: Path) -> None:
    configure(home, server.url + "/v1")
    server.expect(text("Hello world"))
    result = run(home, tmp_path, "-p", "hi", "--model", "scripted/m1", "--mode", "json", "--no-session")
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    types = [e["type"] for e in events]
    assert types[:2] == ["agent_start", "turn_start"]
    assert types[-3:] == ["turn_end", "agent_end", "agent_settled"]
    update = next(e for e in events if e["type"] == "message_update")
    assert (
        set(update) == {"type", "usage", "assistantMessageEvent"} and "partial" not in update["assistantMessageEvent"]
    )
    assert events[-2]["willRetry"] is False
    assert not (home / "sessions").exists() or not session_files(home)


def test_continue_uses_the_latest_session_and_its_model(
    server: ScriptedModelServer, home: Path, tmp_path: Path
) -> None:
    configure(home, server.url + "/v1")
    server.expect(text("first"), text("second"))
    assert run(home, tmp_path, "-p", "one", "--model", "scripted/m1").returncode == 0
    result = run(home, tmp_path, "-c", "-p", "two")
    assert result.returncode == 0, result.stderr
    assert [m["role"] for m in server.requests[1].body["messages"]] == ["system", "user", "assistant", "user"]
    assert len(session_files(home)) == 1


def test_session_file_option(server: ScriptedModelServer, home: Path, tmp_path: Path) -> None:
    configure(home, server.url + "/v1")
    server.expect(text("ok"))
    target = tmp_path / "my-session.jsonl"
    assert run(home, tmp_path, "--session", str(target), "-p", "x", "--model", "scripted/m1").returncode == 0
    assert json.loads(target.read_text().splitlines()[0])["type"] == "session"


def test_unknown_model_one_line_exit_2(home: Path, tmp_path: Path) -> None:
    configure(home, "http://127.0.0.1:9/v1")
    result = run(home, tmp_path, "-p", "hi", "--model", "scripted/nope", "--no-session")
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and "Unknown model 'scripted/nope'" in result.stderr


def test_no_key_one_line_exit_2(home: Path, tmp_path: Path) -> None:
    result = run(home, tmp_path, "-p", "hi", "--model", "openai/gpt-4o", "--no-session")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "No API key for provider 'openai'" in result.stderr


def test_no_model_one_line_exit_2(home: Path, tmp_path: Path) -> None:
    result = run(home, tmp_path, "-p", "hi", "--no-session")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "No model selected" in result.stderr


def test_an_unreachable_local_server_is_one_line_and_exit_2_at_once(home: Path, tmp_path: Path) -> None:
    with ScriptedModelServer() as gone:
        url = gone.url
    configure(home, url + "/v1")
    result = run(home, tmp_path, "-p", "hi", "--model", "scripted/m1", "--no-session")
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()  # connection refused on this machine: no retry
    assert line.startswith("picontext: Connection error")
    assert f"is the server at {url}/v1 running?" in line  # the URL it tried


def test_print_mode_announces_each_retry_wait_on_one_stderr_line(
    server: ScriptedModelServer, home: Path, tmp_path: Path
) -> None:
    configure(home, server.url + "/v1")
    server.expect(rate_limit(retry_after=1), text("after the wait"))
    result = run(home, tmp_path, "-p", "hi", "--model", "scripted/m1", "--no-session")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "after the wait\n"
    waits = [line for line in result.stderr.splitlines() if "retrying in" in line]
    assert len(waits) == 1
    assert waits[0].startswith("picontext: request failed (429 ")
    assert waits[0].endswith("retrying in 1s (as the server asked, attempt 1/3)")


def test_print_mode_reports_a_malformed_server_reply_on_one_line(
    server: ScriptedModelServer, home: Path, tmp_path: Path
) -> None:
    configure(home, server.url + "/v1")
    server.expect(raw_stream('{"choices":[{"index":0,"delta":{"content":5}}]}'))
    result = run(home, tmp_path, "-p", "hi", "--model", "scripted/m1", "--no-session")
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("picontext: Malformed response from 127.0.0.1:") and "stream event 1" in line


def user_text(request: Any) -> str:
    content = request.json["messages"][-1]["content"]
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)


def test_piped_input_joins_the_prompt(server: ScriptedModelServer, home: Path, tmp_path: Path) -> None:
    configure(home, server.url + "/v1")
    server.expect(text("A summary."), text("Four."))
    result = run(home, tmp_path, "-p", "summarize", "--model", "scripted/m1", "--no-session",
                 stdin="# Notes\nalpha beta\n", command=())
    assert result.returncode == 0, result.stderr
    assert result.stdout == "A summary.\n"
    assert user_text(server.requests[0]) == "# Notes\nalpha beta\n\nsummarize"
    result = run(home, tmp_path, "-p", "--model", "scripted/m1", "--no-session", stdin="what is 2+2?\n", command=())
    assert result.returncode == 0, result.stderr
    assert user_text(server.requests[1]) == "what is 2+2?\n"


def test_a_prompt_that_is_not_a_command_goes_to_the_chat(home: Path, tmp_path: Path) -> None:
    # `picontext tree of life` would be the tree command; after `--` it is a prompt for the chat
    # (which needs a terminal, so here it refuses with its own message, not the tree command's).
    for argv in (["--", "tree", "of", "life"], ["fix", "the", "bug"], ["chat", "tree", "of", "life"]):
        result = run(home, tmp_path, *argv, command=())
        assert result.returncode == 2 and "The chat needs a terminal" in result.stderr, (argv, result.stderr)
    result = run(home, tmp_path, "tree", str(tmp_path / "missing.jsonl"), command=())
    assert result.returncode == 2 and "no such file" in result.stderr


def _history(server: ScriptedModelServer, home: Path, tmp_path: Path, *, fallback: bool = True) -> None:
    settings = {"keepRecentTokens": 10, **({} if fallback else {"fallbackSummary": False})}
    (home / "settings.json").write_text(json.dumps({"compaction": settings}))
    configure(home, server.url + "/v1")
    server.expect(text("First answer, long enough to be worth summarizing. " * 20))
    assert run(home, tmp_path, "-p", "first question", "--model", "scripted/m1").returncode == 0


def test_print_mode_says_when_it_compacts_after_an_overflow(server: ScriptedModelServer, home: Path,
                                                            tmp_path: Path) -> None:
    _history(server, home, tmp_path)
    server.expect(overflow(), text("## Goal\nAnswer questions."), text("Second answer."))
    result = run(home, tmp_path, "-c", "-p", "second question")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Second answer.\n"
    lines = result.stderr.splitlines()
    assert "picontext: compacting (the context overflowed the model's window)…" in lines
    assert any(line.startswith("picontext: compacted") and line.endswith("; retrying the request") for line in lines)


@pytest.mark.parametrize("mode", ["text", "json"])
def test_an_overflow_whose_summary_fails_says_why_in_one_line(server: ScriptedModelServer, home: Path,
                                                               tmp_path: Path, mode: str) -> None:
    _history(server, home, tmp_path, fallback=False)  # Pi's behaviour: a failed summary ends the recovery
    server.expect(overflow(), text("## Goal\nAn unfinished summ").with_stop("length"),
                  text("## Goal\nStill unfinish").with_stop("length"))
    result = run(home, tmp_path, "--mode", mode, "-c", "-p", "second question")
    assert result.returncode == 1
    final = result.stderr.splitlines()[-1]
    assert final == ("picontext: context overflow: the session could not be compacted: Turn prefix summarization "
                     "failed: generation hit the token cap and the summary is incomplete")
    assert "did not help" not in result.stderr and "is compaction disabled" not in result.stderr


@pytest.mark.parametrize("mode", ["text", "json"])
def test_an_overflow_whose_summary_fails_twice_recovers_with_the_mechanical_summary_in_one_line(
        server: ScriptedModelServer, home: Path, tmp_path: Path, mode: str) -> None:
    _history(server, home, tmp_path)
    server.expect(overflow(), text("## Goal\nAn unfinished summ").with_stop("length"),
                  text("## Goal\nStill unfinish").with_stop("length"), text("Second answer."))
    result = run(home, tmp_path, "--mode", mode, "-c", "-p", "second question")
    assert result.returncode == 0, result.stderr
    server.assert_complete()
    if mode == "text":
        assert result.stdout == "Second answer.\n"
        [line] = [line for line in result.stderr.splitlines() if line.startswith("picontext: compacted")]
        assert "(the model's summary failed twice (last: it hit its token cap); a mechanical summary replaced it" \
            in line and line.endswith("; retrying the request")
        assert "failed" not in result.stderr.replace(line, "")  # that one line says it all
    else:
        end = next(json.loads(x) for x in result.stdout.splitlines() if '"compaction_end"' in x)
        assert end["willRetry"] is True and end["notice"].startswith("the model's summary failed twice")
        assert end["result"]["details"]["fallback"]["reason"] == "length"
    [path] = session_files(home)
    records = [json.loads(x) for x in path.read_text().splitlines() if "picontext.compaction-failed" in x]
    assert [(r["data"]["reason"], r["data"]["next"]) for r in records] == [("overflow", "retry"),
                                                                          ("overflow", "fallback")]


def test_a_summary_refused_with_a_json_body_is_shown_by_its_message(server: ScriptedModelServer, home: Path,
                                                                    tmp_path: Path) -> None:
    _history(server, home, tmp_path, fallback=False)
    refused = {"error": {"message": "Invalid 'messages[1].content': string too long", "type": "invalid_request_error",
                         "param": "messages", "code": None}}
    server.expect(overflow(), http_error(400, refused), http_error(400, refused))
    result = run(home, tmp_path, "-c", "-p", "second question")
    assert result.returncode == 1
    final = result.stderr.splitlines()[-1]
    assert final.startswith("picontext: context overflow: the session could not be compacted: ")
    assert final.endswith("400 Invalid 'messages[1].content': string too long")
    assert "{" not in result.stderr  # the provider's JSON stays in the session file, not on screen


def test_json_mode_says_when_the_retry_after_compaction_overflowed_again(server: ScriptedModelServer, home: Path,
                                                                          tmp_path: Path) -> None:
    _history(server, home, tmp_path)
    server.expect(overflow(), text("## Goal\nAnswer questions."), overflow())
    result = run(home, tmp_path, "--mode", "json", "-c", "-p", "second question")
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1].startswith(
        "picontext: context overflow: one compaction and retry did not help; ")


def test_print_mode_says_in_words_when_overflow_recovery_fails(server: ScriptedModelServer, home: Path,
                                                               tmp_path: Path) -> None:
    _history(server, home, tmp_path)
    server.expect(overflow(), text("## Goal\nAnswer questions."), overflow())
    result = run(home, tmp_path, "-c", "-p", "second question")
    assert result.returncode == 1
    assert "context overflow: one compaction and retry did not help" in result.stderr
    assert "{" not in result.stderr  # not the provider's raw JSON


def test_ctrl_c_during_the_reply_exits_130(server: ScriptedModelServer, home: Path, tmp_path: Path) -> None:
    """docs/cli.md, print mode's exit codes: 130 aborted with Ctrl+C (SIGINT while the reply streams)."""
    import signal
    import threading

    configure(home, server.url + "/v1")
    release, streaming = threading.Event(), threading.Event()
    server.expect(text("a reply still streaming when the user presses Ctrl+C").hold_after(2, release, streaming))
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PICONTEXT_DIR"] = str(home)
    proc = subprocess.Popen([sys.executable, "-m", "picontext", "-p", "hi", "--model", "scripted/m1"],
                            cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert streaming.wait(60), "the reply never started"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        release.set()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("picontext: "), err
