"""A compaction that always frees the window: one retry, then a summary written without a model.

`summarize_with_fallback` wraps `summarize_preparation` (it never reaches into the chunk fold) and
is what every compaction path calls: the agent's threshold, overflow and manual compactions,
background summaries (without the retry and the fallback: a failed one falls to the blocking
path), `compact_session` and `picontext compact`.

1. **Attempt 1**: the usual requests, each bounded by `compaction.summaryTimeoutMs`. The result
   is checked: a summary far beyond its output budget (more than twice it: many local servers
   ignore `max_tokens`) or larger than what it replaces (from `MIN_OVERSIZE_TOKENS` on) is
   `oversize`; a short apology is a `refusal`; text without a word, or one line repeated over
   most of the summary, is `garbage`. These fail the attempt like a reply cut at the token cap.
2. **Attempt 2**, once, after any failure but an abort: tighter. The history request asks for
   at most `brief_words(budget)` words; after a timeout, an overflow or a provider error the
   conversation is also sent in chunks of half the size (the summarizer is shown a smaller
   window, so the usual chunking cuts finer).
3. **Fallback** (`fallback=True`): `mechanical_summary`, built from the session alone. It holds
   the verified facts (last user request verbatim, quoted errors), the file lists, the previous
   summary, and one line per compacted entry with its id, tool results as the masking
   placeholders (`mask.py`), so `recall` and `picontext dropped --entry ID` read any of it back.
   It is no longer than the history summary's budget would allow (at most
   `FALLBACK_MAX_TOKENS`). The entry's `details.fallback` says so: `{reason, attempts, errors}`.

An abort is never a failure to fall back from: `SummaryAborted` propagates and nothing is
written. Every failed attempt is reported to `on_failure` before the next step starts, so the
caller can write a durable record: a `custom` entry of type `FAILURE_TYPE` (records.py; Pi
projects custom entries to nothing; `failure_data` builds its `data`).
"""

from __future__ import annotations

import asyncio
import math
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from picontext.compaction import prompts
from picontext.compaction.completion import CompletionOptions, assistant_reply
from picontext.compaction.file_ops import format_file_operations
from picontext.compaction.mask import MASK_PREFIX, mask_placeholder
from picontext.compaction.records import FAILURE_TYPE
from picontext.compaction.serialize import serialize_messages, utf16_len
from picontext.compaction.summarize import (
    SummaryResult,
    add_usage,
    history_max_tokens,
    preparation_file_lists,
    previous_facts_of,
    summarize_preparation,
    turn_prefix_max_tokens,
)
from picontext.compaction.tokens import estimate_tokens
from picontext.compaction.verify import VerifiedFacts, extract_facts, format_ledger, strip_machine_blocks
from picontext.errors import (
    CompactionError,
    ConfigError,
    SummarizationFailed,
    SummaryAborted,
    SummaryEmpty,
    SummaryOverflow,
    SummaryTimeout,
    SummaryToolCall,
    SummaryTruncated,
    SummaryUnusable,
)
from picontext.session.projection import field_of

__all__ = [
    "FAILURE_TYPE",
    "FALLBACK_MAX_TOKENS",
    "MIN_OVERSIZE_TOKENS",
    "AttemptFailure",
    "brief_words",
    "check_summary",
    "failure_data",
    "failure_kind",
    "fallback_notice",
    "mechanical_summary",
    "summarize_with_fallback",
]

