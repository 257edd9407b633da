"""`picontext tokens` as a real subprocess: JSON contract, text output, one-line errors, read-only."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

from inprocess import run_main

from picontext.compaction.tokens import estimate_context_tokens, estimate_tokens
from picontext.session.projection import build_session_projection
from picontext.session.store import load_file_entries
from picontext.testing import ScriptedModelServer, text

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "sessions" / "refactor-session.jsonl"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_main("tokens", *args)


def expected(path: Path, leaf: str | None = None) -> dict:
    entries = [e for e in load_file_entries(path) if e.get("type") != "session"]
    messages = build_session_projection(entries, leaf).messages if leaf else build_session_projection(entries).messages
    return {"estimate": estimate_context_tokens(messages), "perMessage": [estimate_tokens(m) for m in messages]}


def test_json_output_is_estimate_and_per_message() -> None:
    before = hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()
    proc = run(str(EXAMPLE), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert list(data) == ["estimate", "perMessage"]
    assert list(data["estimate"]) == ["tokens", "usageTokens", "trailingTokens", "lastUsageIndex"]
    assert data == expected(EXAMPLE)
    assert hashlib.sha256(EXAMPLE.read_bytes()).hexdigest() == before  # read-only


def test_leaf_selects_the_branch() -> None:
    ids = [json.loads(line)["id"] for line in EXAMPLE.read_text(encoding="utf-8").splitlines()[1:]]
    leaf = ids[len(ids) // 3]
    proc = run(str(EXAMPLE), "--leaf", leaf, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == expected(EXAMPLE, leaf)


def test_text_output_names_the_anchor(tmp_path: Path) -> None:
    proc = run(str(EXAMPLE))
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert "tokens" in first and "messages" in first and "usage" in first
    assert "usage anchor" in proc.stdout


def test_stale_usage_is_reported(tmp_path: Path) -> None:
    lines = [
        {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/x"},
        {"type": "message", "id": "a1", "parentId": None, "timestamp": "2026-01-01T00:00:01.000Z",
         "message": {"role": "user", "content": "x" * 400, "timestamp": 1}},
        {"type": "message", "id": "a2", "parentId": "a1", "timestamp": "2026-01-01T00:00:02.000Z",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "stopReason": "stop",
                     "usage": {"input": 5000, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 5001},
                     "timestamp": 2}},
        {"type": "context_edit", "id": "a3", "parentId": "a2", "timestamp": "2026-01-01T00:00:03.000Z",
         "targetId": "a1", "replacement": {"content": "short"}},
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    proc = run(str(path))
    assert proc.returncode == 0, proc.stderr
    first, second = proc.stdout.splitlines()[:2]
    assert first.startswith("3 tokens now · 2 messages · chars/4 estimate")
    assert second == ("Pi's count (--json): 5001 tokens = usage 5001 at message 1 + 0 estimated after it; that usage "
                      "was reported before context edit a3, so it still counts what that edit took out")
    pi = {"tokens": 5001, "usageTokens": 5001, "trailingTokens": 0, "lastUsageIndex": 1}
    assert json.loads(run(str(path), "--json").stdout) == {"estimate": pi, "perMessage": [2, 1]}  # exactly Pi's


def test_after_a_compaction_both_counts_are_shown_and_the_stale_one_explained(tmp_path: Path) -> None:
    """The compaction reports its before/after estimate; `tokens` then shows that same number as
    the context now, and Pi's count (the kept reply's older usage) with the reason it is higher."""
    copy = tmp_path / "s.jsonl"
    copy.write_bytes(EXAMPLE.read_bytes())
    with ScriptedModelServer() as server:
        server.expect(text("## Goal\nFinish the refactor."), text("## Original Request\nmypy"))
        (Path(os.environ["PICONTEXT_DIR"]) / "models.json").write_text(json.dumps({"providers": {"scripted": {
            "baseUrl": server.url, "api": "anthropic-messages", "apiKey": "k",
            "models": [{"id": "m1", "contextWindow": 200000, "maxTokens": 4096}]}}}))
        done = run_main("compact", str(copy), "--model", "scripted/m1", "--keep-recent-tokens", "2000", "--json")
    assert done.returncode == 0, done.stderr
    after = json.loads(done.stdout)["tokensAfter"]
    compaction = json.loads(copy.read_text().splitlines()[-1])["id"]
    proc = run(str(copy))
    first, second = proc.stdout.splitlines()[:2]
    assert first.startswith(f"{after} tokens now ·")  # the number the compaction reported
    assert second.startswith("Pi's count (--json): 21792 tokens = usage 21792 at message ")
    assert second.endswith(f"reported before compaction {compaction}, so it still counts what that compaction "
                           "summarized")
    assert json.loads(run(str(copy), "--json").stdout)["estimate"]["tokens"] == 21792  # Pi's, unchanged


def test_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    for args in ([str(tmp_path / "missing.jsonl")], [str(EXAMPLE), "--leaf", "no-such-id"], [str(tmp_path)]):
        proc = run(*args)
        assert proc.returncode == 2 and proc.stdout == ""
        assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("picontext: ")
