"""Crash-resumable compaction: kill -9 a real `picontext compact` at random moments, reopen, resume.

Every crashed file and every resumed file must be read by Pi exactly as by picontext (context and
compaction plan), hold no torn line, and end with exactly one new compaction; a span pending at
the crash is the one the resumed compaction closes. Trials: PICONTEXT_CRASH_TRIALS (default 6;
the issue's measurement runs 20).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pi_reference import UNDEFINED, PiReference
from test_compaction_vs_pi import PythonSide, compare_file
from test_projection_vs_pi import first_difference, normalise

from picontext.compaction.compact import compact_session
from picontext.compaction.completion import StreamCompletion
from picontext.compaction.resumable import SPAN_TYPE, find_pending_span
from picontext.compaction.settings import CompactionSettings
from picontext.errors import NothingToCompact
from picontext.scripted import ScriptedModelServer, text
from picontext.session.manager import SessionManager

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "sessions" / "refactor-session.jsonl"
TRIALS = int(os.environ.get("PICONTEXT_CRASH_TRIALS", "6"))
KEEP = 2000
HISTORY = "## Goal\n" + "Split invoicer/core.py into modules. " * 20
PREFIX = "## Original Request\n" + "Run mypy on the package. " * 20


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]  # a torn line fails here


def compactions(path: Path) -> list[dict[str, Any]]:
    return [e for e in lines(path) if e.get("type") == "compaction"]


def pi_reads_it_identically(pi: PiReference, py: PythonSide, path: Path, label: str) -> None:
    manager = SessionManager.open(str(path), str(path.parent), warn=lambda message: None)
    diff = first_difference(normalise(pi.op("session.contextOfFile", str(path), UNDEFINED)),
                            normalise(manager.build_session_context()))
    assert diff is None, f"{label}: {diff}"
    compare_file(pi, py, path, [UNDEFINED], [KEEP, 20000], label, random_ids=False)


def start_compact(path: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    return subprocess.Popen([sys.executable, "-m", "picontext", "compact", str(path), "--model", "scripted/m",
                             "--keep-recent-tokens", str(KEEP)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def script(server: ScriptedModelServer, hold: threading.Event | None = None) -> None:
    server.reset()
    history = text(HISTORY).slow(0.02)
    server.expect(history.hold_after(2, hold) if hold is not None else history, text(PREFIX).slow(0.02))


def resume(server: ScriptedModelServer, path: Path) -> tuple[str, int]:
    """Reopen in this process and compact again: ("resumed"|"done", summary requests made)."""
    script(server)
    manager = SessionManager.open(str(path), str(path.parent), warn=lambda message: None)
    model = server.model("anthropic-messages", id="m")
    settings = CompactionSettings(keep_recent_tokens=KEEP, resumable=True)
    try:
        asyncio.run(compact_session(manager, completion=StreamCompletion(model, api_key="k"), settings=settings))
    except NothingToCompact as exc:
        assert "Already compacted" in str(exc)
        return "done", len(server.requests)
    return "resumed", len(server.requests)


@pytest.fixture
def server() -> Any:
    with ScriptedModelServer() as s:
        home = Path(os.environ["PICONTEXT_DIR"])
        (home / "models.json").write_text(json.dumps({"providers": {"scripted": {
            "baseUrl": s.url, "api": "anthropic-messages", "apiKey": "k",
            "models": [{"id": "m", "contextWindow": 200000, "maxTokens": 4096}]}}}))
        (home / "settings.json").write_text(json.dumps({"compaction": {"resumable": True}}))
        yield s


def test_kill_9_at_random_moments_then_resume(server: ScriptedModelServer, pi: PiReference, tmp_path: Path) -> None:
    py = PythonSide(tmp_path)
    original = len(compactions(EXAMPLE))
    # One full run, to know how long a compaction takes end to end (process start included).
    first = tmp_path / "full.jsonl"
    shutil.copy(EXAMPLE, first)
    script(server)
    began = time.monotonic()
    assert start_compact(first).wait(timeout=120) == 0
    duration = time.monotonic() - began
    assert len(compactions(first)) == original + 1
    rng = random.Random(1404)
    # Stratified random moments over the whole run, plus one kill while the summary is in flight
    # (the server holds the stream until the kill), so every phase is hit.
    moments: list[float | None] = [duration * (i + rng.random()) / TRIALS for i in range(TRIALS)] + [None]
    phases: dict[str, int] = {"before-span": 0, "span-pending": 0, "compacted": 0}
    for trial, moment in enumerate(moments):
        path = tmp_path / f"trial{trial}.jsonl"
        shutil.copy(EXAMPLE, path)
        hold = threading.Event() if moment is None else None
        script(server, hold)
        proc = start_compact(path)
        if moment is None:
            deadline = time.monotonic() + 60
            while not server.requests and time.monotonic() < deadline:
                time.sleep(0.01)
            assert server.requests, "the compaction never sent its summary request"
        else:
            time.sleep(moment)  # the random moment itself is what this test is about
        proc.kill()
        proc.wait(timeout=30)
        if hold is not None:
            hold.set()
        label = f"trial {trial} (kill at {moment if moment is not None else 'in-flight'})"
        crashed = lines(path)
        pending = find_pending_span(SessionManager.open(str(path), str(tmp_path)).get_branch())
        done = len(compactions(path)) - original
        assert done in (0, 1), label
        phases["compacted" if done else "span-pending" if pending else "before-span"] += 1
        pi_reads_it_identically(pi, py, path, f"{label}, crashed")

        outcome, requests = resume(server, path)
        after = lines(path)
        assert after[: len(crashed)] == crashed, f"{label}: the file was rewritten, not appended to"
        new = compactions(path)
        assert len(new) == original + 1, f"{label}: {len(new) - original} compactions instead of one"
        assert (outcome == "done") == bool(done), label
        assert requests == (0 if done else 2), f"{label}: {requests} summary requests to resume"
        if pending is not None and not done:
            assert new[-1]["details"]["spanId"] == pending.entry_id, f"{label}: a new span instead of the pending one"
            assert new[-1]["firstKeptEntryId"] == pending.data["firstKeptEntryId"]
        spans = [e for e in after if e.get("customType") == SPAN_TYPE]
        assert len(spans) == 1 and new[-1]["details"]["spanId"] == spans[0]["id"], label
        pi_reads_it_identically(pi, py, path, f"{label}, resumed")
    print(f"\ncrash phases over {len(moments)} kills: {phases} (full run {duration:.2f} s)")
    assert phases["span-pending"] >= 1