VERSION: Final = 1
CHARS_PER_TOKEN: Final = 4
OVERSIZE_FACTOR: Final = 2
MIN_OVERSIZE_TOKENS: Final = 512
"""A summary shorter than this is never refused for its size: on a tiny span the fixed headings
alone outweigh what they replace, and a mechanical summary would be no smaller."""
FALLBACK_MAX_TOKENS: Final = 4000
"""The mechanical summary lists entries, it does not condense them: more would only cost every
later request tokens without telling the model more than `recall` can."""
PREVIEW_CHARS: Final = 120
SMALLER_CHUNKS: Final = frozenset({"timeout", "overflow", "error"})
"""Failures that a smaller request may cure; the others (cap reached, oversize, refusal, ...)
come from what the model wrote, so the retry asks for less instead."""
_REFUSAL = re.compile(
    r"^\W*(?:I'?m sorry|I am sorry|sorry,|I can(?:no|')t|I cannot|I am unable|I'm unable|I won'?t|As an AI)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"\w")

OnFailure = Callable[["AttemptFailure"], "Awaitable[None] | None"]


@dataclass(frozen=True, slots=True)
class AttemptFailure:
    """One failed summary attempt: which (1-based), why (`kind`), the error text, and what
    happens next: "retry", "fallback", "none" (the compaction fails) or "blocking" (a background
    summary: the blocking path takes over)."""

    attempt: int
    kind: str
    error: str
    next: str
    usage: dict[str, Any] | None = None


def failure_kind(exc: BaseException) -> str:
    """The failure kind of a summary exception (the `kind` of records and `details.fallback`)."""
    if isinstance(exc, SummaryUnusable):
        return exc.kind
    for cls, kind in ((SummaryTimeout, "timeout"), (SummaryOverflow, "overflow"), (SummaryTruncated, "length"),
                      (SummaryEmpty, "empty"), (SummaryToolCall, "toolCall")):
        if isinstance(exc, cls):
            return kind
    return "error"


_KIND_TEXT: Final = {
    "length": "it hit its token cap", "empty": "it was empty", "toolCall": "the model called a tool",
    "timeout": "the request timed out", "overflow": "the request did not fit the summarizer's window",
    "oversize": "it was larger than its budget", "refusal": "the model refused",
    "garbage": "it was not a summary", "error": "the request failed",
}


def failure_data(failure: AttemptFailure, prep: Any, *, reason: str, model: str | None) -> dict[str, Any]:
    """The `data` of a `FAILURE_TYPE` custom entry for `failure` of a compaction of `prep`."""
    data: dict[str, Any] = {
        "version": VERSION, "reason": reason, "attempt": failure.attempt, "kind": failure.kind,
        "error": failure.error, "next": failure.next,
        "firstKeptEntryId": getattr(prep, "first_kept_entry_id", None),
        "tokensBefore": int(getattr(prep, "tokens_before", 0) or 0), "model": model,
    }
    if failure.usage is not None:
        data["usage"] = failure.usage
    return data


def fallback_notice(details: Any) -> str | None:
    """One line for people about a compaction whose summary failed at first (None otherwise)."""
    if not isinstance(details, dict):
        return None
    fallback = details.get("fallback")
    if isinstance(fallback, dict):
        why = _KIND_TEXT.get(str(fallback.get("reason")), str(fallback.get("reason")))
        attempts = fallback.get("attempts")
        tries = "twice" if attempts == 2 else "once" if attempts == 1 else f"{attempts} times"
        return (f"the model's summary failed {tries} (last: {why}); a mechanical summary replaced it, the compacted "
                "entries stay readable with recall / picontext dropped")
    retry = details.get("summaryRetry")
    if isinstance(retry, dict):
        why = _KIND_TEXT.get(str(retry.get("reason")), str(retry.get("reason")))
        return f"the first summary failed ({why}); the second attempt succeeded"
    return None


# -- checking a summary ---------------------------------------------------------------------------


def _tokens(text: str) -> int:
    return math.ceil(utf16_len(text) / CHARS_PER_TOKEN)


def _replaced_tokens(prep: Any) -> int:
    """chars/4 of what the summary takes the place of: the span, the turn prefix, the previous summary."""
    messages = [*getattr(prep, "messages_to_summarize", []), *getattr(prep, "turn_prefix_messages", [])]
    previous = getattr(prep, "previous_summary", None)
    return sum(estimate_tokens(m) for m in messages) + (_tokens(previous) if isinstance(previous, str) else 0)


def _output_budget(prep: Any, reserve_tokens: int, model_max: int) -> int:
    budget = history_max_tokens(reserve_tokens, model_max)
    if getattr(prep, "is_split_turn", False) and getattr(prep, "turn_prefix_messages", None):
        budget += turn_prefix_max_tokens(reserve_tokens, model_max)
    return budget


def _repeats(text: str) -> bool:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) < 12:
        return False
    _line, count = Counter(lines).most_common(1)[0]
    return count * 2 > len(lines)


