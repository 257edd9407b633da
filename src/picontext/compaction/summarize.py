"""Writing the compaction summary: requests, budgets, chunking, failure checks, the ledger.

Mirrors Pi `compact()` / `generateSummary()` / `generateTurnPrefixSummary()` (compaction.ts,
spec 02 §7.3-§7.7) with these deliberate differences (docs/divergences.md):

* split-turn history and turn-prefix summaries are requested concurrently (Pi: one after the
  other) and merged in the same order, except on a server that takes one request at a time
  (`Completion.one_at_a_time`: the model's `compat.serialRequests`), where they run one after
  the other;
* `aborted` and empty replies are typed failures (Pi returns their text);
* `firstKeptEntryId` is checked before any request (Pi: after spending tokens);
* a span too large for the summarizing model's window (Pi sends it anyway and fails) is
  summarized hierarchically (issue 18 §2): cut into chunks that fit the window, one note per
  chunk (up to `CHUNK_CONCURRENCY` requests at once, one at a time on a serial server), then
  the notes merged, several per request, until one merge holds them all together with the
  previous summary. The output budget of these requests is at most a quarter of the window, so
  two notes and the answer always fit one merge. Chunks are cut from per-message sizes and
  serialized only when sent, so the span is never held as text twice. `on_progress` hears of
  every finished chunk and merge;
* a request the server still reports as overflowing its window is split in halves and the
  halves folded (the second carries the first's summary), down to `MIN_CHUNK_TOKENS` (Pi fails
  the compaction); a chunk note or an intermediate merge cut at the output cap is kept as
  written (only the next merge reads it); the last merge must end normally;
* the verified-facts ledger (`verify.py`) is appended after the model's text.

Any failure raises a `SummarizationFailed` subclass; the caller has written nothing yet.

Example::

    result = await summarize_preparation(prep, completion, reserve_tokens=16384)
    manager.append_compaction(result.summary, result.first_kept_entry_id, result.tokens_before,
                              result.details, usage=result.usage)
"""

from __future__ import annotations

import asyncio
import inspect
import math
import time
from array import array
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from picontext.ai.overflow import is_context_overflow
from picontext.compaction import prompts
from picontext.compaction.completion import Completion, CompletionOptions
from picontext.compaction.file_ops import (
    FileOperations,
    compute_file_lists,
    extract_file_ops,
    format_file_operations,
)
from picontext.compaction.prompt_cache import CachedPrefix
from picontext.compaction.serialize import serialize_conversation, utf16_len
from picontext.compaction.verify import VerifiedFacts, extract_facts, parse_ledger, strip_machine_blocks, verify_summary
from picontext.errors import (
    CompactionError,
    SummarizationFailed,
    SummaryAborted,
    SummaryEmpty,
    SummaryError,
    SummaryOverflow,
    SummaryToolCall,
    SummaryTruncated,
)
from picontext.session.convert import convert_to_llm

__all__ = [
    "CHUNK_CONCURRENCY",
    "ProgressCallback",
    "SummaryProgress",
    "SummaryResult",
    "add_usage",
    "chunk_conversation",
    "history_max_tokens",
    "input_budget",
    "previous_facts_of",
    "reply_text",
    "summarize_preparation",
    "turn_prefix_max_tokens",
]

CHARS_PER_TOKEN = 4
INPUT_SAFETY = 0.8
"""Share of the computed room actually filled: chars/4 undercounts code and non-English text."""
MIN_CHUNK_TOKENS = 256
"""Below this a chunk that still overflows is not split again: the overhead (prompt, previous
summary, output budget) is what does not fit, and smaller chunks would not help."""
CHUNK_CONCURRENCY = 4
"""Requests of one summary in flight at once (chunks and merges; 1 on a serial server)."""
NOTE_TAG_TOKENS = 8
"""What the `<part-note>` tags around each note add to a merge request."""


