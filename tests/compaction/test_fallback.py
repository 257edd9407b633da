"""A compaction that always frees the window (compaction/fallback.py), with scripted completions.

Every failure kind on the library path (`compact_session`, which `picontext compact` runs):
the retry succeeds, or both attempts fail and the mechanical summary takes over; an abort is
never a failure to fall back from; each failed attempt leaves one record.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from compaction_fixtures import Prep, assistant, tool_result, user

from picontext.ai.event_stream import AbortSignal
from picontext.compaction.compact import compact_session
from picontext.compaction.completion import CompletionRequest, ScriptedCompletion, assistant_reply
from picontext.compaction.fallback import (
    FALLBACK_MAX_TOKENS,
    MIN_OVERSIZE_TOKENS,
    SMALLER_CHUNKS,
    check_summary,
    mechanical_summary,
)
from picontext.compaction.records import failure_records
from picontext.compaction.settings import CompactionSettings, Settings, validate_settings
from picontext.errors import ConfigError, SummaryAborted, SummaryUnusable
from picontext.session.dropped import dropped_entries
from picontext.session.manager import SessionManager

SETTINGS = CompactionSettings(reserve_tokens=2000, keep_recent_tokens=400)  # history budget 1600 tokens
RETRY_NOTE = "A first attempt at this note could not be used"
GOOD = "## Goal\nRename load_cfg to load_config.\n\n## Progress\n- [x] renamed"
OVERFLOW_TEXT = ("This model's maximum context length is 4096 tokens. However, your messages resulted in 9000 "
                 "tokens. Please reduce the length of the messages.")


def session(tmp_path: Path) -> SessionManager:
    """A session whose cut (keep 400) lands on a user message: 16 messages summarized, one request."""
    manager = SessionManager.create(str(tmp_path), str(tmp_path / "sessions"))
    manager.append_message(user("Rename load_cfg to load_config in app/settings.py and fix the tests."))
    call = assistant("Reading it.", [("read", {"path": "app/settings.py"})])
    manager.append_message(call)
    manager.append_message(tool_result("def load_cfg():\n" + "    x = 1\n" * 300, call["content"][1]["id"]))
    call = assistant("", [("edit", {"path": "app/settings.py", "oldText": "load_cfg", "newText": "load_config"})])
    manager.append_message(call)
    manager.append_message(tool_result("ImportError: cannot import name 'load_cfg' from 'app.settings'",
                                       call["content"][0]["id"], "edit", True))
    manager.append_message(assistant("The import still fails; fixing the caller."))
    for i in range(6):
        manager.append_message(user(f"Step {i}: " + "please go on with the work. " * 30))
        manager.append_message(assistant(f"Done with step {i}. " + "I changed things as asked. " * 30))
    return manager


async def _never(request: CompletionRequest) -> str:
    """A server that does not answer within any sane deadline. After a minute it does answer (a good
    summary): without the summary timeout the test then fails on its assertions instead of hanging."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.Event().wait(), 60)
    return "## Goal\nAnswered a minute late."


FAILURES: dict[str, Any] = {
    "length": assistant_reply("## Goal\nhalf a summ", stop_reason="length"),
    "empty": assistant_reply(""),
    "toolCall": assistant_reply("Let me look.", tool_call=("read", {"path": "a.py"})),
    "error": assistant_reply("", stop_reason="error", error="400 invalid_request_error: malformed request"),
    "garbage": "?!?! ... --- !!! ***",
    "refusal": "I'm sorry, but I can't help with that request.",
    "oversize": "## Goal\n" + "words and more words " * 4000,  # ~21,000 tokens: a server that ignored max_tokens
    "timeout": _never,
    "overflow": assistant_reply("", stop_reason="error", error=OVERFLOW_TEXT),
}


def settings_for(kind: str) -> CompactionSettings:
    # Only the held request meets the deadline; the others answer at once, whatever the load.
    return CompactionSettings(reserve_tokens=2000, keep_recent_tokens=400,
                              summary_timeout_ms=100 if kind == "timeout" else 180_000)


def is_retry(request: CompletionRequest) -> bool:
    return RETRY_NOTE in request.messages[0]["content"][0]["text"]


def read(path: str | None) -> bytes:
    assert path is not None
    return Path(path).read_bytes()


def records(manager: SessionManager) -> list[dict[str, Any]]:
    path = manager.get_session_file()
    assert path is not None
    return failure_records(json.loads(line) for line in Path(path).read_text().splitlines())


