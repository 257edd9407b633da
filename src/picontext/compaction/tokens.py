"""Token accounting: provider usage where it can be trusted, chars/4 estimates for the rest.

    calculate_context_tokens          usage -> context size of that call      (Pi calculateContextTokens)
    get_assistant_usage               the usage of a usable anchor, or None   (Pi getAssistantUsage)
    get_last_assistant_usage          newest anchor among session entries     (Pi getLastAssistantUsage)
    estimate_tokens                   one message, ceil(chars / 4)            (Pi estimateTokens)
    estimate_context_tokens           anchor + trailing estimate              (Pi estimateContextTokens)
    estimate_projected_context_tokens the same, distrusting stale anchors     (Pi estimateProjectedContextTokens)
    estimate_messages_tokens          plain sum, no anchor                    (Pi estimateMessagesTokens)
    should_compact                    the threshold test                      (Pi shouldCompact)
    BranchEstimate                    estimate_projected_context_tokens at every point of a walk
                                      along a branch, kept current per entry (the viewer's plot)

"chars" are JavaScript string lengths (UTF-16 code units) and JSON text is JSON.stringify's
(spec 02 §0, §2). Malformed messages (content that is not a string or a list, blocks without
their text) count 0 where the reference throws or yields NaN; see docs/divergences.md.
Everything here but `BranchEstimate` (which walks a branch once) is pure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import Any, Final, TypedDict

import orjson

from picontext.session.live import LiveProjection
from picontext.session.projection import Entry, field_of, hashable, project_path
from picontext.session.system_prompt import get_current_system_message

IMAGE_CHARS: Final = 4800  # an image counts as 4800 chars (1200 tokens), whatever its size
_UNDEFINED_ARGS_CHARS: Final = len("undefined")  # a tool call without arguments (the harness's rule)
_MAX_SAFE: Final = 2**53
_ESCAPED = re.compile("[\x00-\x1f\"\\\\\ud800-\udfff]")
_SHORT_ESCAPES: Final = frozenset("\b\f\n\r\t\"\\")


class ContextUsageEstimate(TypedDict):
    """What Pi's estimateContextTokens returns (camelCase keys, JSON-ready). Usage-based numbers
    are floats when the provider reported floats (or NaN for malformed usage), as in Pi."""

    tokens: int | float
    usageTokens: int | float
    trailingTokens: int
    lastUsageIndex: int | None


# --- lengths ---------------------------------------------------------------------------------


def js_length(text: str) -> int:
    """JavaScript `text.length`: UTF-16 code units (a non-BMP character counts 2)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def js_number(value: int | float) -> str:
    """`String(value)` for a JavaScript number (ints beyond 2^53 are doubles there)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if -_MAX_SAFE < value < _MAX_SAFE:
            return str(value)
        value = float(value)
    if not math.isfinite(value):
        return "null"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    digits_tuple = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, digits_tuple.digits))
    k = len(digits)
    n = k + int(digits_tuple.exponent)  # value = 0.digits x 10^n
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    exponent = n - 1
    mantissa = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{sign}{mantissa}e{'+' if exponent > 0 else '-'}{abs(exponent)}"


def _string_json_length(text: str) -> int:
    length = js_length(text) + 2
    if _ESCAPED.search(text) is None:
        return length
    for ch in _ESCAPED.findall(text):
        length += 1 if ch in _SHORT_ESCAPES else 5  # \n vs \u0007 / \udXXX
    return length


def _slow_json_length(value: Any) -> int:
    # An explicit stack, not recursion: arguments nested 1,000 deep are valid JSON (Pi counts them).
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if item is None or item is True:
            total += 4
        elif item is False:
            total += 5
        elif isinstance(item, str):
            total += _string_json_length(item)
        elif isinstance(item, int | float):
            total += len(js_number(item))
        elif isinstance(item, list | tuple):
            total += 2 + max(len(item) - 1, 0)
            stack.extend(item)
        elif isinstance(item, dict):
            # Key order changes JSON.stringify's output but not its length.
            total += 2 + max(len(item) - 1, 0) + sum(_string_json_length(str(k)) + 1 for k in item)
            stack.extend(item.values())
        else:
            total += 4  # not JSON: counted as null
    return total


def _needs_slow_path(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            return True
        if isinstance(item, int):
            if not -_MAX_SAFE < item < _MAX_SAFE and not isinstance(item, bool):
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


_ONLY_STR: Final = frozenset({str})


def json_length(value: Any) -> int:
    """`JSON.stringify(value).length` for a JSON value."""
    # Tool arguments are mostly an object of strings: no number to look for (orjson refuses a
    # non-string key, which then takes the slow path).
    if (type(value) is dict and _ONLY_STR.issuperset(map(type, value.values()))) or not _needs_slow_path(value):
        try:
            data = orjson.dumps(value)
        except (TypeError, orjson.JSONEncodeError):
            pass  # lone surrogates, odd types, nesting deeper than orjson's limit
        else:
            return len(data) if data.isascii() else js_length(data.decode())
    return _slow_json_length(value)


# --- usage -----------------------------------------------------------------------------------


def _num(value: Any) -> float:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else math.nan


def calculate_context_tokens(usage: Any) -> int | float:
    """`totalTokens` when non-zero, else input + output + cacheRead + cacheWrite (NaN if malformed)."""
    if type(usage) is dict and type(total := usage.get("totalTokens")) is int and total:
        return total  # the usual case, ahead of the general checks (a walk makes one call per request)
    if not isinstance(usage, dict):
        return math.nan
    total = usage.get("totalTokens")
    if isinstance(total, int | float) and not isinstance(total, bool) and total and total == total:
        return total
    return (_num(usage.get("input")) + _num(usage.get("output")) + _num(usage.get("cacheRead"))
            + _num(usage.get("cacheWrite")))


def get_assistant_usage(message: Any) -> dict[str, Any] | None:
    """The usage of an assistant message that can anchor the context size, or None.

    Aborted and errored responses and all-zero usage are not anchors; every other stop reason is.
    """
    if field_of(message, "role") != "assistant":
        return None
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return None
    if message.get("stopReason") in ("aborted", "error"):
        return None
    return usage if calculate_context_tokens(usage) > 0 else None


def get_last_assistant_usage(entries: Sequence[Any]) -> dict[str, Any] | None:
    """Newest anchor usage among `message` entries (Pi getLastAssistantUsage)."""
    for entry in reversed(entries):
        if field_of(entry, "type") == "message":
            usage = get_assistant_usage(entry.get("message"))
            if usage is not None:
                return usage
    return None


# --- estimates -------------------------------------------------------------------------------


# Per block, the common case inline (a dict block, an ASCII string: its length is len()); the
# estimate runs for every message of a walk along a 100k-entry branch.

def _content_chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content) if content.isascii() else js_length(content)
    if not isinstance(content, list):
        return 0
    chars = 0
    for block in content:
        kind = block.get("type") if type(block) is dict else field_of(block, "type")
        if kind == "text":
            text = block.get("text")
            if type(text) is str and text.isascii():
                chars += len(text)
            elif isinstance(text, str):
                chars += js_length(text)
        elif kind == "image":
            chars += IMAGE_CHARS
    return chars


def _assistant_chars(content: Any) -> int:
    if not isinstance(content, list):
        return 0  # a string is iterated char by char in the reference: no blocks, 0
    chars = 0
    for block in content:
        kind = block.get("type") if type(block) is dict else field_of(block, "type")
        if kind == "text":
            text = block.get("text")
            chars += len(text) if type(text) is str and text.isascii() else _str_length(text)
        elif kind == "thinking":
            chars += _str_length(block.get("thinking"))
        elif kind == "toolCall":
            chars += _str_length(block.get("name"))
            chars += json_length(block["arguments"]) if "arguments" in block else _UNDEFINED_ARGS_CHARS
    return chars


def _str_length(value: Any) -> int:
    if type(value) is str and value.isascii():
        return len(value)
    return js_length(value) if isinstance(value, str) else 0


def _system_chars(message: dict[str, Any]) -> int:
    chars = _content_chars(message.get("content"))
    sections = message.get("sections")
    if isinstance(sections, dict):
        chars += sum(js_length(v) for v in sections.values() if isinstance(v, str))
    tools = message.get("toolsAdded")
    if tools is not None:
        chars += json_length(tools)
    return chars


_CONTENT_ROLES: Final = frozenset({"user", "toolResult", "custom"})


def message_chars(message: Any) -> int:
    """The character count behind `estimate_tokens` (spec 02 §2.3)."""
    role = message.get("role") if type(message) is dict else field_of(message, "role")
    if role == "assistant":
        return _assistant_chars(message.get("content"))
    if type(role) is str and role in _CONTENT_ROLES:  # a list or object is no role
        return _content_chars(message.get("content"))
    if role == "bashExecution":
        return _str_length(message.get("command")) + _str_length(message.get("output"))
    if role in ("branchSummary", "compactionSummary"):
        return _str_length(message.get("summary"))
    if role == "system":
        return _system_chars(message)
    return 0


def estimate_tokens(message: Any) -> int:
    """ceil(chars / 4) for one message (Pi estimateTokens)."""
    return -(-message_chars(message) // 4)


def estimate_messages_tokens(messages: Iterable[Any]) -> int:
    """Sum of per-message estimates, no usage anchor (Pi estimateMessagesTokens)."""
    return sum(estimate_tokens(m) for m in messages)


def estimate_context_tokens(messages: Sequence[Any]) -> ContextUsageEstimate:
    """Usage of the newest anchor plus estimates of everything after it (Pi estimateContextTokens)."""
    for index in range(len(messages) - 1, -1, -1):
        usage = get_assistant_usage(messages[index])
        if usage is not None:
            usage_tokens = calculate_context_tokens(usage)
            trailing = estimate_messages_tokens(messages[index + 1 :])
            return {"tokens": usage_tokens + trailing, "usageTokens": usage_tokens,
                    "trailingTokens": trailing, "lastUsageIndex": index}
    total = estimate_messages_tokens(messages)
    return {"tokens": total, "usageTokens": 0, "trailingTokens": total, "lastUsageIndex": None}


def _source_of_message(projection: Any, message_index: int) -> Any:
    # From the end: the usage anchor is almost always one of the last messages.
    start = len(projection.messages)
    for item in reversed(projection.entries):
        start -= len(item.messages)
        if message_index >= start:
            return item.source_entry
    return None


def estimate_projected_context_tokens(projection: Any, branch_entries: Sequence[Any]) -> ContextUsageEstimate:
    """`estimate_context_tokens` over the projection, unless its anchor is stale.

    An anchor is stale when a `context_edit` or `compaction` entry comes after its entry on the
    branch: the usage then describes a context that no longer exists, and the result is a pure
    estimate with every system message replayed into one (spec 02 §2.5).
    """
    estimate = estimate_context_tokens(projection.messages)
    if estimate["lastUsageIndex"] is not None:
        source = _source_of_message(projection, estimate["lastUsageIndex"])
        anchor_at = -1
        if source is not None:
            for i in range(len(branch_entries) - 1, -1, -1):  # the anchor is usually recent
                if branch_entries[i] is source:
                    anchor_at = i
                    break
            else:
                anchor_id = field_of(source, "id")
                anchor_at = next((i for i, e in enumerate(branch_entries) if field_of(e, "id") == anchor_id), -1)
        newest_change = -1
        for i in range(len(branch_entries) - 1, anchor_at, -1):  # only whether one follows the anchor
            if field_of(branch_entries[i], "type") in ("context_edit", "compaction"):
                newest_change = i
                break
        if anchor_at > newest_change:
            return estimate
    return pure_estimate(projection.messages)


def pure_estimate(messages: Sequence[Any],
                  estimate: Callable[[Any], int] = estimate_tokens) -> ContextUsageEstimate:
    """The estimate without a usage anchor: the replayed system message plus every other message
    (what `estimate_projected_context_tokens` returns when no anchor is valid). `estimate` may be
    a memoized `estimate_tokens` (the viewer's timeline asks this along a whole branch)."""
    system = get_current_system_message(messages)
    tokens = estimate_tokens(system) if system is not None else 0
    tokens += sum(estimate(m) for m in messages if field_of(m, "role") != "system")
    return {"tokens": tokens, "usageTokens": 0, "trailingTokens": tokens, "lastUsageIndex": None}


def should_compact(context_tokens: float, context_window: float, settings: Any) -> bool:
    """Whether `context_tokens` leaves less than `reserve_tokens` of the window (Pi shouldCompact)."""
    if not settings.enabled:
        return False
    return context_tokens > context_window - settings.reserve_tokens


def estimate_before(path: Sequence[Any], position: int, start: int = 0) -> int | float:
    """`estimate_projected_context_tokens` of what a request at `position` of the root-first
    `path` sees, computed from scratch (the slow, exact way).

    `start` may skip a prefix that cannot matter: everything before the kept part of the newest
    compaction (the fold and the anchor search then see the same entries).
    """
    prefix = list(path[start:position])
    return estimate_projected_context_tokens(project_path(prefix, with_settings=False), prefix)["tokens"]


class _PathView:
    """A growing root-first list of parsed entries as the entry view a `LiveProjection` reads."""

    def __init__(self, path: list[Any]) -> None:
        self.path = path

    def entry(self, index: int) -> Any:
        return self.path[index]

    def types_of(self, positions: list[int]) -> list[Any]:
        return [field_of(self.path[i], "type") for i in positions]

    def ids_of(self, positions: list[int]) -> list[Any]:
        return [field_of(self.path[i], "id") for i in positions]

    def role_of(self, index: int) -> Any:
        return field_of(field_of(self.path[index], "message"), "role")

    def position_of(self, entry_id: Any) -> int | None:
        return None  # never asked: ids_unique() says no, so the projection maps ids itself

    def ids_unique(self) -> bool:
        return False


_CONTENT: Final = frozenset({"message", "custom_message", "branch_summary"})


class BranchEstimate:
    """`estimate_projected_context_tokens` at every point of a walk along a root-first branch,
    in linear total time: `add(entry)` for each entry in order; `tokens()` is then what the
    estimator returns for the projection of the entries added so far (`estimate_before(path,
    len(path))`, which the tests hold it equal to at every request).

    The projection is one `LiveProjection` (`live`), extended with each entry. While no
    compaction or context edit follows the newest usage anchor, the estimate is that anchor's
    usage plus the chars/4 estimates of the messages after it (what `estimate_context_tokens`
    sums). After a compaction or edit, until the next anchor, every usage in the context is
    stale or absent and the estimate is the pure one (`pure_estimate`: the replayed system
    message plus every other message); that sum is kept current from what the projection says
    each entry adds and each edit replaces (a compaction re-sums the folded context), and the
    system message is replayed again only when a system message came or went. Only an edit
    written before its target (which the estimator resolves by positions) runs the estimator
    itself on the prefix.
    """

    def __init__(self) -> None:
        self.path: list[Entry] = []
        self.live = LiveProjection()
        self.live.rebuild(_PathView(self.path), [])
        self._anchor: int | float | None = None  # usage of the newest anchor, None while stale or absent
        self._trailing = 0  # estimates of the messages after the anchor
        self._edit_targets: set[Any] = set()
        self._exotic = False  # an edit came before its target: positions decide, ask the estimator
        self.fold_from = 0  # where the kept part of the newest compaction starts: nothing before matters
        self._others = 0  # pure estimate of the non-system messages of the projection
        self._system_tokens = 0
        self._system_stale = False
        self._seen: dict[int, tuple[Any, int]] = {}  # id(message) -> (message, tokens): each estimated once

    def _estimate(self, message: Any) -> int:
        hit = self._seen.get(id(message))
        if hit is not None and hit[0] is message:  # the object is kept, so its id is not reused
            return hit[1]
        tokens = estimate_tokens(message)
        self._seen[id(message)] = (message, tokens)
        return tokens

    def _sum(self, messages: Iterable[Any], sign: int = 1) -> None:
        for m in messages:
            if field_of(m, "role") == "system":
                self._system_stale = True
            else:
                self._others += sign * self._estimate(m)

    def _pure(self) -> int:
        if self._system_stale:
            system = get_current_system_message(self.live.projection().messages)
            self._system_tokens = estimate_tokens(system) if system is not None else 0
            self._system_stale = False
        return self._system_tokens + self._others

    def tokens(self) -> int | float:
        """The estimator's answer for the context of the entries added so far."""
        if self._anchor is not None:
            return self._anchor + self._trailing
        if self._exotic:
            return estimate_before(self.path, len(self.path), self.fold_from)
        return self._pure()

    def add_message(self, entry: dict[str, Any], message: dict[str, Any], role: Any) -> None:
        """`add` of a `message` entry whose message (an object) and its role the caller has read
        already (most entries of a walk along a branch)."""
        pos = len(self.path)
        self.path.append(entry)
        key = entry.get("id")
        self._take(key, self.live.append_message(entry, pos, key, message, role))

    def _take(self, key: Any, added: list[Any]) -> None:
        """Count the messages that the content entry with id `key` added to the context."""
        if self._edit_targets and hashable(key) and key in self._edit_targets:
            self._sum(added)
            self._anchor = None  # an edit written before its target: let the estimator sort it out
            self._exotic = True
            return
        # The messages this entry adds (no edit applies to it: none targeted it so far), each
        # estimated once and remembered for the re-sums after compactions and edits.
        seen = self._seen
        for m in added:
            tokens = -(-message_chars(m) // 4)  # estimate_tokens
            seen[id(m)] = (m, tokens)
            role = m.get("role") if type(m) is dict else None
            if role == "system":
                self._system_stale = True
                self._trailing += tokens
                continue
            self._others += tokens
            if role == "assistant":  # get_assistant_usage, inline
                usage = m.get("usage")
                if isinstance(usage, dict) and (stop := m.get("stopReason")) != "aborted" and stop != "error":
                    anchor = calculate_context_tokens(usage)
                    if anchor > 0:
                        self._anchor, self._trailing, self._exotic = anchor, 0, False
                        continue
            self._trailing += tokens

    def add(self, entry: Entry) -> None:
        """The next entry of the branch."""
        kind = entry.get("type") if type(entry) is dict else None
        if kind == "message" and type(message := entry.get("message")) is dict:
            self.add_message(entry, message, message.get("role"))
            return
        pos = len(self.path)
        self.path.append(entry)
        live = self.live
        if type(kind) is str and kind in _CONTENT:  # a list or object is no type (Pi: Set.has)
            self._take(entry.get("id"), live.append(entry, pos))
        elif kind == "compaction":
            live.append(entry, pos)
            self._others = 0
            self._system_stale = True  # system messages may have left with the folded part
            self._sum(live.projection().messages)
            self._anchor = None
            key = entry.get("id")
            kept = entry.get("firstKeptEntryId")
            # path_position, not first_position's scan: a long branch with a few compactions
            # scanned its whole path three times per compaction (the map it builds once is kept
            # current per append).
            kept_at = live.path_position(kept) if hashable(kept) else None
            # A compaction whose id repeats an earlier one is folded at that earlier place: start over.
            self.fold_from = min(pos if kept_at is None else kept_at, pos) if live.path_position(key) == pos else 0
        elif kind == "context_edit":
            key = entry.get("id")
            target = entry.get("targetId")
            replaced = live.messages_of(target)
            live.append(entry, pos)
            if key == target:
                self._others = 0
                self._system_stale = True
                self._sum(live.projection().messages)
            else:
                self._sum(replaced, -1)
                self._sum(live.messages_of(target))
            self._anchor = None
            if hashable(target):
                self._edit_targets.add(target)
        else:
            live.append(entry, pos)
