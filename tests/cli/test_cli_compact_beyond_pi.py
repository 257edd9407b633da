"""`picontext compact` beyond Pi: a summarizer model of its own, its cost in `stats`, resumable spans."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from picontext.compaction.records import FAILURE_TYPE
from picontext.compaction.resumable import SPAN_END_TYPE, SPAN_TYPE
from picontext.testing import ScriptedModelServer, text

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sessions" / "refactor-session.jsonl"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    return subprocess.run([sys.executable, "-m", "picontext", *args], capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.fixture
def example(tmp_path: Path) -> Path:
    copy = tmp_path / "s.jsonl"
    shutil.copy(EXAMPLE, copy)
    return copy


def write_models(server: ScriptedModelServer) -> None:
    home = Path(os.environ["PICONTEXT_DIR"])
    models = [{"id": "big", "contextWindow": 200000, "maxTokens": 4096,
               "cost": {"input": 15, "output": 75, "cacheRead": 1.5, "cacheWrite": 18.75}},
              {"id": "small", "contextWindow": 200000, "maxTokens": 4096,
               "cost": {"input": 1, "output": 5, "cacheRead": 0.1, "cacheWrite": 1.25}}]
    (home / "models.json").write_text(json.dumps({"providers": {"scripted": {
        "baseUrl": server.url, "api": "anthropic-messages", "apiKey": "k", "models": models}}}))


def write_settings(compaction: dict[str, Any]) -> None:
    (Path(os.environ["PICONTEXT_DIR"]) / "settings.json").write_text(json.dumps({"compaction": compaction}))


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_summary_model_flag_writes_with_the_other_model_and_stats_show_its_cost(example: Path) -> None:
    with ScriptedModelServer() as server:
        write_models(server)
        server.expect(text("## Goal\nsplit core.py"), text("## Original Request\nmypy"))
        out = run("compact", str(example), "--model", "scripted/big", "--summary-model", "scripted/small",
                  "--keep-recent-tokens", "2000")
        server.assert_complete()
        assert out.returncode == 0, out.stderr
        assert {r.body["model"] for r in server.requests} == {"small"}
    last = lines(example)[-1]
    assert last["type"] == "compaction" and last["details"]["summaryModel"] == "scripted/small"
    assert last["usage"]["cost"]["total"] > 0
    stats = json.loads(run("stats", "--json", str(example)).stdout)
    assert stats["compactions"][0]["summaryModel"] is None  # the example's own compaction (written by Pi)
    assert stats["compactions"][-1:] == [{"id": last["id"], "summaryModel": "scripted/small",
                                     "input": last["usage"]["input"], "output": last["usage"]["output"],
                                     "cacheRead": 0, "cacheWrite": 0, "cost": last["usage"]["cost"]["total"]}]
    table = run("stats", str(example)).stdout
    assert "summary model" in table and "scripted/small" in table
    pi_row = next(line for line in table.splitlines() if line.startswith(stats["compactions"][0]["id"][:16]))
    assert pi_row.endswith("  not recorded (Pi does not record the summary model)")  # never a bare "?"


def test_compaction_model_setting_picks_the_summarizer_per_model(example: Path) -> None:
    write_settings({"model": "scripted/small", "modelOverrides": {"scripted/other": {"model": "scripted/big"}}})
    with ScriptedModelServer() as server:
        write_models(server)
        server.expect(text("## Goal\nA"), text("## Original Request\nB"))
        out = run("compact", str(example), "--model", "scripted/big", "--keep-recent-tokens", "2000")
        server.assert_complete()
        assert out.returncode == 0, out.stderr
        assert {r.body["model"] for r in server.requests} == {"small"}


def test_resumable_records_the_span_before_the_request_and_links_it(example: Path) -> None:
    write_settings({"resumable": True})
    before = example.read_bytes()
    with ScriptedModelServer() as server:
        write_models(server)
        # the span entry must already be on disk when the summary request arrives
        seen: list[list[str]] = []

        def record(req: Any) -> bool:
            seen.append([e.get("customType", e["type"]) for e in lines(example)[len(before.splitlines()):]])
            return True

        server.expect(text("## Goal\nA").when(record), text("## Original Request\nB"))
        out = run("compact", str(example), "--model", "scripted/big", "--keep-recent-tokens", "2000")
        server.assert_complete()
    assert out.returncode == 0, out.stderr
    assert seen and seen[0] == [SPAN_TYPE]
    new = lines(example)[len(before.splitlines()):]
    assert [e["type"] for e in new] == ["custom", "compaction"]
    span, compaction = new
    assert compaction["details"]["spanId"] == span["id"]
    assert span["data"]["firstKeptEntryId"] == compaction["firstKeptEntryId"]
    assert span["data"]["settings"]["resumable"] is True and span["data"]["model"] == "scripted/big"


def test_resumable_failure_closes_the_span_and_the_next_run_plans_afresh(example: Path) -> None:
    write_settings({"resumable": True})
    with ScriptedModelServer() as server:
        write_models(server)
        server.expect(text("## Goal\nok"), text("cut").with_stop("max_tokens"),
                      text("## Goal\nok"), text("cut").with_stop("max_tokens"))
        out = run("compact", str(example), "--model", "scripted/big", "--keep-recent-tokens", "2000",
                  "--no-fallback")
        assert out.returncode == 2 and "token cap" in out.stderr
        tail = lines(example)[-4:]
        assert [e.get("customType") for e in tail] == [SPAN_TYPE, FAILURE_TYPE, FAILURE_TYPE, SPAN_END_TYPE]
        assert tail[3]["data"] == {"spanId": tail[0]["id"], "outcome": "failed"}
        server.expect(text("## Goal\nA"), text("## Original Request\nB"))
        out = run("compact", str(example), "--model", "scripted/big", "--keep-recent-tokens", "2000")
        server.assert_complete()
    assert out.returncode == 0, out.stderr
    entries = lines(example)
    spans = [e for e in entries if e.get("customType") == SPAN_TYPE]
    assert len(spans) == 2 and entries[-1]["details"]["spanId"] == spans[1]["id"]