def check_summary(summary: str, prep: Any, *, reserve_tokens: int, model_max: int) -> None:
    """Raise `SummaryUnusable` when the model's `summary` cannot serve (see the module docstring).

    Only the model's own text counts: the ledger and the file lists picontext appends are bounded
    on their own."""
    body = strip_machine_blocks(summary).strip()
    if not _WORD.search(body):
        raise SummaryUnusable("Summarization failed: the reply holds no words", "garbage")
    if len(body) < 600 and _REFUSAL.match(body):
        raise SummaryUnusable(f"Summarization failed: the model refused ({' '.join(body.split())[:120]})",
                              "refusal")
    if _repeats(body):
        raise SummaryUnusable("Summarization failed: the reply repeats one line over and over", "garbage")
    tokens = _tokens(body)
    budget = _output_budget(prep, reserve_tokens, model_max)
    if budget > 0 and tokens > OVERSIZE_FACTOR * budget:
        raise SummaryUnusable(f"Summarization failed: the summary is ~{tokens} tokens, more than {OVERSIZE_FACTOR}x "
                              f"its budget of {budget} (the server ignored max_tokens?)", "oversize")
    replaced = _replaced_tokens(prep)
    if tokens > max(replaced, MIN_OVERSIZE_TOKENS):
        raise SummaryUnusable(f"Summarization failed: the summary (~{tokens} tokens) is larger than what it "
                              f"replaces (~{replaced} tokens)", "oversize")


# -- the summarizer as one attempt sees it --------------------------------------------------------


class _Attempt:
    """`completion` with each request bounded by the timeout and every reply's usage counted;
    for a retry with smaller chunks it shows a smaller `context_window` (the usual chunking then
    cuts finer). Anything else is the wrapped completion's (`model`, `one_at_a_time`, ...)."""

    def __init__(self, inner: Any, timeout_ms: int, ledger: _Ledger, window: int | None = None) -> None:
        self._inner = inner
        self._timeout_ms = timeout_ms
        self._ledger = ledger
        self.context_window = int(getattr(inner, "context_window", 0) or 0) if window is None else window
        self.max_output_tokens = int(getattr(inner, "max_output_tokens", 0) or 0)
        self.reasoning = bool(getattr(inner, "reasoning", False))
        self.one_at_a_time = bool(getattr(inner, "one_at_a_time", False))
        self.timed_out = False
        if hasattr(inner, "send"):  # requests over the session's cached prefix (prompt_cache.py)
            self.send = self._send

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def __call__(self, system_prompt: str, messages: Sequence[dict[str, Any]], max_tokens: int,
                       options: CompletionOptions) -> dict[str, Any]:
        return await self._bounded(self._inner(system_prompt, messages, max_tokens, options))

    async def _send(self, model: Any, context: Any, options: Any) -> dict[str, Any]:
        return await self._bounded(self._inner.send(model, context, options))

    async def _bounded(self, call: Awaitable[dict[str, Any]]) -> dict[str, Any]:
        if self._timeout_ms > 0:
            try:
                async with asyncio.timeout(self._timeout_ms / 1000):
                    reply = await call
            except TimeoutError:
                self.timed_out = True
                reply = assistant_reply(stop_reason="error", error=(
                    f"the summary request timed out after {self._timeout_ms / 1000:g} s "
                    "(compaction.summaryTimeoutMs)"))
        else:
            reply = await call
        usage = reply.get("usage")
        self._ledger.add(usage if isinstance(usage, dict) else None)
        return reply


@dataclass(slots=True)
class _Ledger:
    """Usage and request count over all attempts of one compaction (failed ones cost too)."""

    usage: dict[str, Any] | None = None
    calls: int = 0
    since: int = 0
    since_usage: dict[str, Any] | None = None

    def add(self, usage: dict[str, Any] | None) -> None:
        self.calls += 1
        self.usage = add_usage(self.usage, usage)
        self.since_usage = add_usage(self.since_usage, usage)

    def take_attempt(self) -> dict[str, Any] | None:
        """The usage of the attempt that just ended (and start counting the next)."""
        usage, self.since_usage = self.since_usage, None
        return usage


def brief_words(budget_tokens: int) -> int:
    """Words the retry asks for: well inside the budget (a word is ~1.3 tokens, headings cost too)."""
    return max(60, min(600, int(budget_tokens * 0.4)))