@pytest.mark.parametrize("kind", sorted(FAILURES))
async def test_a_failed_attempt_is_retried_once_tighter_and_the_retry_is_used(tmp_path: Path, kind: str) -> None:
    manager = session(tmp_path)
    failure = FAILURES[kind]

    def script(request: CompletionRequest) -> Any:
        if is_retry(request):
            return GOOD
        return failure(request) if callable(failure) else failure

    model = ScriptedCompletion(default=script)
    outcome = await compact_session(manager, completion=model, settings=settings_for(kind))
    assert outcome.summary is not None and outcome.summary.summary.startswith(GOOD)
    assert outcome.summary.details["summaryRetry"]["reason"] == kind
    assert "fallback" not in outcome.summary.details
    [record] = records(manager)
    assert (record["attempt"], record["kind"], record["next"], record["reason"]) == (1, kind, "retry", "manual")
    retries = [r for r in model.requests if is_retry(r)]
    assert "at most 600 words" in retries[0].messages[0]["content"][0]["text"]  # 0.4 x 1600, capped
    first = [r for r in model.requests if not is_retry(r)]
    if kind in SMALLER_CHUNKS:  # the conversation went in smaller pieces
        assert len(retries) > 1 and all(len(r.messages[0]["content"][0]["text"]) <
                                        len(first[0].messages[0]["content"][0]["text"]) for r in retries)
    else:
        assert len(retries) == 1


@pytest.mark.parametrize("kind", sorted(FAILURES))
async def test_two_failed_attempts_fall_back_to_the_mechanical_summary(tmp_path: Path, kind: str) -> None:
    manager = session(tmp_path)
    outcome = await compact_session(manager, completion=ScriptedCompletion(default=FAILURES[kind]),
                                    settings=settings_for(kind))
    assert outcome.summary is not None
    details = outcome.summary.details
    assert details["fallback"]["reason"] == kind and details["fallback"]["attempts"] == 2
    assert len(details["fallback"]["errors"]) == 2
    assert outcome.tokens_after < outcome.tokens_before  # the window is freed
    assert [(r["attempt"], r["kind"], r["next"]) for r in records(manager)] == [(1, kind, "retry"),
                                                                                (2, kind, "fallback")]
    summary = outcome.summary.summary
    # Every compacted message is named by its id, and `dropped` reads each one back.
    dropped = dropped_entries(SessionManager.open(manager.get_session_file()))
    assert len(dropped) == 16 and all(d.entry_id in summary for d in dropped)
    assert "[tool result masked by picontext: read(path=\"app/settings.py\") returned" in summary
    assert "Last user request (verbatim):\n> Step 4: please go on" in summary
    assert "- ImportError: cannot import name 'load_cfg' from 'app.settings'" in summary
    assert summary.endswith("<modified-files>\napp/settings.py\n</modified-files>")
    reopened = SessionManager.open(manager.get_session_file())
    context = reopened.build_session_context()["messages"]
    assert [m["role"] for m in context][:2] == ["compactionSummary", "user"]


async def test_an_abort_is_not_a_failure_to_fall_back_from(tmp_path: Path) -> None:
    manager = session(tmp_path)
    path = manager.get_session_file()
    before = read(path)
    signal = AbortSignal()

    def abort(request: CompletionRequest) -> str:
        signal.abort("user")
        return GOOD

    with pytest.raises(SummaryAborted):
        await compact_session(manager, completion=ScriptedCompletion(default=abort), settings=SETTINGS,
                              signal=signal)
    assert read(path) == before  # no compaction, no failure record


async def test_an_abort_during_the_retry_keeps_the_first_record_and_writes_no_compaction(tmp_path: Path) -> None:
    manager = session(tmp_path)
    signal = AbortSignal()

    def script(request: CompletionRequest) -> Any:
        if is_retry(request):
            signal.abort("user")
            return GOOD
        return FAILURES["length"]

    with pytest.raises(SummaryAborted):
        await compact_session(manager, completion=ScriptedCompletion(default=script), settings=SETTINGS,
                              signal=signal)
    assert [(r["attempt"], r["next"]) for r in records(manager)] == [(1, "retry")]
    path = manager.get_session_file()
    assert path is not None and b'"type":"compaction"' not in read(path)