@dataclass(frozen=True, slots=True)
class SummaryProgress:
    """A step of a summary written in several requests (a span over the summarizer's window).

    `part` is "history" or "turnPrefix"; `stage` "chunks" (one note per chunk) or "merge" (notes
    merged, one level at a time); `done` of `total` requests of that stage have finished;
    `elapsed` is seconds since the summary began. The first report of a stage has `done` 0.
    """

    part: Literal["history", "turnPrefix"]
    stage: Literal["chunks", "merge"]
    done: int
    total: int
    elapsed: float


ProgressCallback = Callable[[SummaryProgress], "Awaitable[None] | None"]


@dataclass(frozen=True, slots=True)
class SummaryResult:
    """What `append_compaction` needs; `details` holds readFiles, modifiedFiles, verifiedFacts."""

    summary: str
    first_kept_entry_id: str
    tokens_before: int
    usage: dict[str, Any] | None
    details: dict[str, Any]
    calls: int
    missing_facts: VerifiedFacts


def _cap(budget: int, model_max: int) -> int:
    return min(budget, model_max) if model_max > 0 else budget


def history_max_tokens(reserve_tokens: int, model_max_tokens: int) -> int:
    """`min(floor(0.8 × reserve), model max)`; a model max of 0 means uncapped (spec 02 §7.4)."""
    return _cap(math.floor(0.8 * reserve_tokens), model_max_tokens)


def turn_prefix_max_tokens(reserve_tokens: int, model_max_tokens: int) -> int:
    """`min(floor(0.5 × reserve), model max)`."""
    return _cap(math.floor(0.5 * reserve_tokens), model_max_tokens)