def _brief_instructions(instructions: str | None, kind: str, budget: int) -> str:
    note = (f"A first attempt at this note could not be used ({_KIND_TEXT.get(kind, kind)}). Keep this one short: "
            f"at most {brief_words(budget)} words in all, a few brief bullet points per section, no line "
            "repeated, plain text only, and call no tool.")
    return f"{instructions}\n\n{note}" if instructions else note


def _smaller_window(completion: Any, prep: Any, instructions: str | None, max_tokens: int) -> int | None:
    """A window that makes the usual chunking cut the conversation in chunks about half the size
    the first attempt used (or half the span, when it went in one request)."""
    previous = getattr(prep, "previous_summary", None)
    span = _tokens(serialize_messages(list(getattr(prep, "messages_to_summarize", []))))
    fixed = (_tokens(prompts.SYSTEM_PROMPT) + _tokens(prompts.history_request("", previous or "x", instructions))
             + (_tokens(previous) if isinstance(previous, str) else 0))
    window = int(getattr(completion, "context_window", 0) or 0)
    first = max(0, math.floor((window - max_tokens - fixed) * 0.8)) if window > 0 else span
    target = max(256, min(span, first) // 2)
    smaller = max_tokens + fixed + math.ceil(target / 0.8)
    return min(smaller, window) if window > 0 else smaller


# -- the mechanical summary -----------------------------------------------------------------------


def _one_line(text: str, width: int = PREVIEW_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"
                   and isinstance(b.get("text"), str))


def _entry_line(entry_id: str, message: Any, calls: dict[str, dict[str, Any]]) -> str | None:
    """One line for one compacted message: who, and what (tool results as masking placeholders)."""
    if not isinstance(message, dict):
        return None
    role = message.get("role")
    if role == "toolResult":
        text = _text_of(message.get("content"))
        if text.startswith(MASK_PREFIX):  # masked before: its placeholder says it all
            return f"- {entry_id} tool result: {_one_line(text, 2 * PREVIEW_CHARS)}"
        call = calls.get(str(message.get("toolCallId"))) or {}
        tool = call.get("name") or message.get("toolName") or "tool"
        error = " (error)" if message.get("isError") else ""
        placeholder = mask_placeholder(str(tool), call.get("arguments"), utf16_len(text), entry_id)
        return f"- {entry_id} tool result{error}: {placeholder}"
    if role == "assistant":
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        tools = [f"{b.get('name')}()" for b in blocks if isinstance(b, dict) and b.get("type") == "toolCall"]
        text = _one_line(_text_of(content))
        what = " ".join(part for part in (text, ("→ " + ", ".join(tools)) if tools else "") if part)
        if message.get("stopReason") == "error":
            what = f"{what} [error: {_one_line(str(message.get('errorMessage') or ''), 80)}]".strip()
        return f"- {entry_id} assistant: {what or '(no text)'}"
    if role == "bashExecution":
        code = message.get("exitCode")
        return f"- {entry_id} bash: $ {_one_line(str(message.get('command') or ''), 80)} (exit {code})"
    if role in ("user", "custom"):
        return f"- {entry_id} {role}: {_one_line(_text_of(message.get('content')))}"
    if role == "branchSummary":
        return f"- {entry_id} branch summary: {_one_line(str(message.get('summary') or ''))}"
    return None


def _entry_lines(prep: Any) -> list[str]:
    """Lines for the compacted entries, oldest first (the preparation's projection, else its messages)."""
    projection = getattr(prep, "projection", None)
    end = getattr(prep, "first_kept_entry_index", None)
    if projection is not None and isinstance(end, int):
        items = [(str(field_of(item.source_entry, "id")), m) for item in projection.entries[:end]
                 if field_of(item.source_entry, "type") != "compaction" for m in item.messages]
    else:
        messages = [*getattr(prep, "messages_to_summarize", []), *getattr(prep, "turn_prefix_messages", [])]
        items = [("?", m) for m in messages]
    calls: dict[str, dict[str, Any]] = {}
    for _id, message in items:
        if isinstance(message, dict) and message.get("role") == "assistant" and isinstance(message.get("content"),
                                                                                            list):
            for block in message["content"]:
                if isinstance(block, dict) and block.get("type") == "toolCall":
                    calls[str(block.get("id"))] = block
    lines = []
    for entry_id, message in items:
        if isinstance(message, dict) and message.get("role") == "system":
            continue
        line = _entry_line(entry_id, message, calls)
        if line is not None:
            lines.append(line)
    return lines


def _fit(lines: list[str], room: int) -> tuple[list[str], int]:
    """The newest lines that fit in `room` characters (kept in order) and how many older ones did not."""
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        if used + len(line) + 1 > room:
            break
        kept.append(line)
        used += len(line) + 1
    return kept[::-1], len(lines) - len(kept)


def _cut(text: str, room: int) -> str:
    """`text` up to `room` characters, ended at a line (or at least a word) near the limit."""
    if len(text) <= room:
        return text
    head = text[:room]
    for sep in ("\n", " "):
        at = head.rfind(sep)
        if at >= room * 0.8:
            return head[:at]
    return head


def mechanical_summary(prep: Any, *, reserve_tokens: int, model_max: int, failures: Sequence[AttemptFailure],
                       previous_facts: VerifiedFacts | None = None, usage: dict[str, Any] | None = None,
                       calls: int = 0) -> SummaryResult:
    """The summary of `prep` without a model (see the module docstring); `failures` name why."""
    first_kept = getattr(prep, "first_kept_entry_id", None)
    if not first_kept:
        raise CompactionError("First kept entry has no id: nothing to compact")
    budget = max(256, min(history_max_tokens(reserve_tokens, model_max) or FALLBACK_MAX_TOKENS, FALLBACK_MAX_TOKENS))
    room = budget * CHARS_PER_TOKEN
    to_summarize = list(getattr(prep, "messages_to_summarize", []))
    prefix = list(getattr(prep, "turn_prefix_messages", []))
    previous = getattr(prep, "previous_summary", None)
    previous = previous if isinstance(previous, str) else None
    read_files, modified_files = preparation_file_lists(prep)
    if previous_facts is None:
        previous_facts = previous_facts_of(prep, previous)
    facts = extract_facts([*to_summarize, *prefix], previous_facts)
    facts.modified_files = list(modified_files)

    last = failures[-1] if failures else None
    why = _KIND_TEXT.get(last.kind, last.kind) if last is not None else "no model"
    lines = _entry_lines(prep)
    header = (f"[picontext: the model could not write this summary ({why}); this is a mechanical record instead. "
              f"The {len(lines)} messages it replaces are still in the session: read any of them back by its id "
              "with the recall tool (entryId), or `picontext dropped --entry ID`.]")
    # The ledger lists the facts whole (the request up to the budget, as verify.py quotes it);
    # the modified files go in Pi's <modified-files> block below instead of twice.
    ledger_facts = VerifiedFacts(facts.last_user_request, [], list(facts.errors))
    request_chars = min(room // 3, history_max_tokens(reserve_tokens, model_max) or room)
    ledger = format_ledger(ledger_facts, max_request_chars=request_chars)
    while len(ledger) > room // 2 and ledger_facts.errors:  # the newest errors matter most
        ledger_facts.errors.pop(0)
        ledger = format_ledger(ledger_facts, max_request_chars=request_chars)
    left = room - len(header) - len(ledger)
    parts = [header]
    if previous:
        earlier = strip_machine_blocks(previous).strip()
        kept = _cut(earlier, max(0, left // 2))
        if kept:
            rest = len(earlier) - len(kept)
            more = "" if not rest else f"\n[… {rest:,} more characters of it are in the previous compaction entry]"
            parts.append("## Earlier summary\n" + kept + more)
            left -= len(parts[-1]) + 2
    shown, hidden = _fit(lines, max(0, left - 120))
    listing = ["## Compacted messages (oldest first)"]
    if hidden:
        listing.append(f"- … {hidden} earlier messages not listed (`picontext dropped` lists them all)")
    listing.extend(shown)
    parts.append("\n".join(listing))
    text = "\n\n".join(parts) + ledger
    details: dict[str, Any] = {
        "readFiles": read_files, "modifiedFiles": modified_files, "verifiedFacts": facts.to_json(),
        "fallback": {"reason": last.kind if last is not None else "none", "attempts": len(failures),
                     "errors": [f.error for f in failures]},
    }
    summary = text + format_file_operations(read_files, modified_files)
    return SummaryResult(summary, str(first_kept), int(getattr(prep, "tokens_before", 0) or 0), usage, details,
                         calls, VerifiedFacts())


# -- the wrapper ------------------------------------------------------------------------------------


async def _report(on_failure: OnFailure | None, failure: AttemptFailure) -> None:
    if on_failure is None:
        return
    result = on_failure(failure)
    if asyncio.iscoroutine(result):
        await result


def _aborted(signal: Any) -> bool:
    return bool(signal is not None and getattr(signal, "aborted", False))


async def summarize_with_fallback(
    prep: Any,
    completion: Any,
    *,
    reserve_tokens: int,
    instructions: str | None = None,
    thinking_level: str | None = None,
    signal: Any = None,
    previous_facts: VerifiedFacts | None = None,
    verify: bool = True,
    prompt_cache: Any = None,
    timeout_ms: int = 0,
    retry: bool = True,
    fallback: bool = True,
    on_failure: OnFailure | None = None,
    on_progress: Any = None,
) -> SummaryResult:
    """A checked summary of `prep`, retried once and replaced by `mechanical_summary` when the
    model fails (see the module docstring). Raises `SummaryAborted` on an abort, and the last
    failure when `fallback` is off; configuration errors (`ConfigError`, a preparation without a
    kept entry) propagate at once."""
    model_max = int(getattr(completion, "max_output_tokens", 0) or 0)
    ledger = _Ledger()
    failures: list[AttemptFailure] = []
    attempts = 2 if retry else 1
    last_error: SummarizationFailed | None = None
    for attempt in range(1, attempts + 1):
        wrapped = _Attempt(completion, timeout_ms, ledger)
        asked = instructions
        cache = prompt_cache
        if attempt > 1 and failures:
            kind = failures[-1].kind
            budget = history_max_tokens(reserve_tokens, model_max)
            asked = _brief_instructions(instructions, kind, budget)
            cache = None  # the retry is the plain request; a cached prefix was tried (or not) already
            if kind in SMALLER_CHUNKS:
                wrapped = _Attempt(completion, timeout_ms, ledger,
                                   _smaller_window(completion, prep, asked, budget))
        try:
            result = await summarize_preparation(
                prep, wrapped, reserve_tokens=reserve_tokens, instructions=asked, thinking_level=thinking_level,
                signal=signal, previous_facts=previous_facts, verify=verify, prompt_cache=cache,
                on_progress=on_progress)
            check_summary(result.summary, prep, reserve_tokens=reserve_tokens, model_max=model_max)
        except (SummaryAborted, ConfigError):
            raise
        except SummarizationFailed as exc:
            error: SummarizationFailed = exc
            if wrapped.timed_out and not isinstance(exc, SummaryUnusable):
                error = SummaryTimeout(str(exc))
        except CompactionError:
            raise  # not the model's doing (nothing to compact, no kept entry)
        except Exception as exc:  # a broken provider must not keep the session from compacting
            error = SummarizationFailed(f"Summarization failed: {type(exc).__name__}: {exc}")
        else:
            details = dict(result.details)
            if failures:
                details["summaryRetry"] = {"reason": failures[-1].kind, "error": failures[-1].error}
            return SummaryResult(result.summary, result.first_kept_entry_id, result.tokens_before, ledger.usage,
                                 details, ledger.calls, result.missing_facts)
        if _aborted(signal):
            raise SummaryAborted("Summarization was aborted") from error
        last_error = error
        next_step = "retry" if attempt < attempts else "fallback" if fallback else "none"
        failure = AttemptFailure(attempt, failure_kind(error), str(error), next_step, ledger.take_attempt())
        failures.append(failure)
        await _report(on_failure, failure)
        if _aborted(signal):
            raise SummaryAborted("Summarization was aborted") from error
    if not fallback:
        assert last_error is not None
        raise last_error
    return mechanical_summary(prep, reserve_tokens=reserve_tokens, model_max=model_max, failures=failures,
                              previous_facts=previous_facts, usage=ledger.usage, calls=ledger.calls)