async def test_a_summary_twenty_times_its_budget_is_never_accepted(tmp_path: Path) -> None:
    """Issue 19: `tokens 20520 -> 257605` was accepted from a server that ignored max_tokens."""
    manager = session(tmp_path)
    bloated = "## Goal\n" + "the same old words again " * (20 * 1600 // 5)
    model = ScriptedCompletion(default=bloated)
    outcome = await compact_session(manager, completion=model, settings=SETTINGS)
    assert outcome.summary is not None and outcome.summary.details["fallback"]["reason"] == "oversize"
    assert outcome.tokens_after < outcome.tokens_before
    assert len(outcome.summary.summary) <= 1600 * 4 + 200  # the budget, plus Pi's file lists


def test_check_summary_refuses_only_what_cannot_serve() -> None:
    span = [user("x " * 1200)]  # ~600 tokens to replace
    prep = Prep(messages_to_summarize=span)
    check_summary("## Goal\n" + "a " * 1000, prep, reserve_tokens=2000, model_max=0)  # ~500 tokens: fine
    with pytest.raises(SummaryUnusable) as larger:  # larger than what it replaces
        check_summary("## Goal\n" + "a " * 1400, prep, reserve_tokens=2000, model_max=0)
    assert larger.value.kind == "oversize"
    tiny = Prep(messages_to_summarize=[user("hi")])
    check_summary("## Goal\n" + "a " * (MIN_OVERSIZE_TOKENS * 2 - 20), tiny, reserve_tokens=2000, model_max=0)
    with pytest.raises(SummaryUnusable, match="more than 2x its budget"):  # far beyond its budget
        check_summary("## Goal\n" + "word " * 2000, Prep(messages_to_summarize=[user("y " * 9000)]),
                      reserve_tokens=1000, model_max=0)
    with pytest.raises(SummaryUnusable) as repeated:
        check_summary("\n".join(["## Goal", *["- the same line"] * 20]), prep, reserve_tokens=2000, model_max=0)
    assert repeated.value.kind == "garbage"
    # A long summary that only mentions an apology is not a refusal; a repeated heading is not garbage.
    check_summary("## Goal\nSorry-proof the parser.\n" + "- step\n- other step\n" * 5, prep, reserve_tokens=2000,
                  model_max=0)


def test_the_mechanical_summary_of_a_huge_span_stays_within_its_budget() -> None:
    span = []
    for i in range(2000):
        span += [user(f"request {i} " + "z" * 300), assistant(f"answer {i} " + "w" * 300)]
    prep = Prep(messages_to_summarize=span, previous_summary="## Goal\n" + "earlier work. " * 3000)
    result = mechanical_summary(prep, reserve_tokens=16384, model_max=0, failures=[])
    body = result.summary
    assert len(body) <= FALLBACK_MAX_TOKENS * 4
    assert "earlier messages not listed (`picontext dropped` lists them all)" in body
    assert "## Earlier summary\n## Goal\nearlier work." in body and "more characters of it are in" in body
    assert "answer 1999" in body  # the newest are listed
    assert result.details["fallback"] == {"reason": "none", "attempts": 0, "errors": []}


async def test_a_second_fallback_keeps_the_previous_summary(tmp_path: Path) -> None:
    manager = session(tmp_path)
    await compact_session(manager, completion=ScriptedCompletion(default=GOOD), settings=SETTINGS)
    for i in range(6):
        manager.append_message(user(f"Later {i}: " + "more work please. " * 40))
        manager.append_message(assistant(f"Did later {i}. " + "all done here. " * 40))
    outcome = await compact_session(manager, completion=ScriptedCompletion(default=FAILURES["empty"]),
                                    settings=SETTINGS)
    assert outcome.summary is not None and "fallback" in outcome.summary.details
    assert "## Earlier summary\n" + GOOD in outcome.summary.summary
    assert "Last user request (verbatim):\n> Later 4:" in outcome.summary.summary


def test_summary_timeout_and_fallback_settings() -> None:
    assert CompactionSettings().summary_timeout_ms == 180_000 and CompactionSettings().fallback_summary
    settings = Settings({"compaction": {"summaryTimeoutMs": 5000, "fallbackSummary": False,
                                        "modelOverrides": {"llama/slow": {"summaryTimeoutMs": 900_000}}}})
    assert settings.compaction().summary_timeout_ms == 5000 and not settings.compaction().fallback_summary
    assert settings.compaction("llama/slow").summary_timeout_ms == 900_000
    assert CompactionSettings.from_json(settings.compaction().to_json()) == settings.compaction()
    for bad in ({"summaryTimeoutMs": -1}, {"summaryTimeoutMs": "60s"}, {"fallbackSummary": "no"}):
        with pytest.raises(ConfigError, match=r"settings\.json: invalid value"):
            validate_settings({"compaction": bad}, "settings.json")

