"""`picontext eval replay` on the real sessions of tests/fixtures/replay: one JSON record per
(session, cut, strategy) with sane values, progress on stderr, the judge over HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from inprocess import run_main

from picontext.testing import ScriptedModelServer, text

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "replay"
PI_COMPACTED = FIXTURES / "pi" / "real-before-compaction.jsonl"
CLAUDE_COMPACTED = FIXTURES / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
SWE = FIXTURES / "swe-agent" / "pydicom__pydicom-1458.traj"
FIELDS = {"session", "sessionId", "cut", "cutKind", "cutEntry", "transcriptTokens", "strategy", "summarizer",
          "tokensBefore", "tokensAfter", "factsTotal", "factsKept", "factsByKind", "lost", "cost", "time", "error",
          "judge"}


def replay(*args: str) -> tuple[list[dict[str, Any]], str]:
    proc = subprocess.run([sys.executable, "-m", "picontext", "eval", "replay", "--json", *args], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()], proc.stderr


def test_records_at_recorded_compactions_and_every_n_tokens() -> None:
    records, progress = replay(str(PI_COMPACTED), "--every", "150000", "--max-cuts", "1")
    assert all(set(r) == FIELDS for r in records)
    cuts = {(r["cut"], r["cutKind"]) for r in records}
    assert sorted(kind for _n, kind in cuts) == ["compaction", "compaction", "every"]
    for record in records:
        assert 0 <= record["factsKept"] <= record["factsTotal"] and record["factsTotal"] >= 5
        assert sum(v["total"] for v in record["factsByKind"].values()) == record["factsTotal"]
        assert record["cost"] == 0 and record["time"] >= 0 and record["judge"] is None
        assert record["error"] is None, record["error"]
        assert record["summarizer"] == ("extractive" if "summary" in record["strategy"] else "-")
    by = {(r["cut"], r["strategy"]): r for r in records}
    for number, _kind in cuts:
        none, mask, summary = by[(number, "none")], by[(number, "mask")], by[(number, "summary")]
        assert none["tokensAfter"] == none["tokensBefore"]
        assert summary["tokensAfter"] < mask["tokensAfter"] < mask["tokensBefore"]
        assert none["factsKept"] >= mask["factsKept"] >= summary["factsKept"]
    recorded = [r for r in records if r["strategy"] == "recorded"]
    assert [r["cutKind"] for r in recorded] == ["compaction", "compaction"]  # only where Pi compacted
    assert all(r["tokensAfter"] < r["tokensBefore"] / 5 for r in recorded)  # Claude Opus's real summaries
    assert "real-before-compaction.jsonl: " in progress and progress.count(" summary: ") == 3


def test_a_transcript_is_imported_on_the_fly(tmp_path: Path) -> None:
    records, progress = replay(str(SWE), "--every", "3000", "--keep-recent-tokens", "1000",
                               "--strategy", "none", "--strategy", "summary", "--summarizer", "generic")
    assert {r["strategy"] for r in records} == {"none", "summary"} and len(records) == 4
    summary = [r for r in records if r["strategy"] == "summary"]
    # SWE-agent's edits are not Pi's tools: the ledger cannot know the modified files, and a summary that
    # keeps nothing (generic) loses them even with the ledger; the replay's facts are not the ledger's.
    assert all(r["factsByKind"]["modified"]["kept"] == 0 < r["factsByKind"]["modified"]["total"] for r in summary)
    assert all(r["factsByKind"]["error"]["kept"] == 1 for r in summary)  # the ledger quotes the error line
    assert "pydicom" in progress


def test_claude_code_compaction_is_a_recorded_cut() -> None:
    records, _ = replay(str(CLAUDE_COMPACTED), "--every", "0", "--strategy", "recorded", "--strategy", "none")
    assert [(r["cutKind"], r["strategy"]) for r in records] == [("compaction", "none"), ("compaction", "recorded")]
    assert records[1]["tokensAfter"] < records[0]["tokensBefore"] / 5


def test_the_window_decides_whether_mask_then_summary_summarizes() -> None:
    args = (str(SWE), "--every", "3000", "--keep-recent-tokens", "1000", "--strategy", "mask",
            "--strategy", "mask-then-summary")
    wide, _ = replay(*args)
    narrow, _ = replay(*args, "--window", "5000", "--reserve-tokens", "1000")
    for records in (wide, narrow):
        assert [r["strategy"] for r in records] == ["mask", "mask-then-summary"] * 2
    # under a 200k window masking is enough; over 5000 - 1000 tokens the summary follows
    assert [r["tokensAfter"] for r in wide[0::2]] == [r["tokensAfter"] for r in wide[1::2]]
    assert all(m["tokensAfter"] > s["tokensAfter"] for m, s in zip(narrow[0::2], narrow[1::2], strict=True))
    assert narrow[1]["summarizer"] == "extractive"


def test_bad_arguments_are_one_line() -> None:
    for args, needle in ((("--strategy", "magic", str(SWE)), "unknown strategy 'magic'"),
                         (("--every", "-5", str(SWE)), "--every must not be negative"),
                         ((str(FIXTURES / "SOURCES.md"),), "SOURCES.md")):
        out = run_main("eval", "replay", *args)
        assert out.returncode == 2 and needle in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_text_output_summarizes_per_strategy() -> None:
    out = run_main("eval", "replay", str(SWE), "--every", "3000", "--keep-recent-tokens", "1000")
    assert out.returncode == 0, out.stderr
    assert "after/before" in out.stdout and "mask-then-summary" in out.stdout and "modified" in out.stdout


def _models_json(server: ScriptedModelServer, window: int) -> None:
    home = Path(os.environ["PICONTEXT_DIR"])
    (home / "models.json").write_text(json.dumps({"providers": {"scripted": {
        "baseUrl": server.url, "api": "anthropic-messages", "apiKey": "k",
        "models": [{"id": "judge", "contextWindow": window, "maxTokens": 4096}]}}}))


def test_the_judge_answers_from_the_compacted_context_and_grades(server: ScriptedModelServer) -> None:
    _models_json(server, 200_000)
    server.expect(
        text("1. Make PixelRepresentation optional.\n2. Same.\n3. A SyntaxError, not resolved.\n4. reproduce_bug.py\n"
             "5. bash: edit pydicom/pixel_data_handlers/numpy_handler.py\n6. Only require it with pixel data."),
        text("1. 5\n2. 4\n3. 3\n4. 2\n5. 5\n6. 1"),
    )
    out = run_main("eval", "replay", "--json", str(SWE), "--every", "3000", "--max-cuts", "1",
                   "--keep-recent-tokens", "1000", "--strategy", "mask", "--judge", "scripted/judge")
    assert out.returncode == 0, out.stderr
    (record,) = [json.loads(line) for line in out.stdout.splitlines()]
    judge = record["judge"]
    assert judge["scores"] == {"recall": 4.0, "artifact": 2.0, "continuation": 5.0, "decision": 1.0}
    assert judge["mean"] == 3.33 and judge["graded"] == judge["questions"] == 6
    assert judge["nextAction"]["tool"] is True and judge["nextAction"]["target"] is True
    answer_request, grade_request = (json.dumps(r.body) for r in server.requests)
    assert "[tool result masked by picontext" in answer_request  # the compacted context, not the full one
    assert "What is the next tool call" in answer_request
    assert "Reference: bash /pydicom__pydicom/pydicom/pixel_data_handlers/numpy_handler.py" in grade_request
    assert "Answer: A SyntaxError, not resolved." in grade_request


def test_a_context_larger_than_the_judges_window_is_not_sent(server: ScriptedModelServer) -> None:
    _models_json(server, 2_000)
    out = run_main("eval", "replay", "--json", str(SWE), "--every", "3000", "--max-cuts", "1",
                   "--keep-recent-tokens", "1000", "--strategy", "none", "--judge", "scripted/judge")
    assert out.returncode == 0, out.stderr
    (record,) = [json.loads(line) for line in out.stdout.splitlines()]
    assert "does not fit the judge's window of 2,000" in record["judge"]["error"]
    assert server.requests == []


def test_help_loads_neither_the_importers_nor_the_replay() -> None:
    """`picontext --help` registers every command; the import and replay machinery loads only when run."""
    code = ("import sys\nfrom picontext.cli.main import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n"
            "    pass\nprint('\\n'.join(sys.modules), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    modules = set(proc.stderr.split())
    assert "picontext.cli.commands" in modules  # where every command registers
    assert "picontext.cli.import_cmds" not in modules and "picontext.cli.eval_cmds" not in modules
    assert "import" in proc.stdout and "eval" in proc.stdout
    assert not {m for m in modules if m.startswith(("picontext.session.importers", "picontext.compaction.replay"))}


def test_the_fallback_strategy_compacts_without_a_model() -> None:
    """The mechanical summary a compaction falls back to, replayed alone: no summarizer is asked,
    the context shrinks, and it keeps at least the task and the last request (ledger facts)."""
    records, _ = replay(str(PI_COMPACTED), "--every", "0", "--strategy", "none", "--strategy", "fallback")
    fallback = [r for r in records if r["strategy"] == "fallback"]
    assert len(fallback) == 2 and all(r["error"] is None for r in fallback)
    none = {r["cut"]: r for r in records if r["strategy"] == "none"}
    for record in fallback:
        assert record["summarizer"] == "-" and record["cost"] == 0
        assert record["tokensAfter"] < none[record["cut"]]["tokensAfter"] / 2
        by_kind = record["factsByKind"]
        assert by_kind["request"]["kept"] == by_kind["request"]["total"] >= 1, by_kind
