"""Spans larger than the summarizer's window: notes of chunks, merged until one is left (issue 18 §2)."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from compaction_fixtures import Prep, assistant, tool_result, user

from picontext.compaction import prompts
from picontext.compaction.completion import CompletionRequest, ScriptedCompletion, assistant_reply
from picontext.compaction.summarize import CHUNK_CONCURRENCY, SummaryProgress, summarize_preparation
from picontext.errors import SummaryTruncated

WINDOW = 4000


def _text(req: CompletionRequest) -> str:
    return req.messages[0]["content"][0]["text"]


def _size(req: CompletionRequest) -> int:
    """What the request asks of the window, counted as the summarizer's chunking counts (chars/4)."""
    return (len(req.system_prompt) + len(_text(req))) // 4 + req.max_tokens


def _steps(count: int, words: int = 300) -> list[dict]:
    msgs = []
    for i in range(count):
        msgs += [user(f"step {i} " + "word " * words), assistant(f"done {i}")]
    return msgs


def _notes_server(window: int = WINDOW):
    """Chunk requests answer `note k`; merges answer `merge(<the notes they got>)`; any request
    over the window fails the test."""

    def reply(req: CompletionRequest) -> str:
        text = _text(req)
        assert _size(req) <= window, f"a request of {_size(req)} tokens for a {window}-token window"
        part = re.search(r"is part (\d+) of (\d+) of one long session", text)
        if part:
            return f"note {part.group(1)}"
        notes = re.findall(r'<part-note index="\d+">\n(.*?)\n</part-note>', text, re.DOTALL)
        return "merge(" + ", ".join(notes) + ")" if notes else "one request"

    return reply


async def test_a_span_over_the_window_is_summarized_as_merged_chunk_notes() -> None:
    model = ScriptedCompletion(default=_notes_server(), context_window=WINDOW, max_output_tokens=500)
    result = await summarize_preparation(Prep(_steps(40)), model, reserve_tokens=1000, verify=False)
    chunks = [r for r in model.requests if "is part " in _text(r)]
    count = len(chunks)
    assert count > 3
    # every chunk names its place; together they hold every step once, oldest first
    assert [int(re.search(r"is part (\d+) of", _text(r)).group(1)) for r in chunks] == list(range(1, count + 1))
    conversation = "".join(_text(r).split("</conversation>")[0] for r in chunks)
    positions = [conversation.index(f"step {i} ") for i in range(40)]
    assert positions == sorted(positions)
    # the last request merges everything: every note appears in the result exactly once, in order
    assert re.findall(r"note (\d+)", result.summary) == [str(k) for k in range(1, count + 1)]
    assert _text(model.requests[-1]).endswith(prompts.MERGE_PROMPT)
    assert result.calls == len(model.requests) and all(_size(r) <= WINDOW for r in model.requests)


async def test_only_the_last_merge_carries_the_previous_summary_and_the_focus_reaches_every_request() -> None:
    model = ScriptedCompletion(default=_notes_server(), context_window=WINDOW, max_output_tokens=500)
    prep = Prep(_steps(40), previous_summary="## Goal\nOLD NOTE")
    await summarize_preparation(prep, model, reserve_tokens=1000, instructions="the parser", verify=False)
    with_previous = [r for r in model.requests if "OLD NOTE" in _text(r)]
    assert with_previous == [model.requests[-1]]
    assert prompts.MERGE_UPDATE_PROMPT in _text(model.requests[-1])
    assert all(_text(r).endswith("Additional focus: the parser") for r in model.requests)


async def test_merges_go_level_by_level_when_the_notes_do_not_fit_one_request() -> None:
    def long_notes(req: CompletionRequest) -> str:
        assert _size(req) <= WINDOW
        text = _text(req)
        tag = re.search(r"is part (\d+) of", text)
        return ("chunk " + tag.group(1) if tag else "merged") + " " + "fact " * 180  # ~230 tokens each

    model = ScriptedCompletion(default=long_notes, context_window=WINDOW, max_output_tokens=500)
    result = await summarize_preparation(Prep(_steps(120)), model, reserve_tokens=1000, verify=False)
    merges = [r for r in model.requests if "<part-note" in _text(r)]
    chunks = len(model.requests) - len(merges)
    assert chunks > 10 and len(merges) >= 3  # more notes than one merge holds: a level in between
    assert all(_size(r) <= WINDOW for r in model.requests)
    assert result.summary.startswith("merged")


