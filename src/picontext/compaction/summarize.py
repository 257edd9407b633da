"""Writing the compaction summary: requests, budgets, chunking, failure checks, the ledger.

Mirrors Pi `compact()` / `generateSummary()` / `generateTurnPrefixSummary()` (compaction.ts,
spec 02 §7.3-§7.7) with these deliberate differences (docs/divergences.md):

* split-turn history and turn-prefix summaries are requested concurrently (Pi: one after the
  other) and merged in the same order, except on a server that takes one request at a time
  (`Completion.one_at_a_time`, a server on this machine), where they run one after the other;
* `aborted` and empty replies are typed failures (Pi returns their text);
* `firstKeptEntryId` is checked before any request (Pi: after spending tokens);
* a span too large for the summarizing model's window is summarized in chunks, oldest first,
  each result fed forward as the previous summary (issue 3 §5c); a chunk whose request the
  server still reports as overflowing its window is split in halves and retried, down to
  `MIN_CHUNK_TOKENS` (Pi fails the compaction);
* the verified-facts ledger (`verify.py`) is appended after the model's text.

Any failure raises a `SummarizationFailed` subclass; the caller has written nothing yet.

Example::

    result = await summarize_preparation(prep, completion, reserve_tokens=16384)
    manager.append_compaction(result.summary, result.first_kept_entry_id, result.tokens_before,
                              result.details, usage=result.usage)
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

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
    "SummaryResult",
    "add_usage",
    "chunk_conversation",
    "history_max_tokens",
    "input_budget",
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


def _split_text(text: str, max_chars: int) -> list[str]:
    return [text[i: i + max_chars] for i in range(0, len(text), max_chars)] or [""]


def chunk_conversation(parts: Sequence[str], budget_tokens: int | None) -> list[str]:
    """Serialized message parts grouped into chunks of at most `budget_tokens`, oldest first.

    With everything fitting (or no budget) this is one chunk equal to the plain serialization.
    A single part larger than the budget is cut into pieces.
    """
    return ["\n\n".join(group) for group in _chunk_parts(parts, budget_tokens)]


def _chunk_parts(parts: Sequence[str], budget_tokens: int | None) -> list[list[str]]:
    joined = "\n\n".join(parts)
    if budget_tokens is None or _tokens(joined) <= budget_tokens:
        return [list(parts)]
    max_chars = budget_tokens * CHARS_PER_TOKEN
    chunks: list[list[str]] = []
    current: list[str] = []
    size = 0
    for part in parts:
        pieces = _split_text(part, max_chars) if utf16_len(part) > max_chars else [part]
        for piece in pieces:
            length = utf16_len(piece) + 2
            if current and size + length > max_chars:
                chunks.append(current)
                current, size = [], 0
            current.append(piece)
            size += length
    if current:
        chunks.append(current)
    return chunks


async def _fold(parts: Sequence[str], budget: int | None, summary: str | None,
                ask: Callable[[str, str | None], Awaitable[str]]) -> str | None:
    """`summary` folded over the chunks of `parts`: each chunk's request carries the summary so
    far. A chunk the server reports as too large for its window is re-chunked at half its
    estimated size (each half again if need be), so the fold goes on where the estimate was short."""
    for chunk in _chunk_parts(parts, budget):
        try:
            summary = await ask("\n\n".join(chunk), summary)
        except SummaryOverflow:
            smaller = _tokens("\n\n".join(chunk)) // 2
            if smaller < MIN_CHUNK_TOKENS:
                raise
            summary = await _fold(chunk, smaller, summary, ask)
    return summary


def _message_parts(messages: Sequence[Any]) -> list[str]:
    parts = []
    for message in convert_to_llm(messages):
        text = serialize_conversation([message])
        if text:
            parts.append(text)
    return parts


@dataclass(slots=True)
class _Calls:
    completion: Completion
    options: CompletionOptions
    usage: dict[str, Any] | None = None
    count: int = 0

    async def ask(self, user_text: str, max_tokens: int, label: str) -> str:
        messages = [{"role": "user", "content": [{"type": "text", "text": user_text}], "timestamp": 0}]
        reply = await self.completion(prompts.SYSTEM_PROMPT, messages, max_tokens, self.options)
        if reply.get("stopReason") == "error" and is_context_overflow(reply):
            self.count += 1
            raise SummaryOverflow(f"{label} failed: {reply.get('errorMessage') or 'context overflow'}")
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


async def _history(calls: _Calls, messages: Sequence[Any], previous: str | None, instructions: str | None,
                   max_tokens: int) -> str:
    """One history summary, or a fold over chunks when the span does not fit the window."""
    overhead = prompts.history_request("", previous or "x", instructions)
    budget = input_budget(calls.completion, max_tokens, overhead)
    if budget is not None and previous:
        budget = max(256, budget - _tokens(previous))
    async def ask(chunk: str, summary: str | None) -> str:
        return await calls.ask(prompts.history_request(chunk, summary, instructions), max_tokens, "Summarization")

    summary = await _fold(_message_parts(messages), budget, previous, ask)
    assert summary is not None
    return summary


async def _turn_prefix(calls: _Calls, messages: Sequence[Any], max_tokens: int) -> str:
    budget = input_budget(calls.completion, max_tokens, prompts.turn_prefix_request(""))
    async def ask(chunk: str, summary: str | None) -> str:
        # The first chunk opens with the prefix prompt; later ones (a prefix larger than the
        # window) are folded in as for history.
        request = (prompts.turn_prefix_request(chunk) if summary is None
                   else prompts.history_request(chunk, summary, None))
        return await calls.ask(request, max_tokens, "Turn prefix summarization")

    summary = await _fold(_message_parts(messages), budget, None, ask)
    assert summary is not None
    return summary


async def _plain_summary(calls: _Calls, prep: Any, previous: str | None, instructions: str | None,
                         history_budget: int, prefix_budget: int) -> str:
    """The summary text from Pi's requests: the serialized transcript under the summarizer's prompt."""
    to_summarize = list(_get(prep, "messages_to_summarize", []))
    prefix = list(_get(prep, "turn_prefix_messages", []))
    if not (_get(prep, "is_split_turn") and prefix):
        return await _history(calls, to_summarize, previous, instructions, history_budget)
    fallback = strip_machine_blocks(previous) if previous else prompts.NO_PRIOR_HISTORY
    if getattr(calls.completion, "one_at_a_time", False):  # Pi's order: history, then the prefix
        history = (await _history(calls, to_summarize, previous, instructions, history_budget)
                   if to_summarize else fallback)
        return history + prompts.SPLIT_TURN_SEPARATOR + await _turn_prefix(calls, prefix, prefix_budget)
    try:
        async with asyncio.TaskGroup() as group:  # Pi: sequential; the two requests are independent
            history_task = (
                group.create_task(_history(calls, to_summarize, previous, instructions, history_budget))
                if to_summarize else None
            )
            prefix_task = group.create_task(_turn_prefix(calls, prefix, prefix_budget))
    except ExceptionGroup as group_error:
        raise group_error.exceptions[0] from None
    history = history_task.result() if history_task else fallback
    return history + prompts.SPLIT_TURN_SEPARATOR + prefix_task.result()


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
    if getattr(calls.completion, "one_at_a_time", False):  # a server that cancels a stream when another comes
        history = await history_ask() if to_summarize else fallback
        return history + prompts.SPLIT_TURN_SEPARATOR + await prefix_ask()
    try:
        async with asyncio.TaskGroup() as group:
            history_task = group.create_task(history_ask()) if to_summarize else None
            prefix_task = group.create_task(prefix_ask())
    except ExceptionGroup as group_error:
        raise group_error.exceptions[0] from None
    history = history_task.result() if history_task else fallback
    return history + prompts.SPLIT_TURN_SEPARATOR + prefix_task.result()


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


def _previous_facts(prep: Any, previous: str | None) -> VerifiedFacts:
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
    calls = _Calls(completion, CompletionOptions(reasoning=reasoning, signal=signal))
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
    seed = previous_facts if previous_facts is not None else _previous_facts(prep, previous)
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
