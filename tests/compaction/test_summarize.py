"""summarize_preparation: prompts, budgets, split turns, failures, chunking (spec 02 §7, cases 53-61)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from compaction_fixtures import Prep, assistant, tool_result, user

from picontext.compaction import prompts
from picontext.compaction.completion import ScriptedCompletion, assistant_reply
from picontext.compaction.file_ops import FileOperations
from picontext.compaction.summarize import (
    add_usage,
    chunk_conversation,
    history_max_tokens,
    summarize_preparation,
    turn_prefix_max_tokens,
)
from picontext.errors import (
    CompactionError,
    SummaryAborted,
    SummaryEmpty,
    SummaryError,
    SummaryToolCall,
    SummaryTruncated,
)


def _usage(n: int, **extra: int) -> dict:
    return {"input": n, "output": n, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2 * n,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0.5}, **extra}


def _text(req) -> str:
    return req.messages[0]["content"][0]["text"]


def test_budgets() -> None:
    assert (history_max_tokens(16384, 0), turn_prefix_max_tokens(16384, 0)) == (13107, 8192)
    assert (history_max_tokens(2000, 8192), turn_prefix_max_tokens(2000, 8192)) == (1600, 1000)
    assert (history_max_tokens(500_000, 128_000), turn_prefix_max_tokens(500_000, 128_000)) == (128_000, 128_000)
    assert history_max_tokens(0, 0) == 0


async def test_update_prompt_with_previous_summary_and_focus() -> None:
    model = ScriptedCompletion(["## Goal\nnew"], max_output_tokens=8192)
    prep = Prep([user("hello"), assistant("hi")], previous_summary="old summary")
    result = await summarize_preparation(prep, model, reserve_tokens=2000, instructions="focus", verify=False)
    req = model.requests[0]
    text = _text(req)
    assert "<previous-summary>\nold summary\n</previous-summary>" in text
    assert text.endswith("Additional focus: focus")
    assert prompts.UPDATE_PROMPT in text
    assert req.max_tokens == 1600 and req.system_prompt == prompts.SYSTEM_PROMPT
    assert len(req.messages) == 1 and req.messages[0]["role"] == "user"
    assert result.summary == "## Goal\nnew"
    assert result.first_kept_entry_id == "kept01" and result.tokens_before == 1000


async def test_initial_prompt_without_previous() -> None:
    model = ScriptedCompletion(["S"])
    await summarize_preparation(Prep([user("hello")]), model, reserve_tokens=16384, verify=False)
    assert prompts.HISTORY_PROMPT in _text(model.requests[0])
    assert "<conversation>\n[User]: hello\n</conversation>" in _text(model.requests[0])


async def test_reasoning_only_for_reasoning_models() -> None:
    for reasoning, level, expected in [(True, "medium", "medium"), (False, "medium", None), (True, "off", None)]:
        model = ScriptedCompletion(["S"], reasoning=reasoning)
        await summarize_preparation(Prep([user("x")]), model, reserve_tokens=100, thinking_level=level)
        assert model.requests[0].options.reasoning == expected


async def test_split_turn_prefix_only_uses_previous_summary() -> None:
    ops = FileOperations(read={"a"})
    model = ScriptedCompletion(["GEN"])
    prep = Prep([], [user("big")], True, previous_summary="PREV", file_ops=ops)
    result = await summarize_preparation(prep, model, reserve_tokens=100, verify=False)
    assert result.summary == "PREV\n\n---\n\n**Turn Context (split turn):**\n\nGEN\n\n<read-files>\na\n</read-files>"
    model = ScriptedCompletion(["GEN"])
    result = await summarize_preparation(Prep([], [user("big")], True), model, reserve_tokens=100, verify=False)
    assert result.summary.startswith("No prior history.\n\n---")
    assert "focus" not in _text(model.requests[0])


async def test_split_turn_runs_both_concurrently_and_sums_usage() -> None:
    started: list[str] = []
    gate = asyncio.Event()

    async def slow(req):
        started.append("history" if "<conversation>\n[User]: old" in _text(req) else "prefix")
        if len(started) == 2:
            gate.set()
        await asyncio.wait_for(gate.wait(), 2)  # both requests must be in flight at once
        return assistant_reply(started[-1].upper(), usage=_usage(10, reasoning=3))

    model = ScriptedCompletion([slow, slow])
    prep = Prep([user("old")], [user("new turn")], True)
    result = await summarize_preparation(prep, model, reserve_tokens=1000, instructions="focus", verify=False)
    assert sorted(started) == ["history", "prefix"]
    assert "\n\n---\n\n**Turn Context (split turn):**\n\n" in result.summary
    assert result.usage["input"] == 20 and result.usage["reasoning"] == 6 and result.usage["cost"]["total"] == 1
    prefix_req = next(r for r in model.requests if prompts.TURN_PREFIX_PROMPT in _text(r))
    assert "focus" not in _text(prefix_req) and prefix_req.max_tokens == 500


async def test_split_turn_on_a_one_at_a_time_server_asks_history_then_prefix() -> None:
    in_flight: list[str] = []
    order: list[str] = []

    async def exclusive(req):
        kind = "history" if "<conversation>\n[User]: old" in _text(req) else "prefix"
        assert not in_flight, f"{kind} sent while {in_flight} was still running"
        in_flight.append(kind)
        order.append(kind)
        await asyncio.sleep(0.01)  # a concurrent request would arrive now
        in_flight.remove(kind)
        return assistant_reply(kind.upper())

    model = ScriptedCompletion([exclusive, exclusive], one_at_a_time=True)
    result = await summarize_preparation(Prep([user("old")], [user("new turn")], True), model, reserve_tokens=1000,
                                         verify=False)
    assert order == ["history", "prefix"]
    assert result.summary.startswith("HISTORY\n\n---\n\n**Turn Context (split turn):**\n\nPREFIX")
    model = ScriptedCompletion(["ONLY PREFIX"], one_at_a_time=True)  # nothing before the turn: one request
    result = await summarize_preparation(Prep([], [user("t")], True), model, reserve_tokens=100, verify=False)
    assert len(model.requests) == 1 and result.summary.startswith("No prior history.\n\n---")


@pytest.mark.parametrize(
    ("reply", "error", "message"),
    [
        (assistant_reply("", stop_reason="error", error="boom"), SummaryError, "Summarization failed: boom"),
        (assistant_reply("partial", stop_reason="length"), SummaryTruncated, "token cap"),
        (assistant_reply("x", tool_call=("read", {"path": "a"})), SummaryToolCall,
         "Summarization attempted to call a tool"),
        (assistant_reply("half", stop_reason="aborted"), SummaryAborted, "aborted"),
        (assistant_reply("  \n"), SummaryEmpty, "empty"),
    ],
)
async def test_failures_are_typed(reply, error, message) -> None:
    with pytest.raises(error, match=message):
        await summarize_preparation(Prep([user("x")]), ScriptedCompletion([reply]), reserve_tokens=100)


async def test_failure_of_one_split_request_fails_the_whole() -> None:
    model = ScriptedCompletion(["fine", assistant_reply("", stop_reason="error", error="nope")])
    with pytest.raises(SummaryError, match="Turn prefix summarization failed: nope"):
        await summarize_preparation(Prep([user("a")], [user("b")], True), model, reserve_tokens=100)


async def test_missing_first_kept_id_fails_before_any_request() -> None:
    model = ScriptedCompletion([])
    with pytest.raises(CompactionError):
        await summarize_preparation(Prep([user("x")], first_kept_entry_id=""), model, reserve_tokens=100)
    assert model.requests == []


async def test_file_lists_appended_and_stored() -> None:
    msgs = [user("go"), assistant("", [("read", {"path": "b.ts"}), ("edit", {"path": "d.ts"})])]
    ops = FileOperations(read={"b.ts", "a.ts", "c.ts"}, written={"c.ts"}, edited={"d.ts"})
    result = await summarize_preparation(Prep(msgs, file_ops=ops), ScriptedCompletion(["S d.ts"]),
                                         reserve_tokens=100)
    assert result.summary.endswith("\n\n<read-files>\na.ts\nb.ts\n</read-files>\n\n<modified-files>\nc.ts\nd.ts\n"
                                   "</modified-files>")
    assert result.details["readFiles"] == ["a.ts", "b.ts"] and result.details["modifiedFiles"] == ["c.ts", "d.ts"]


def test_add_usage_optional_fields() -> None:
    assert "reasoning" not in add_usage(_usage(1), _usage(2))
    assert add_usage(None, _usage(2)) == _usage(2)


def test_chunking_keeps_plain_text_when_it_fits() -> None:
    assert chunk_conversation(["[User]: a", "[Assistant]: b"], 1000) == ["[User]: a\n\n[Assistant]: b"]
    chunks = chunk_conversation(["x" * 400, "y" * 400, "z" * 4000], 150)
    assert all(len(c) <= 600 for c in chunks) and "".join(chunks).count("z") == 4000


def _dense_server(window: int, ratio: float, seen: list[str]):
    """A summarizer whose real tokenizer counts `ratio` x chars/4 (numbers on a small local model)
    and that answers a request over its window with the wording llama.cpp's server uses."""

    def reply(req):
        text = _text(req)
        real = int(len(prompts.SYSTEM_PROMPT + text) / 4 * ratio) + req.max_tokens
        if real > window:
            return assistant_reply(None, stop_reason="error", error=(
                f"Error code: 400 - This model's maximum context length is {window} tokens. However, you "
                f"requested {real} tokens. Please reduce the length of the messages."))
        seen.append(text)
        return f"summary after chunk {len(seen)}"

    return reply