async def test_a_chunk_the_server_finds_too_large_is_split_and_its_halves_folded() -> None:
    """chars/4 undercounts numbers (x1.6 here): the server refuses some chunks; each is split in
    two, the second half carrying the first's summary, and nothing is skipped."""
    msgs = []
    for i in range(40):
        msgs += [user(f"step {i} " + "4821 9075 " * 150), assistant(f"done {i}")]
    sent: list[str] = []

    def dense(req: CompletionRequest) -> dict | str:
        text = _text(req)
        real = int(len(prompts.SYSTEM_PROMPT + text) / 4 * 1.6) + req.max_tokens
        if real > WINDOW:
            return assistant_reply(None, stop_reason="error", error=(
                f"This model's maximum context length is {WINDOW} tokens. However, you requested {real} tokens."))
        sent.append(text)
        return _notes_server()(req) if "<part-note" in text or "is part " in text else "half summary"

    model = ScriptedCompletion(default=dense, context_window=WINDOW, max_output_tokens=500)
    result = await summarize_preparation(Prep(msgs), model, reserve_tokens=1000, verify=False)
    assert len(model.requests) > len(sent)  # at least one request was refused
    halves = [t for t in sent if "<previous-summary>\nhalf summary\n</previous-summary>" in t]
    assert halves  # the second half of a refused chunk carries the first half's summary
    assert all(f"step {i} " in "".join(sent) for i in range(40))
    assert result.calls == len(model.requests) and "merge(" in result.summary


async def test_chunks_are_sent_several_at_once_and_one_at_a_time_on_a_serial_server() -> None:
    for serial, most in [(False, CHUNK_CONCURRENCY), (True, 1)]:
        in_flight = peak = 0

        async def slow(req: CompletionRequest) -> str:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            for _ in range(5):
                await asyncio.sleep(0)  # other requests get their chance to start
            in_flight -= 1
            return _notes_server()(req)

        model = ScriptedCompletion(default=slow, context_window=WINDOW, max_output_tokens=500, one_at_a_time=serial)
        await summarize_preparation(Prep(_steps(40)), model, reserve_tokens=1000, verify=False)
        assert peak == most, (serial, peak)


async def test_progress_is_reported_chunk_by_chunk_then_merge_by_merge() -> None:
    seen: list[SummaryProgress] = []

    async def record(progress: SummaryProgress) -> None:
        seen.append(progress)

    model = ScriptedCompletion(default=_notes_server(), context_window=WINDOW, max_output_tokens=500)
    await summarize_preparation(Prep(_steps(40)), model, reserve_tokens=1000, verify=False, on_progress=record)
    chunks = [p for p in seen if p.stage == "chunks"]
    count = chunks[0].total
    assert [p.done for p in chunks] == list(range(count + 1)) and all(p.total == count for p in chunks)
    assert [(p.stage, p.done, p.total) for p in seen[count + 1:]][-2:] == [("merge", 0, 1), ("merge", 1, 1)]
    assert all(p.part == "history" for p in seen)
    assert [p.elapsed for p in seen] == sorted(p.elapsed for p in seen)
    # a span that fits is one request and reports nothing
    seen.clear()
    await summarize_preparation(Prep(_steps(2)), ScriptedCompletion(["S"], context_window=WINDOW), reserve_tokens=1000,
                                verify=False, on_progress=record)
    assert seen == []


