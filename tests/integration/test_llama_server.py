"""picontext against a real OpenAI-compatible server: llama-cpp-python's server with SmolLM2-135M.

The server runs with its defaults on 127.0.0.1 (one process for the module; `scripts/install/
llama.sh` installs it); every request carries temperature 0 and a fixed seed (`compat` in
models.json, `LlamaServer.models_json`), so each test gets the same answers on every run. The
model's answers are not the point; the wire, the errors and the recovery are: print mode, a long
paste, a `-c` continuation that overflows the real window and recovers once, a manual
`picontext compact` with the summary strategy whose file Pi reads identically, and the live
evaluation. In CI (CI=true) a missing server fails; elsewhere it skips.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llama_fixture import serve_llama

from picontext.ai.types import empty_usage
from picontext.session.manager import SessionManager
from picontext.testing.llama_server import LlamaServer

N_CTX = 2048  # small: every token costs on two shared cores, and overflow is cheap to reach
MAX_TOKENS = 16  # print mode and the paste test: the wire is the point, not the answer's length
# Recovery needs room for a summary: 0.8 x 384 = 307 tokens of history summary, 192 of turn prefix
# (capped by the model's 512). SmolLM2 ends its summaries well inside these.
RESERVE_TOKENS = 384
SUMMARY_MAX_TOKENS = 512
REPO = Path(__file__).resolve().parents[2]
DIFFERENTIAL = REPO / "tests" / "differential"


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaServer]:
    yield from serve_llama(N_CTX)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One working directory for every run: the system prompt (which names it) is then the same
    prefix in every request, and the server reuses its evaluation from one request to the next."""
    return tmp_path_factory.mktemp("llama-work")


def configure(llama: LlamaServer, max_tokens: int) -> Path:
    home = Path(os.environ["PICONTEXT_DIR"])
    (home / "models.json").write_text(json.dumps(llama.models_json(max_tokens=max_tokens)))
    # A 2k window: reserve 384, keep ~100 (the defaults, 16k and 20k, are for 200k windows).
    (home / "settings.json").write_text(json.dumps(
        {"compaction": {"reserveTokens": RESERVE_TOKENS, "keepRecentTokens": 100}}))
    return home


@pytest.fixture
def home(llama: LlamaServer) -> Path:
    return configure(llama, MAX_TOKENS)


@pytest.fixture
def summary_home(llama: LlamaServer) -> Path:
    return configure(llama, SUMMARY_MAX_TOKENS)


def seed_session(workdir: Path, turns: list[tuple[str, str]]) -> Path:
    """Earlier turns written as picontext writes them (the server sends no usage): the test is
    about what the next request does, and model-written turns would make its size a dice roll."""
    manager = SessionManager.create(str(workdir))
    manager.append_model_change("llama", "smollm2")
    manager.append_thinking_level_change("off")
    for n, (question, answer) in enumerate(turns):
        manager.append_message({"role": "user", "content": [{"type": "text", "text": question}],
                                "timestamp": 1_780_000_000_000 + 2 * n})
        manager.append_message({"role": "assistant", "content": [{"type": "text", "text": answer}],
                                "api": "openai-completions", "provider": "llama", "model": "smollm2",
                                "usage": empty_usage(), "stopReason": "stop",
                                "timestamp": 1_780_000_000_001 + 2 * n})
    path = manager.get_session_file()
    assert path is not None
    return Path(path)