async def test_an_overflow_that_smaller_chunks_cannot_cure_fails_the_compaction() -> None:
    seen: list[str] = []
    # A window smaller than the output budget: no chunk size helps, the compaction fails cleanly.
    model = ScriptedCompletion(default=_dense_server(400, 1.0, seen), context_window=4000, max_output_tokens=500)
    with pytest.raises(SummaryError, match="maximum context length"):
        await summarize_preparation(Prep([user("x " * 3000), assistant("ok")]), model, reserve_tokens=1000,
                                    verify=False)
    assert seen == [] and 1 < len(model.requests) < 12  # halved a few times, then gave up


async def test_model_written_machine_blocks_are_replaced() -> None:
    reply = "notes\n\n<modified-files>\nfake.py\n</modified-files>"
    result = await summarize_preparation(Prep([user("x")]), ScriptedCompletion([reply]), reserve_tokens=100,
                                         verify=False)
    assert "fake.py" not in result.summary


async def test_tool_result_errors_reach_the_ledger() -> None:
    msgs = [user("run the tests"), assistant("", [("bash", {"command": "pytest"})]),
            tool_result("FAILED tests/test_a.py::test_x\nAssertionError: 1 != 2", name="bash", is_error=True)]
    result = await summarize_preparation(Prep(msgs), ScriptedCompletion(["We ran things."]), reserve_tokens=100)
    assert "<verified-facts>" in result.summary
    assert "> run the tests" in result.summary and "- AssertionError: 1 != 2" in result.summary
    assert result.details["verifiedFacts"]["lastUserRequest"] == "run the tests"