def add_usage(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    """Field-wise sum; `cacheWrite1h` and `reasoning` only when either side has them (Pi)."""
    if a is None or b is None:
        return a or b
    total = {k: (a.get(k) or 0) + (b.get(k) or 0) for k in ("input", "output", "cacheRead", "cacheWrite",
                                                               "totalTokens")}
    for key in ("cacheWrite1h", "reasoning"):
        if key in a or key in b:
            total[key] = (a.get(key) or 0) + (b.get(key) or 0)
    cost_a, cost_b = a.get("cost") or {}, b.get("cost") or {}
    total["cost"] = {k: (cost_a.get(k) or 0) + (cost_b.get(k) or 0)
                     for k in ("input", "output", "cacheRead", "cacheWrite", "total")}
    return total


def reply_text(reply: dict[str, Any], label: str) -> str:
    """The summary text of a reply, or the typed failure (spec 02 §7.6, plus aborted and empty)."""
    stop = reply.get("stopReason")
    if stop == "error":
        raise SummaryError(f"{label} failed: {reply.get('errorMessage') or 'Unknown error'}")
    if stop == "length":
        raise SummaryTruncated(f"{label} failed: generation hit the token cap and the summary is incomplete")
    if stop == "aborted":
        raise SummaryAborted(f"{label} was aborted")
    raw_content = reply.get("content")
    content: list[Any] = raw_content if isinstance(raw_content, list) else []
    if any(isinstance(b, dict) and b.get("type") == "toolCall" for b in content):
        raise SummaryToolCall(f"{label} attempted to call a tool")
    text = "\n".join(b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"
                     and isinstance(b.get("text"), str))
    if not text.strip():
        raise SummaryEmpty(f"{label} failed: the model returned an empty summary")
    return text


def _tokens(text: str) -> int:
    return math.ceil(utf16_len(text) / CHARS_PER_TOKEN)


def input_budget(completion: Completion, max_tokens: int, overhead_text: str) -> int | None:
    """Tokens of conversation text one request may carry, or None when the window is unknown."""
    window = int(getattr(completion, "context_window", 0) or 0)
    if window <= 0:
        return None
    room = window - max_tokens - _tokens(prompts.SYSTEM_PROMPT) - _tokens(overhead_text)
    return max(256, math.floor(room * INPUT_SAFETY))


Segment = tuple[int, int, int]
"""(part index, start, end): a slice of one serialized part, in code points."""
Chunk = tuple[int, int, int, int]
"""(first part, start in it, last part, end in it), in code points: a run of consecutive parts,
those between its ends whole, empty parts skipped. Four numbers a chunk rather than a segment a
message: the plan of a span of 8,000 messages is a few hundred tuples, not 8,000."""


def _plan(sizes: Iterable[tuple[int, int]], budget_tokens: int) -> list[Chunk]:
    """Chunks of at most `budget_tokens` over parts of the given (code points, UTF-16) sizes,
    oldest first; a part larger than a chunk is cut into pieces. Only sizes: no text."""
    max_chars = budget_tokens * CHARS_PER_TOKEN
    chunks: list[Chunk] = []
    first: tuple[int, int] | None = None
    last = (-1, 0)
    size = 0
    for index, (points, units) in enumerate(sizes):
        if not points:
            continue
        # a piece of `step` code points holds at most `max_chars` UTF-16 units (on average)
        step = max_chars if units == points else max(1, max_chars * points // units)
        starts = range(0, points, step) if units > max_chars else range(1)
        for start in starts:
            end = min(start + step, points) if units > max_chars else points
            length = (end - start if units == points else math.ceil((end - start) * units / points)) + 2
            # (a second piece of one part never fits after the first; a Chunk could not say so)
            if first is not None and (size + length > max_chars or last[0] == index):
                chunks.append((*first, *last))
                first, size = None, 0
            if first is None:
                first = (index, start)
            last = (index, end)
            size += length
    if first is not None:
        chunks.append((*first, *last))
    return chunks


def _segments(chunk: Chunk, points: Callable[[int], int]) -> Iterator[Segment]:
    """The segments of `chunk`; `points(i)` is the size of part i in code points."""
    first, start, last, end = chunk
    for index in range(first, last + 1):
        size = points(index)
        if size:
            yield index, start if index == first else 0, end if index == last else size


def _span_tokens(sizes: Iterable[tuple[int, int]]) -> int:
    """chars/4 of the parts joined by blank lines (without joining them)."""
    count = total = 0
    for points, units in sizes:
        count += 1 if points else 0
        total += units
    return math.ceil((total + 2 * max(count - 1, 0)) / CHARS_PER_TOKEN)


def _sizes(parts: Sequence[str]) -> list[tuple[int, int]]:
    return [(len(part), utf16_len(part)) for part in parts]


def chunk_conversation(parts: Sequence[str], budget_tokens: int | None) -> list[str]:
    """Serialized message parts grouped into chunks of at most `budget_tokens`, oldest first.

    With everything fitting (or no budget) this is one chunk equal to the plain serialization.
    A single part larger than the budget is cut into pieces.
    """
    return ["\n\n".join(group) for group in _chunk_parts(parts, budget_tokens)]


def _chunk_parts(parts: Sequence[str], budget_tokens: int | None) -> list[Sequence[str]]:
    """`parts` itself when it fits, else one `_Pieces` per chunk (its text made when read)."""
    if budget_tokens is None:
        return [parts]
    sizes = _sizes(parts)
    if _span_tokens(sizes) <= budget_tokens:
        return [parts]
    return [_Pieces(parts.__getitem__, chunk, lambda i: sizes[i][0]) for chunk in _plan(sizes, budget_tokens)]


def _piece(part: str, start: int, end: int) -> str:
    return part if start == 0 and end == len(part) else part[start:end]


class _Pieces(Sequence[str]):
    """The text parts of one request: the segments of `chunk` over parts of `points(i)` code
    points, each made from its source when read (`part(i)`, sliced). A request in flight holds
    its prompt and its body; the parts it was joined from are not held beside them (with four
    chunk requests at once they were a third of the compaction's own peak). Four numbers a
    chunk; its segments are listed only for a chunk refused as too large, cut again from the
    same sources."""

    __slots__ = ("_chunk", "_part", "_points", "_segments")

    def __init__(self, part: Callable[[int], str], chunk: Chunk, points: Callable[[int], int]) -> None:
        self._part = part
        self._chunk = chunk
        self._points = points
        self._segments: list[Segment] | None = None

    def _listed(self) -> list[Segment]:
        if self._segments is None:
            self._segments = list(_segments(self._chunk, self._points))
        return self._segments

    def __len__(self) -> int:
        return len(self._listed())

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        part, start, end = self._listed()[index]
        return _piece(self._part(part), start, end)

    def __iter__(self) -> Iterator[str]:
        part = self._part
        for index, start, end in _segments(self._chunk, self._points):
            yield _piece(part(index), start, end)


async def _fold(parts: Sequence[str], budget: int | None, summary: str | None,
                ask: Callable[[str, str | None], Awaitable[str]]) -> str | None:
    """`summary` folded over the chunks of `parts`: each chunk's request carries the summary so
    far. A chunk the server reports as too large for its window is re-chunked at half its
    estimated size (each half again if need be), so the fold goes on where the estimate was short."""
    for chunk in _chunk_parts(parts, budget):
        try:
            summary = await ask("\n\n".join(chunk), summary)  # the text is the callee's alone
        except SummaryOverflow:
            smaller = _span_tokens(_sizes(chunk)) // 2
            if smaller < MIN_CHUNK_TOKENS:
                raise
            summary = await _fold(chunk, smaller, summary, ask)
    return summary


class _Span:
    """The messages of a span as summarizer text, sized once and serialized again only chunk by
    chunk, so a span of millions of tokens is never held as text next to the session."""

    def __init__(self, messages: Sequence[Any]) -> None:
        self.messages = convert_to_llm(messages)
        # Two machine-word arrays, not a tuple of two int objects per message (~110 bytes each).
        self.points = array("q")
        self.units = array("q")
        for index in range(len(self.messages)):
            text = self._serialize(index)
            self.points.append(len(text))
            self.units.append(utf16_len(text))
        self._cached: tuple[int, str] = (-1, "")

    def _serialize(self, index: int) -> str:
        return serialize_conversation([self.messages[index]])

    def part(self, index: int) -> str:
        """One message's text; the last one is kept, as consecutive pieces of a large part come in a row."""
        if self._cached[0] != index:
            self._cached = (index, self._serialize(index))
        return self._cached[1]

    def sizes(self) -> Iterator[tuple[int, int]]:
        """(code points, UTF-16 units) of each message's text."""
        return zip(self.points, self.units, strict=True)

    def tokens(self) -> int:
        return _span_tokens(self.sizes())

    def parts(self) -> Sequence[str]:
        """The non-empty parts, each serialized when read (called for a span that fits one request)."""
        count = len(self.points)
        return _Pieces(self.part, (0, 0, count - 1, self.points[-1] if count else 0), self.points.__getitem__)

    def pieces(self, chunk: Chunk) -> Sequence[str]:
        """The segments of `chunk`, each serialized when read."""
        return _Pieces(self.part, chunk, self.points.__getitem__)


async def _first_error(*jobs: Coroutine[Any, Any, Any]) -> list[Any]:
    """Run `jobs` together; the first failure cancels the others and is raised as itself."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(job) for job in jobs]
    except ExceptionGroup as group_error:
        raise group_error.exceptions[0] from None
    return [task.result() for task in tasks]


@dataclass(slots=True)
class _Calls:
    completion: Completion
    options: CompletionOptions
    usage: dict[str, Any] | None = None
    count: int = 0
    concurrency: int = 1
    progress: ProgressCallback | None = None
    started: float = field(default_factory=time.monotonic)
    _slots: asyncio.Semaphore | None = None

    @property
    def serial(self) -> bool:
        return bool(getattr(self.completion, "one_at_a_time", False))

    async def ask(self, user_text: str, max_tokens: int, label: str, *, material: bool = False) -> str:
        """One request; its text or the typed failure. `material` (a chunk note or an intermediate
        merge, only read by the next merge): a reply cut at the output cap is kept as written."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.concurrency)
        messages = [{"role": "user", "content": [{"type": "text", "text": user_text}], "timestamp": 0}]
        async with self._slots:
            reply = await self.completion(prompts.SYSTEM_PROMPT, messages, max_tokens, self.options)
        if reply.get("stopReason") == "error" and is_context_overflow(reply):
            self.count += 1
            raise SummaryOverflow(f"{label} failed: {reply.get('errorMessage') or 'context overflow'}")
        if material and reply.get("stopReason") == "length":
            reply = {**reply, "stopReason": "stop"}  # a note cut short still carries what it has
        return self._text(reply, label)

    async def ask_cached(self, cached: CachedPrefix, end: int, instruction: str, max_tokens: int,
                         label: str) -> str:
        """One request over the session's own prefix `messages[:end]` plus `instruction`."""
        model, context, options = cached.request_for(end, instruction, max_tokens, self.options.signal)
        reply = await self.completion.send(model, context, options)  # type: ignore[attr-defined]
        return self._text(reply, label)

    def _text(self, reply: dict[str, Any], label: str) -> str:
        self.count += 1
        self.usage = add_usage(self.usage, reply.get("usage") if isinstance(reply.get("usage"), dict) else None)
        return strip_machine_blocks(reply_text(reply, label))

    async def report(self, part: Literal["history", "turnPrefix"], stage: Literal["chunks", "merge"], done: int,
                     total: int) -> None:
        if self.progress is None:
            return
        outcome = self.progress(SummaryProgress(part, stage, done, total, time.monotonic() - self.started))
        if inspect.isawaitable(outcome):
            await outcome


@dataclass(frozen=True, slots=True)
class _Kind:
    """The requests of one part of the summary: the history (with the previous summary and the
    user's focus) or a split turn's prefix (neither, and its own note format)."""

    part: Literal["history", "turnPrefix"]
    previous: str | None
    instructions: str | None

    @property
    def label(self) -> str:
        return "Summarization" if self.part == "history" else "Turn prefix summarization"

    def whole(self, chunk: str, summary: str | None) -> str:
        """Pi's request for a span that fits (a later chunk of an overflow split carries the summary so far)."""
        if self.part == "turnPrefix":
            return (prompts.turn_prefix_request(chunk) if summary is None
                    else prompts.history_request(chunk, summary, None))
        return prompts.history_request(chunk, summary, self.instructions)

    def whole_overhead(self) -> str:
        if self.part == "turnPrefix":
            return prompts.turn_prefix_request("")
        return prompts.history_request("", self.previous or "x", self.instructions)

    def chunk(self, text: str, summary: str | None, index: int, count: int) -> str:
        if summary is not None:  # the second half of a chunk the server refused whole
            return prompts.history_request(text, summary, self.instructions)
        return prompts.chunk_request(text, index, count, self.instructions)

    def merge(self, notes: list[str], final: bool) -> str:
        previous = self.previous if final and self.part == "history" else None
        return prompts.merge_request(notes, previous, self.instructions,
                                     turn_prefix=final and self.part == "turnPrefix")


async def _span_summary(calls: _Calls, kind: _Kind, messages: Sequence[Any], max_tokens: int) -> str:
    """One part's summary: Pi's single request when the span fits the summarizer's window (chars/4,
    `INPUT_SAFETY`), else notes of chunks merged until one is left."""
    span = _Span(messages)
    budget = input_budget(calls.completion, max_tokens, kind.whole_overhead())
    if budget is not None and kind.previous:
        budget = max(MIN_CHUNK_TOKENS, budget - _tokens(kind.previous))
    if budget is None or span.tokens() <= budget:
        summary = await _fold(span.parts(), budget, kind.previous, lambda chunk, prior: calls.ask(
            kind.whole(chunk, prior), max_tokens, kind.label))
        assert summary is not None
        return summary
    window = int(getattr(calls.completion, "context_window", 0) or 0)
    capped = max(1, min(max_tokens, window // 4)) if max_tokens > 0 else window // 4
    chunk_budget = input_budget(calls.completion, capped, kind.chunk("", None, 999, 999))
    assert chunk_budget is not None
    notes = await _chunk_notes(calls, kind, span, _plan(span.sizes(), chunk_budget), capped)
    return await _merge_notes(calls, kind, notes, capped)


async def _pool(count: int, workers: int, job: Callable[[int], Awaitable[None]]) -> None:
    """`job(0..count-1)` in order, at most `workers` at a time: a job is started (and its chunk
    cut) only when a worker is free, so only the chunks in flight are held as text."""
    indices = iter(range(count))

    async def worker() -> None:
        for index in indices:  # shared: each worker takes the next index
            await job(index)

    await _first_error(*(worker() for _ in range(max(1, min(workers, count)))))


async def _chunk_notes(calls: _Calls, kind: _Kind, span: _Span, chunks: list[Chunk],
                       max_tokens: int) -> list[str]:
    count = len(chunks)
    notes: list[str] = [""] * count
    done = 0
    await calls.report(kind.part, "chunks", 0, count)

    async def note(index: int) -> None:
        nonlocal done

        def ask(text: str, summary: str | None) -> Awaitable[str]:
            # Not a coroutine of its own: one would hold `text` (the chunk) next to the prompt
            # made from it for as long as the request is in flight.
            return calls.ask(kind.chunk(text, summary, index + 1, count), max_tokens, kind.label, material=True)

        written = await _fold(span.pieces(chunks[index]), None, None, ask)
        assert written is not None
        notes[index] = written
        done += 1
        await calls.report(kind.part, "chunks", done, count)

    await _pool(count, calls.concurrency, note)
    return notes


def _note_groups(sizes: Sequence[int], budget: int) -> list[tuple[int, int]]:
    """Consecutive (start, end) runs of notes that fit `budget`, two notes at least in each, so
    every merge level at least halves their number."""
    groups: list[tuple[int, int]] = []
    start = total = 0
    for index, size in enumerate(sizes):
        if index - start >= 2 and total + size > budget:
            groups.append((start, index))
            start, total = index, 0
        total += size
    if len(sizes) - start == 1 and groups:  # a lone last note joins the group before it
        start = groups.pop()[0]
    groups.append((start, len(sizes)))
    return groups


async def _merge_notes(calls: _Calls, kind: _Kind, notes: list[str], max_tokens: int) -> str:
    """Merge levels until one request holds every note (and the previous summary): its answer is
    the part's summary. A merge the server refuses as too large is split in two."""
    final_budget = input_budget(calls.completion, max_tokens, kind.merge([], final=True))
    level_budget = input_budget(calls.completion, max_tokens, kind.merge([], final=False))
    assert final_budget is not None and level_budget is not None
    if kind.previous and kind.part == "history":
        final_budget -= _tokens(kind.previous)
    while True:
        sizes = [_tokens(note) + NOTE_TAG_TOKENS for note in notes]
        if sum(sizes) <= final_budget or len(notes) <= 2:
            await calls.report(kind.part, "merge", 0, 1)
            try:
                merged = await calls.ask(kind.merge(notes, final=True), max_tokens, kind.label)
            except SummaryOverflow:
                if len(notes) <= 2:
                    raise
                notes = [await _merge_group(calls, kind, notes[: len(notes) // 2], max_tokens),
                         await _merge_group(calls, kind, notes[len(notes) // 2:], max_tokens)]
                continue
            await calls.report(kind.part, "merge", 1, 1)
            return merged
        groups = _note_groups(sizes, level_budget)
        merged_notes: list[str] = [""] * len(groups)
        done = 0
        await calls.report(kind.part, "merge", 0, len(groups))

        async def merge(index: int, level: list[str] = notes, groups: list[tuple[int, int]] = groups,
                        out: list[str] = merged_notes) -> None:
            nonlocal done
            start, end = groups[index]
            out[index] = await _merge_group(calls, kind, level[start:end], max_tokens)
            done += 1
            await calls.report(kind.part, "merge", done, len(groups))

        await _pool(len(groups), calls.concurrency, merge)
        notes = merged_notes


async def _merge_group(calls: _Calls, kind: _Kind, notes: list[str], max_tokens: int) -> str:
    if len(notes) == 1:
        return notes[0]
    try:
        return await calls.ask(kind.merge(notes, final=False), max_tokens, kind.label, material=True)
    except SummaryOverflow:
        if len(notes) <= 2:
            raise
        half = len(notes) // 2
        return await _merge_group(calls, kind, [await _merge_group(calls, kind, notes[:half], max_tokens),
                                                await _merge_group(calls, kind, notes[half:], max_tokens)],
                                  max_tokens)


async def _plain_summary(calls: _Calls, prep: Any, previous: str | None, instructions: str | None,
                         history_budget: int, prefix_budget: int) -> str:
    """The summary text from Pi's requests: the serialized transcript under the summarizer's prompt."""
    to_summarize = list(_get(prep, "messages_to_summarize", []))
    prefix = list(_get(prep, "turn_prefix_messages", []))
    history_kind = _Kind("history", previous, instructions)
    if not (_get(prep, "is_split_turn") and prefix):
        return await _span_summary(calls, history_kind, to_summarize, history_budget)
    prefix_kind = _Kind("turnPrefix", None, None)
    fallback = strip_machine_blocks(previous) if previous else prompts.NO_PRIOR_HISTORY
    if calls.serial:  # Pi's order: history, then the prefix
        history = await _span_summary(calls, history_kind, to_summarize, history_budget) if to_summarize else fallback
        return history + prompts.SPLIT_TURN_SEPARATOR + await _span_summary(calls, prefix_kind, prefix, prefix_budget)
    # Pi: one after the other; the two are independent, so a turn waits for one summary, not two
    jobs = [_span_summary(calls, prefix_kind, prefix, prefix_budget)]
    if to_summarize:
        jobs.insert(0, _span_summary(calls, history_kind, to_summarize, history_budget))
    results = await _first_error(*jobs)
    history = results[0] if to_summarize else fallback
    return history + prompts.SPLIT_TURN_SEPARATOR + results[-1]


async def _cached_summary(calls: _Calls, cached: CachedPrefix, prep: Any, previous: str | None,
                         instructions: str | None, history_budget: int, prefix_budget: int) -> str:
    """The summary text from requests over the session's cached prefix (prompt_cache.py)."""
    to_summarize = bool(_get(prep, "messages_to_summarize"))
    history_text = prompts.cached_history_request(bool(previous), instructions)

    def history_ask() -> Coroutine[Any, Any, str]:
        return calls.ask_cached(cached, cached.history_end, history_text, history_budget, "Summarization")

    if cached.turn_end is None:
        return await history_ask()
    turn_end = cached.turn_end

    def prefix_ask() -> Coroutine[Any, Any, str]:
        return calls.ask_cached(cached, turn_end, prompts.cached_turn_prefix_request(), prefix_budget,
                                "Turn prefix summarization")

    fallback = strip_machine_blocks(previous) if previous else prompts.NO_PRIOR_HISTORY
    if calls.serial:  # a server that cancels a stream when another comes
        history = await history_ask() if to_summarize else fallback
        return history + prompts.SPLIT_TURN_SEPARATOR + await prefix_ask()
    results = await _first_error(*([history_ask()] if to_summarize else []), prefix_ask())
    history = results[0] if to_summarize else fallback
    return history + prompts.SPLIT_TURN_SEPARATOR + results[-1]


def _get(prep: Any, name: str, default: Any = None) -> Any:
    return getattr(prep, name, default)


def preparation_file_lists(prep: Any) -> tuple[list[str], list[str]]:
    """(readFiles, modifiedFiles) of a preparation: its `file_ops` (or ready-made lists)."""
    ops = _get(prep, "file_ops")
    if isinstance(ops, FileOperations):
        return compute_file_lists(ops)
    read, modified = _get(prep, "read_files"), _get(prep, "modified_files")
    if read is not None or modified is not None:
        return list(read or []), list(modified or [])
    ops = FileOperations()
    extract_file_ops(_get(prep, "messages_to_summarize", []), ops)
    extract_file_ops(_get(prep, "turn_prefix_messages", []), ops)
    return compute_file_lists(ops)


def previous_facts_of(prep: Any, previous: str | None) -> VerifiedFacts:
    """Facts of the previous compaction: its `details.verifiedFacts`, else its summary's ledger."""
    entry = _get(prep, "previous_compaction")
    details = entry.get("details") if isinstance(entry, dict) else None
    if isinstance(details, dict) and isinstance(details.get("verifiedFacts"), dict):
        return VerifiedFacts.from_json(details["verifiedFacts"])
    return parse_ledger(previous)


async def summarize_preparation(
    prep: Any,
    completion: Completion,
    *,
    reserve_tokens: int,
    instructions: str | None = None,
    thinking_level: str | None = None,
    signal: Any = None,
    previous_facts: VerifiedFacts | None = None,
    verify: bool = True,
    prompt_cache: CachedPrefix | str | None = None,
    on_progress: ProgressCallback | None = None,
) -> SummaryResult:
    """Write the summary of a `CompactionPreparation` (Pi `compact`); raises on any failure.

    `prep` needs `first_kept_entry_id`, `messages_to_summarize`, `turn_prefix_messages`,
    `is_split_turn`, `tokens_before`, `previous_summary` and `file_ops` (or `read_files` and
    `modified_files`). `previous_facts` are the verified facts of the previous compaction
    (`details.verifiedFacts`); without them the previous summary's ledger is parsed.

    `prompt_cache` (`compaction.reusePromptCache`, ours): a `CachedPrefix` sends the requests
    over the session's own cached prefix (`completion` must then have `send`, as
    `StreamCompletion` has); if they fail for any reason but an abort, the usual requests are
    sent instead. A string is the reason the prefix could not be used. Either way the outcome is
    recorded in `details.promptCache`; with None (the setting off) nothing changes.

    `on_progress` (sync or async) hears of each finished request of a summary written in
    several (a span over the summarizer's window): `SummaryProgress`.
    """
    first_kept = _get(prep, "first_kept_entry_id")
    if not first_kept:
        raise CompactionError("First kept entry has no id: nothing to compact")
    to_summarize = list(_get(prep, "messages_to_summarize", []))
    prefix = list(_get(prep, "turn_prefix_messages", []))
    previous = _get(prep, "previous_summary")
    model_max = int(getattr(completion, "max_output_tokens", 0) or 0)
    reasoning = thinking_level if getattr(completion, "reasoning", False) and thinking_level not in (
        None, "", "off") else None
    calls = _Calls(completion, CompletionOptions(reasoning=reasoning, signal=signal), progress=on_progress)
    calls.concurrency = 1 if calls.serial else CHUNK_CONCURRENCY
    history_budget = history_max_tokens(reserve_tokens, model_max)
    prefix_budget = turn_prefix_max_tokens(reserve_tokens, model_max)

    cache_note: dict[str, Any] | None = None
    text: str | None = None
    if isinstance(prompt_cache, str):
        cache_note = {"reused": False, "reason": prompt_cache}
    elif prompt_cache is not None and not hasattr(completion, "send"):
        cache_note = {"reused": False, "reason": "the summarizer is not a provider model"}
    elif prompt_cache is not None:
        try:
            text = await _cached_summary(calls, prompt_cache, prep, previous, instructions, history_budget,
                                         prefix_budget)
            cache_note = {"reused": True, "prefixMessages": prompt_cache.history_end}
            if prompt_cache.turn_end is not None:
                cache_note["turnPrefixMessages"] = prompt_cache.turn_end
        except SummaryAborted:
            raise
        except SummarizationFailed as exc:
            cache_note = {"reused": False, "reason": f"the request over the cached prefix failed ({exc}); "
                                                     "the usual request was sent"}

    if text is None:
        text = await _plain_summary(calls, prep, previous, instructions, history_budget, prefix_budget)

    read_files, modified_files = preparation_file_lists(prep)
    seed = previous_facts if previous_facts is not None else previous_facts_of(prep, previous)
    facts = extract_facts([*to_summarize, *prefix], seed)
    facts.modified_files = list(modified_files)
    missing = VerifiedFacts()
    if verify:
        # One character per token of the summary's budget: even text where every character is a
        # token (digits, a hex dump) then adds no more than the summary the model could write.
        text, missing = verify_summary(text, facts, max_request_chars=history_budget)
    details: dict[str, Any] = {"readFiles": read_files, "modifiedFiles": modified_files}
    if verify:
        details["verifiedFacts"] = facts.to_json()
    if cache_note is not None:
        details["promptCache"] = cache_note
    summary = text + format_file_operations(read_files, modified_files)
    return SummaryResult(summary, first_kept, int(_get(prep, "tokens_before", 0) or 0), calls.usage, details,
                         calls.count, missing)