def picontext(home: Path, cwd: Path, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    # The timeout is a safety net, not a measure: on two shared cores a run whose summary is retried
    # and then replaced (two summaries to the token cap) has taken over 8 minutes.
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PICONTEXT_DIR"] = str(home)
    return subprocess.run([sys.executable, "-m", "picontext", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout)


def session_file(home: Path) -> Path:
    [path] = sorted((home / "sessions").rglob("*.jsonl"))
    return path


def entries(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def kinds(rows: list[dict[str, Any]]) -> list[str]:
    return [e["message"]["role"] if e["type"] == "message" else e["type"] for e in rows]


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_print_mode_holds_a_conversation(llama: LlamaServer, home: Path, workdir: Path) -> None:
    out = picontext(home, workdir, "run", "-p", "What is the capital of France? One word.", "--model", "llama/smollm2")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()
    [reply] = [e["message"] for e in entries(session_file(home)) if e["type"] == "message"
               and e["message"]["role"] == "assistant"]
    assert reply["stopReason"] in ("stop", "length") and reply["content"][0]["text"].strip()


def test_a_long_paste_gets_an_answer(llama: LlamaServer, home: Path, workdir: Path) -> None:
    paste = "\n".join(f"Line {i}: the quick brown fox jumps over the lazy dog near the river bank." for i in range(12))
    out = picontext(home, workdir, "run", "--model", "llama/smollm2", "-p", f"Summarize this log:\n{paste}")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()


# Earlier turns in plain, varied prose as a user writes it (a sentence repeated eight times
# primes a 135M model to repeat itself until its token cap).
BILLING_TURNS = [
    ("The billing service stores every invoice in a Postgres ledger table. Each row keeps the customer id, "
     "the amount in cents, the currency and a status that starts as open. Refunds are separate rows that point "
     "back to the invoice they cancel.\nDescribe the billing service.",
     "It keeps invoices and refunds as rows of a ledger table in Postgres, each with a customer, an amount, a "
     "currency and a status. An invoice starts open; a refund is its own row that points back at the invoice it "
     "cancels, so the history of a payment is never rewritten."),
    ("Every night at two o'clock a cron job settles the open invoices: it charges the saved card, marks the row "
     "paid or failed, and emails a receipt. Failed charges are retried three times over three days.\n"
     "What does it do at night?",
     "At 02:00 it charges each open invoice, marks it paid or failed, sends a receipt, and retries failures "
     "three times over three days. A charge that still fails after the third try stays failed, and the customer "
     "gets an email asking for a new card."),
    ("The finance team reads the ledger through a read-only replica, and the monthly report sums the paid rows "
     "per currency. Nobody else may query the primary database.\nWho reads the ledger?",
     "The finance team, through a read-only replica; the monthly report sums paid invoices per currency. The "
     "primary database is reserved for the billing service itself, so reports can never lock the ledger while "
     "the nightly job is writing to it."),
]


def overflow_and_recover(home: Path, workdir: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A `-c` continuation whose request overflows the real window (the test below, and
    bench/bench_llama_overflow.py, which runs it 20 times in a row)."""
    path = seed_session(workdir, BILLING_TURNS)
    # Digits tokenize to about one token each, four times the chars/4 estimate: this paste is
    # estimated at ~380 tokens and is ~1,500 real ones, so the request (system prompt, three
    # turns, paste) is sent and overflows the real 2,048 window.
    return path, picontext(home, workdir, "run", "--model", "llama/smollm2", "--mode", "json", "-c", "-p",
                           f"Checksums:\n{CHECKSUMS}\nHow many checksums are there?")


CHECKSUMS = " ".join(f"{n:08d}" for n in range(1000, 1167))


def summary_outcome(rows: list[dict[str, Any]]) -> str:
    """How the compaction's summary came about: "model", "retry" (the second attempt) or
    "fallback" (the mechanical summary), checked against its failure records."""
    compaction = next(r for r in reversed(rows) if r["type"] == "compaction")
    records = [r for r in rows if r["type"] == "custom" and r["customType"] == "picontext.compaction-failed"]
    details = compaction["details"]
    outcome = "fallback" if "fallback" in details else "retry" if "summaryRetry" in details else "model"
    assert [r["data"]["next"] for r in records] == {"model": [], "retry": ["retry"],
                                                    "fallback": ["retry", "fallback"]}[outcome]
    return outcome


def test_a_continuation_overflows_the_real_window_and_recovers_once(
    llama: LlamaServer, summary_home: Path, workdir: Path
) -> None:
    path, out = overflow_and_recover(summary_home, workdir)
    seen = events(out.stdout)
    types = [e["type"] for e in seen]
    # The silent stream was resolved into the server's own 400 and classified as an overflow:
    # one compaction, never a blind retry, then exactly one retry that the model answers.
    assert out.returncode == 0, out.stderr
    assert [e["reason"] for e in seen if e["type"] == "compaction_start"] == ["overflow"]
    assert "auto_retry_start" not in types and types.count("agent_start") == 2
    end = next(e for e in seen if e["type"] == "compaction_end")
    assert end["result"] is not None and end["willRetry"] is True
    rows = entries(path)
    outcome = summary_outcome(rows)  # a summary that failed (SmolLM2 writes to its cap) is retried, then replaced
    rows = [r for r in rows if r["type"] != "custom"]  # the failure records, if any (Pi ignores them)
    assert kinds(rows)[-5:] == ["user", "assistant", "context_edit", "compaction", "assistant"]
    failed, compaction, answer = rows[-4]["message"], rows[-2], rows[-1]["message"]
    assert failed["stopReason"] == "error"
    assert failed["errorMessage"].startswith("400 ") and "maximum context length" in failed["errorMessage"]
    assert rows[-3]["targetId"] == rows[-4]["id"]  # the failed attempt is omitted, not sent again
    assert answer["stopReason"] in ("stop", "length") and answer["content"][0]["text"].strip()
    # The paste is quoted in the summary's ledger only up to the summary budget (307 tokens).
    assert f"Last user request (verbatim, its first 307 of {len(CHECKSUMS) + 41:,} characters):" \
        in compaction["summary"]
    assert (end.get("notice") is not None) == (outcome != "model")
    assert_pi_reads_it_identically(path)


def _pi_reference() -> tuple[Any, Any, Any]:
    sys.path.insert(0, str(DIFFERENTIAL))
    try:
        spec = importlib.util.spec_from_file_location("_llama_pi_conftest", DIFFERENTIAL / "conftest.py")
        assert spec is not None and spec.loader is not None
        harness = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(harness)
        spec = importlib.util.spec_from_file_location("_llama_pi_projection", DIFFERENTIAL / "test_projection_vs_pi.py")
        assert spec is not None and spec.loader is not None
        projection = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(projection)
    finally:
        sys.path.remove(str(DIFFERENTIAL))
    return harness.PiReference(), projection.normalise, projection.first_difference


def assert_pi_reads_it_identically(path: Path) -> None:
    pi, normalise, first_difference = _pi_reference()
    try:
        reference = pi.op("session.contextOfFile", str(path), "__undefined__")
    finally:
        pi.close()
    ours = SessionManager.open(str(path), str(path.parent)).build_session_context()
    assert first_difference(normalise(reference), normalise(ours)) is None


DEPLOY_TURNS = [
    ("Our deploy script is a bash file in ops/deploy.sh. It builds the image, pushes it to the registry, runs "
     "the database migrations and then restarts the four workers one at a time.\nWhat does the deploy script do?",
     "It builds and pushes the image, runs the migrations, then restarts the four workers one by one."),
    ("The migrations run inside a transaction and the script waits for the health check of each worker before "
     "it moves on to the next one.\nIn what order does it work?",
     "Migrations first, in a transaction; then each worker is restarted after the previous one is healthy."),
    ("Last week a migration locked the orders table for ten minutes and the checkout page timed out.\n"
     "Anything risky?",
     "Long migrations can lock busy tables; run them outside peak hours or split them into smaller steps."),
]


def test_manual_compact_with_the_summary_strategy_and_pi_reads_the_file(
    llama: LlamaServer, summary_home: Path, workdir: Path
) -> None:
    path = seed_session(workdir, DEPLOY_TURNS)
    before = kinds(entries(path))
    out = picontext(summary_home, workdir, "compact", str(path), "--model", "llama/smollm2", "--strategy", "summary",
                    "--keep-recent-tokens", "60")
    assert out.returncode == 0, out.stderr
    rows = entries(path)
    summary_outcome(rows)
    rows = [r for r in rows if r["type"] != "custom"]
    assert kinds(rows) == [*before, "compaction"]
    compaction = rows[-1]
    assert compaction["summary"].strip() and compaction["summary"].count("<verified-facts>") <= 1
    kept = [r["id"] for r in rows].index(compaction["firstKeptEntryId"])
    assert 0 < kept < len(rows) - 1  # the older turns are summarized, the newest kept
    context = SessionManager.open(str(path), str(path.parent)).build_session_context()
    assert context["messages"][0]["role"] == "compactionSummary"
    assert len(context["messages"]) == 1 + sum(1 for r in rows[kept:-1] if r["type"] == "message")
    assert_pi_reads_it_identically(path)


def _ledger_lines(first: int, count: int) -> str:
    return "\n".join(f"order {n} shipped 2024-03-{n % 28 + 1:02d} to {n % 97} Elm St, "
                     f"total {n * 7 % 9000}.{n % 100:02d}" for n in range(first, first + count))


# One paste of ~4,000 characters: ~1,000 tokens by chars/4, so the summary's chunking (room for
# ~1,150 in this window) sends it in one request; on SmolLM2 such lines are ~2.5x chars/4, so
# that request is ~2,500 real tokens and the server refuses it.
LEDGER_TURNS = [
    (f"Here is the orders ledger:\n{_ledger_lines(4000, 70)}\nKeep it in mind.", "Noted."),
    ("Which street comes up most often in the ledger, and is it the same for every order?",
     "Elm St comes up in every line of the ledger; only the house number changes."),
    ("Which day of March had the largest total, roughly, and how many orders shipped that day?",
     "The totals are spread evenly; no single day in March stands out from the others."),
]


def test_a_summary_chunk_the_real_server_refuses_is_split_and_the_compaction_completes(
    llama: LlamaServer, summary_home: Path, workdir: Path
) -> None:
    """Numbers and dates tokenize to about twice chars/4 on this model, so the span, chunked by
    the estimate to fit the 2,048 window, is refused by the server (a silent stream resolved
    into its 400); the refused chunk is split in halves and the compaction completes (Pi, and
    picontext before, failed it)."""
    path = seed_session(workdir, LEDGER_TURNS)
    before = kinds(entries(path))
    # The summary may use the model's whole 512-token cap (0.8 x 640): SmolLM2 ends a summary of
    # numbered lines later than one of prose.
    (summary_home / "settings.json").write_text(json.dumps(
        {"compaction": {"reserveTokens": 640, "keepRecentTokens": 100}}))
    out = picontext(summary_home, workdir, "compact", str(path), "--model", "llama/smollm2", "--strategy", "summary",
                    "--keep-recent-tokens", "20")
    # Without the split the first summary request fails with the server's "maximum context
    # length" 400 (checked by hand: the records then say "overflow").
    assert out.returncode == 0, out.stderr
    rows = entries(path)
    summary_outcome(rows)  # SmolLM2 may still write to its cap on numbered lines: retried, or replaced
    records = [r["data"] for r in rows if r["type"] == "custom"]
    assert "overflow" not in [r["kind"] for r in records]  # every request after the split fitted
    assert "maximum context length" not in out.stderr, out.stderr
    assert kinds([r for r in rows if r["type"] != "custom"]) == [*before, "compaction"]
    assert rows[-1]["summary"].strip()
    assert_pi_reads_it_identically(path)


def test_live_evaluation_runs_against_the_real_server(llama: LlamaServer, home: Path, workdir: Path) -> None:
    out = picontext(home, workdir, "eval", "compaction", "--model", "llama/smollm2", "--rounds", "1",
                    "--sessions", "1", "--strategy", "summary", "--json")
    assert out.returncode == 0, out.stderr
    [row] = json.loads(out.stdout)
    assert (row["strategy"], row["summarizer"], row["total"]) == ("summary", "live", 9)
    assert row["compactions"] + len(row["failures"]) == 1  # the round compacted, or said why not
    assert 0 < row["tokensAfter"][0] < N_CTX
    assert sum(k["total"] for k in row["byKind"].values()) == 9