async def test_an_over_window_turn_prefix_ends_with_a_turn_prefix_note() -> None:
    model = ScriptedCompletion(default=_notes_server(), context_window=WINDOW, max_output_tokens=500)
    prefix = [user("turn " + "word " * 4000), assistant("", [("read", {"path": "a.py"})]), tool_result("x")]
    result = await summarize_preparation(Prep(_steps(1), prefix, True), model, reserve_tokens=1000, verify=False)
    finals = [r for r in model.requests if prompts.MERGE_TURN_PREFIX_PROMPT in _text(r)]
    assert len(finals) == 1
    history, _, turn = result.summary.partition(prompts.SPLIT_TURN_SEPARATOR)
    assert history == "one request"  # the history fits: Pi's request
    assert turn.startswith("merge(note 1, note 2") and all(_size(r) <= WINDOW for r in model.requests)


async def test_one_message_larger_than_the_window_is_cut_into_chunks() -> None:
    model = ScriptedCompletion(default=_notes_server(), context_window=WINDOW, max_output_tokens=500)
    paste = "".join(f"line {i:05d} of a pasted log\n" for i in range(4000))  # ~27k tokens in one message
    result = await summarize_preparation(Prep([user(paste), assistant("ok")]), model, reserve_tokens=1000,
                                         verify=False)
    chunks = [r for r in model.requests if "is part " in _text(r)]
    assert len(chunks) > 6 and all(_size(r) <= WINDOW for r in model.requests)
    assert "".join(_text(r).split("<conversation>\n")[1].split("\n</conversation>")[0] for r in chunks).count(
        "of a pasted log") == 4000
    assert result.summary.startswith("merge(")


@pytest.mark.parametrize("window", [16_000, 32_000])
async def test_a_large_output_budget_is_capped_so_two_notes_and_the_answer_fit_a_merge(window: int) -> None:
    """reserveTokens 16384 asks for 13107 output tokens: in a 16k window that leaves no room; the
    chunk and merge requests write at most a quarter of the window instead."""
    model = ScriptedCompletion(default=_notes_server(window), context_window=window)
    await summarize_preparation(Prep(_steps(200)), model, reserve_tokens=16384, verify=False)
    assert {r.max_tokens for r in model.requests} == {min(13107, window // 4)}


async def test_text_of_characters_outside_the_bmp_is_cut_by_its_utf16_length() -> None:
    """chars/4 counts UTF-16 units (an emoji is two): pieces of such text are cut shorter."""
    sizes: list[int] = []

    def units(req: CompletionRequest) -> str:
        text = _text(req)
        sizes.append(len((prompts.SYSTEM_PROMPT + text).encode("utf-16-le")) // 2 // 4 + req.max_tokens)
        return _notes_server()(req)

    paste = "🙂" * 40_000  # 40,000 code points, 80,000 UTF-16 units
    model = ScriptedCompletion(default=units, context_window=WINDOW, max_output_tokens=500)
    await summarize_preparation(Prep([user(paste), assistant("ok")]), model, reserve_tokens=1000, verify=False)
    assert len(sizes) > 5 and max(sizes) <= WINDOW


async def test_a_chunk_note_cut_at_the_output_cap_is_kept_and_the_last_merge_must_end() -> None:
    """A small model writes to its cap: a chunk note cut short is still material for the merge;
    the summary itself (the last merge) cut short fails the compaction as before."""

    def rambling(final_ok: bool):
        def reply(req: CompletionRequest) -> dict:
            text = _text(req)
            if "is part " in text:
                return assistant_reply("note that never ends", stop_reason="length")
            if prompts.MERGE_PROMPT in text:
                return assistant_reply("MERGED", stop_reason="stop" if final_ok else "length")
            return assistant_reply("intermediate merge", stop_reason="length")
        return reply

    model = ScriptedCompletion(default=rambling(True), context_window=WINDOW, max_output_tokens=500)
    result = await summarize_preparation(Prep(_steps(40)), model, reserve_tokens=1000, verify=False)
    assert result.summary == "MERGED"
    assert "note that never ends" in _text(model.requests[-1])
    model = ScriptedCompletion(default=rambling(False), context_window=WINDOW, max_output_tokens=500)
    with pytest.raises(SummaryTruncated):
        await summarize_preparation(Prep(_steps(40)), model, reserve_tokens=1000, verify=False)