class _FakeStream:
    def __init__(self, message: dict) -> None:
        self._message = message

    async def result(self) -> dict:
        return self._message


async def test_stream_completion_retries_transient_errors_only() -> None:
    from picontext.ai.retry import RetryPolicy
    from picontext.compaction.completion import CompletionOptions, StreamCompletion

    model = {"id": "m", "provider": "p", "api": "anthropic-messages", "contextWindow": 1000, "maxTokens": 100,
             "reasoning": False}

    async def no_sleep(_: float) -> None:
        return None

    for replies, policy, calls, stop in [
        (["terminated", "terminated", None], RetryPolicy(max_retries=3, base_delay_ms=0), 3, "stop"),
        (["insufficient_quota"], RetryPolicy(max_retries=3), 1, "error"),
        (["terminated", None], RetryPolicy(enabled=False), 1, "error"),
        (["terminated"] * 3, RetryPolicy(max_retries=2, base_delay_ms=0), 3, "error"),
    ]:
        seen: list[tuple] = []

        def fake(model, context, options, replies=replies, seen=seen):
            seen.append((context, options))
            error = replies[len(seen) - 1]
            return _FakeStream(assistant_reply("S") if error is None else
                               assistant_reply("", stop_reason="error", error=error))

        completion = StreamCompletion(model, api_key="k", retry=policy, stream_fn=fake, sleep=no_sleep)
        reply = await completion("sys", [{"role": "user", "content": "x"}], 80, CompletionOptions())
        assert len(seen) == calls and reply["stopReason"] == stop
        context, options = seen[0]
        assert options.cache_retention == "none" and options.max_tokens == 80 and options.session_id
        assert context["systemPrompt"] == "sys" and context["tools"] == []
    assert len({o.session_id for _, o in seen}) == 1  # one id per summary request, kept across its retries
