"""`python -m picontext compact` and `eval compaction` as real subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from inprocess import run_main

from picontext.session.manager import SessionManager
from picontext.testing import ScriptedModelServer, text

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sessions" / "refactor-session.jsonl"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **(env or {})}
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        full.pop(key, None)
    return run_main(*args, env=full)


@pytest.fixture
def example(tmp_path: Path) -> Path:
    copy = tmp_path / "s.jsonl"
    shutil.copy(EXAMPLE, copy)
    return copy


def test_dry_run_json_report(example: Path) -> None:
    before = example.read_bytes()
    out = run("compact", str(example), "--dry-run", "--json")
    assert json.loads(out.stdout) is None  # everything fits the default 20000 window
    assert out.returncode == 2 and out.stderr.startswith("picontext: Nothing to compact")  # as the real run
    out = run("compact", str(example), "--dry-run", "--json", "--keep-recent-tokens", "2000")
    report = json.loads(out.stdout)
    assert set(report) == {"firstKeptEntryId", "tokensBefore", "isSplitTurn", "messagesToSummarize",
                           "turnPrefixMessages", "previousSummary", "readFiles", "modifiedFiles"}
    assert report["previousSummary"].startswith("## Goal")
    assert example.read_bytes() == before


def test_nothing_to_compact_gives_its_reason_and_the_exit_code_of_the_real_run(example: Path) -> None:
    dry = run("compact", str(example), "--dry-run")
    real = run("compact", str(example), "--model", "anthropic/claude-sonnet-4-5")  # refused before any request
    reason = "Nothing to compact (session too small): the messages since the last compaction (~5,326 tokens"
    assert dry.returncode == 2 and dry.stdout == "" and dry.stderr.count("\n") == 1
    assert dry.stderr.startswith(f"picontext: {reason}"), dry.stderr
    assert "tokens by chars/4) all fall in the part a compaction keeps, the newest keepRecentTokens (20,000)" \
        in dry.stderr and "a smaller --keep-recent-tokens summarizes more" in dry.stderr
    assert real.returncode == 2 and "No API key" in real.stderr  # the real run needs its key before it plans
    with ScriptedModelServer() as server:  # no request is made: the plan comes first
        (Path(os.environ["PICONTEXT_DIR"]) / "models.json").write_text(json.dumps({"providers": {"scripted": {
            "baseUrl": server.url, "api": "anthropic-messages", "apiKey": "k",
            "models": [{"id": "m1", "contextWindow": 200000, "maxTokens": 4096}]}}}))
        real = run("compact", str(example), "--model", "scripted/m1")
        assert server.requests == []
    assert real.returncode == 2 and real.stderr == dry.stderr


def test_mask_dry_run_and_real_run_agree_when_there_is_nothing_to_mask(example: Path) -> None:
    dry = run("compact", str(example), "--strategy", "mask", "--dry-run")
    real = run("compact", str(example), "--strategy", "mask")
    assert dry.returncode == real.returncode == 2 and dry.stdout == real.stdout == ""
    assert dry.stderr == real.stderr == ("picontext: Nothing to mask: no tool result is older than the keep window "
                                         "(keepRecentTokens 20,000; a smaller --keep-recent-tokens masks more)\n")
    dry = run("compact", str(example), "--strategy", "mask", "--dry-run", "--json")
    assert dry.returncode == 2 and json.loads(dry.stdout) == []
    dry = run("compact", str(example), "--strategy", "mask", "--dry-run", "--keep-recent-tokens", "2000")
    assert dry.returncode == 0 and dry.stdout.startswith("would mask ")


def test_mask_needs_no_model_or_network(example: Path) -> None:
    before = example.read_bytes()
    out = run("compact", str(example), "--strategy", "mask", "--keep-recent-tokens", "2000", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["masked"] == len(result["appended"]) > 0 and result["tokensAfter"] < result["tokensBefore"]
    after = example.read_bytes()
    assert after.startswith(before) and after.count(b"\n") == before.count(b"\n") + result["masked"]
    manager = SessionManager.open(str(example))
    assert all(manager.get_entry(i)["type"] == "context_edit" for i in result["appended"])
    out = run("compact", str(example), "--strategy", "mask", "--keep-recent-tokens", "2000")
    assert out.returncode == 2 and "Nothing to mask" in out.stderr


def test_missing_model_or_key_is_one_line(example: Path) -> None:
    for args, needle in [((), "needs a model"), (("--model", "anthropic/claude-sonnet-4-5"), "No API key"),
                         (("--model", "nope/x"), "Unknown provider")]:
        out = run("compact", str(example), *args)
        assert out.returncode == 2 and needle in out.stderr and out.stderr.count("\n") == 1, out.stderr
    out = run("compact", str(example), "--strategy", "mask", "--keep-recent-tokens", "-5")
    assert out.returncode == 2 and "keepRecentTokens" in out.stderr


def test_summary_over_http_appends_and_prints_tokens(example: Path) -> None:
    home = Path(os.environ["PICONTEXT_DIR"])
    before = example.read_bytes()
    with ScriptedModelServer() as server:
        server.expect(text("## Goal\nFinish the refactor."), text("## Original Request\nmypy"))
        (home / "models.json").write_text(json.dumps({"providers": {"scripted": {
            "baseUrl": server.url, "api": "anthropic-messages", "apiKey": "test-key",
            "models": [{"id": "m1", "contextWindow": 200000, "maxTokens": 4096}]}}}))
        out = run("compact", str(example), "--model", "scripted/m1", "--keep-recent-tokens", "2000",
                  "--instructions", "focus on tax rounding")
        server.assert_complete()
        bodies = [r.body for r in server.requests]
    assert out.returncode == 0, out.stderr
    assert "tokens" in out.stdout and "->" in out.stdout
    assert any("focus on tax rounding" in json.dumps(b) for b in bodies)
    after = example.read_bytes()
    assert after.startswith(before)
    last = json.loads(after.splitlines()[-1])
    # the two requests run concurrently, so either may get either scripted reply
    assert last["type"] == "compaction" and "Finish the refactor." in last["summary"]
    assert "## Original Request\nmypy" in last["summary"] and "**Turn Context (split turn):**" in last["summary"]


def _scripted_models(server: ScriptedModelServer) -> None:
    (Path(os.environ["PICONTEXT_DIR"]) / "models.json").write_text(json.dumps({"providers": {"scripted": {
        "baseUrl": server.url, "api": "anthropic-messages", "apiKey": "k",
        "models": [{"id": "m1", "contextWindow": 200000, "maxTokens": 4096}]}}}))


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_failed_summary_with_no_fallback_appends_only_its_failure_records(example: Path) -> None:
    before = example.read_bytes()
    with ScriptedModelServer() as server:
        # A split turn, history then prefix, twice: the prefix hits Anthropic's cap ("length") both times.
        server.expect(text("## Goal\nok"), text("cut off").with_stop("max_tokens"),
                      text("## Goal\nok"), text("cut off").with_stop("max_tokens"))
        _scripted_models(server)
        out = run("compact", str(example), "--model", "scripted/m1", "--keep-recent-tokens", "2000", "--no-fallback")
        server.assert_complete()
    assert out.returncode == 2 and "token cap" in out.stderr and len(out.stderr.splitlines()) == 1
    after = example.read_bytes()
    assert after.startswith(before)  # nothing rewritten; no compaction, only the two records
    added = [json.loads(line) for line in after[len(before):].decode().splitlines()]
    assert [(e["type"], e["customType"], e["data"]["attempt"], e["data"]["kind"], e["data"]["next"])  # type: ignore[index]
            for e in added] == [("custom", "picontext.compaction-failed", 1, "length", "retry"),
                                ("custom", "picontext.compaction-failed", 2, "length", "none")]


def test_a_failed_summary_compacts_with_the_mechanical_summary_and_says_so_in_one_line(example: Path) -> None:
    before = _lines(example)
    with ScriptedModelServer() as server:
        server.expect(text("## Goal\nok"), text("cut off").with_stop("max_tokens"),
                      text("## Goal\nok"), text("cut off").with_stop("max_tokens"))
        _scripted_models(server)
        out = run("compact", str(example), "--model", "scripted/m1", "--keep-recent-tokens", "2000")
        server.assert_complete()
    assert out.returncode == 0, out.stderr
    assert "compacted with a mechanical summary up to" in out.stdout
    [notice] = out.stderr.splitlines()
    assert notice.startswith("picontext: the model's summary failed twice (last: it hit its token cap)")
    rows = _lines(example)
    assert [e["type"] for e in rows[len(before):]] == ["custom", "custom", "compaction"]
    compaction = rows[-1]
    assert compaction["details"]["fallback"]["reason"] == "length"  # type: ignore[index]
    assert compaction["details"]["fallback"]["attempts"] == 2  # type: ignore[index]
    context = SessionManager.open(str(example)).build_session_context()
    assert [m["role"] for m in context["messages"]].count("compactionSummary") == 1
    out = run("stats", str(example), "--json")
    failures = json.loads(out.stdout)["compactionFailures"]
    assert [(f["attempt"], f["kind"], f["next"]) for f in failures] == [(1, "length", "retry"), (2, "length",
                                                                                                 "fallback")]


def test_eval_compaction() -> None:
    out = run("eval", "compaction", "--json", "--rounds", "4", "--sessions", "2")
    assert out.returncode == 0, out.stderr
    rows = {(r["strategy"], r["summarizer"]): r for r in json.loads(out.stdout)}
    ceiling = rows[("none", "generic")]
    assert ceiling["answered"] == ceiling["total"] == 18  # 9 facts x 2 sessions, all answerable uncompacted
    pi, ours = rows[("summary-no-ledger", "generic")], rows[("summary", "generic")]
    assert pi["answered"] < ours["answered"] < ceiling["answered"]
    # The ledger reaches its own kinds only: what a poor summary drops elsewhere stays lost.
    assert ours["byKind"]["request"]["answered"] == ours["byKind"]["request"]["total"]
    assert ours["byKind"]["decision"]["answered"] == ours["byKind"]["number"]["answered"] == 0
    strong = rows[("summary-no-ledger", "extractive")]
    assert strong["answered"] > ours["answered"]  # a good summarizer beats the ledger
    assert max(strong["tokensAfter"]) < min(ceiling["tokensAfter"]) / 3
    text_out = run("eval", "compaction", "--rounds", "2", "--sessions", "1", "--strategy", "summary")
    assert text_out.returncode == 0, text_out.stderr
    assert "summary / generic" in text_out.stdout and "tokens after" in text_out.stdout
