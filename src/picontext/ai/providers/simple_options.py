"""What every provider derives from `StreamOptions` the way Pi's `streamSimple` does.

Ported from pi-ai `api/simple-options.js`, `models.js` (`clampThinkingLevel`),
`utils/estimate.js` (`estimateContextTokens`) and `utils/hash.js` (`shortHash`). Pure.

* The output cap is always sent: `options.max_tokens`, else the model's `maxTokens`, clamped so
  that the estimated context + the cap + a safety margin fit the window (at least 1). The margin
  is Pi's 4096 tokens, but at most an eighth of the window (ours: docs/divergences.md).
* The reasoning level is clamped to what the model supports (`thinkingLevelMap`; a model without
  `reasoning` supports only "off"); "off" or None means reasoning is switched off, which the
  providers send explicitly for reasoning models.
* Budget-based thinking (Anthropic) raises the cap by the budget, up to the model's `maxTokens`.
"""

from __future__ import annotations

import json
import math
from typing import Any

from picontext.ai.models import Model

LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh", "max")
DEFAULT_THINKING_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}
MIN_ANSWER_TOKENS = 1024
CONTEXT_SAFETY_TOKENS = 4096
_IMAGE_CHARS = 4800


def js_length(text: str) -> int:
    """JavaScript `text.length` (UTF-16 code units)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def js_json(value: Any) -> str:
    """`JSON.stringify(value)` for plain JSON values (compact, non-ASCII kept)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# -- thinking levels ------------------------------------------------------------------------------


def level_map(model: Model) -> dict[str, Any]:
    return model.get("thinkingLevelMap") or {}


def supported_thinking_levels(model: Model) -> list[str]:
    if not model["reasoning"]:
        return ["off"]
    mapping = level_map(model)
    out = []
    for level in LEVELS:
        if level in mapping and mapping[level] is None:
            continue
        if level in ("xhigh", "max") and mapping.get(level) is None:
            continue
        out.append(level)
    return out


def clamp_thinking_level(model: Model, level: str) -> str:
    """The nearest supported level: the requested one, else the next higher, else the next lower."""
    available = supported_thinking_levels(model)
    if level in available:
        return level
    if level not in LEVELS:
        return available[0] if available else "off"
    i = LEVELS.index(level)
    for candidate in (*LEVELS[i:], *reversed(LEVELS[:i])):
        if candidate in available:
            return candidate
    return available[0] if available else "off"


def requested_level(reasoning: str | None) -> str | None:
    """The level the caller asked for; "off" counts as not asking (Pi's agent passes undefined)."""
    return None if reasoning in (None, "off") else reasoning


def clamped_effort(model: Model, reasoning: str | None) -> str | None:
    """The clamped level for effort-based APIs, or None when reasoning is off."""
    level = requested_level(reasoning)
    if level is None:
        return None
    clamped = clamp_thinking_level(model, level)
    return None if clamped == "off" else clamped


def clamp_reasoning(level: str) -> str:
    return "high" if level in ("xhigh", "max") else level


def thinking_budget_for_level(level: str, custom: dict[str, int] | None = None) -> int:
    budgets = {**DEFAULT_THINKING_BUDGETS, **(custom or {})}
    return budgets.get(clamp_reasoning(level), DEFAULT_THINKING_BUDGETS["high"])


def clamp_budget_to_answer_room(budget: int, ceiling: int) -> int:
    return min(budget, max(0, ceiling - MIN_ANSWER_TOKENS))


def adjust_max_tokens_for_thinking(
    base_max_tokens: int, model_max_tokens: int, level: str, custom: dict[str, int] | None = None
) -> tuple[int, int]:
    """(max_tokens, thinking budget): the cap is raised by the budget, up to the model's cap."""
    budget = thinking_budget_for_level(level, custom)
    max_tokens = min(base_max_tokens + budget, model_max_tokens)
    if max_tokens <= budget:
        budget = clamp_budget_to_answer_room(budget, max_tokens)
    return max_tokens, budget


# -- the output cap -----------------------------------------------------------------------------------


def _content_chars(content: Any) -> int:
    if isinstance(content, str):
        return js_length(content)
    chars = 0
    for block in content or []:
        if block.get("type") == "text":
            chars += js_length(block.get("text") or "")
        else:
            chars += _IMAGE_CHARS
    return chars


def _system_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    text = (
        content
        if isinstance(content, str)
        else "\n".join(b.get("text", "") for b in content or [] if b.get("type") == "text")
    )
    parts = [text, *(v for v in (message.get("sections") or {}).values() if v is not None)]
    return "\n\n".join(p for p in parts if p)


def _tools_tokens(tools: Any) -> int:
    return math.ceil(js_length(js_json(tools)) / 4) if tools else 0


def estimate_message_tokens(message: dict[str, Any]) -> int:
    role = message.get("role")
    if role == "system":
        return (
            math.ceil(js_length(_system_text(message)) / 4)
            + _tools_tokens(message.get("toolsAdded"))
            + _tools_tokens(message.get("toolsRemoved"))
        )
    if role in ("user", "toolResult"):
        return math.ceil(_content_chars(message.get("content")) / 4)
    if role != "assistant":
        return 0
    chars = 0
    for block in message.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            chars += js_length(block.get("text") or "")
        elif kind == "thinking":
            chars += js_length(block.get("thinking") or "")
        else:
            chars += js_length(block.get("name") or "") + js_length(js_json(block.get("arguments")))
    return math.ceil(chars / 4)


def _context_tokens(usage: dict[str, Any]) -> int:
    return usage.get("totalTokens") or (
        usage.get("input", 0) + usage.get("output", 0) + usage.get("cacheRead", 0) + usage.get("cacheWrite", 0)
    )


def transcript(context: Any) -> list[dict[str, Any]]:
    """The messages with `systemPrompt` and `tools` folded into a leading system message (Pi normalizeContext)."""
    prompt = context.get("systemPrompt") or ""
    tools = context.get("tools") or []
    messages = list(context.get("messages") or [])
    if not prompt and not tools:
        return messages
    first: dict[str, Any] = {"role": "system", "content": prompt, "timestamp": 0}
    if tools:
        first["toolsAdded"] = tools
    return [first, *messages]


def estimate_context_tokens(context: Any) -> int:
    """Usage of the newest usable assistant message plus chars/4 of what follows it."""
    messages = transcript(context)
    latest_prefix = -math.inf
    anchor: int | None = None
    for i, msg in enumerate(messages):
        if msg.get("role") == "assistant":
            usage = msg.get("usage") or {}
            if (
                (msg.get("timestamp") or 0) >= latest_prefix
                and msg.get("stopReason") not in ("aborted", "error")
                and _context_tokens(usage) > 0
            ):
                anchor = i
        latest_prefix = max(latest_prefix, msg.get("timestamp") or 0)
    if anchor is not None:
        return _context_tokens(messages[anchor].get("usage") or {}) + sum(
            estimate_message_tokens(m) for m in messages[anchor + 1 :]
        )
    return sum(estimate_message_tokens(m) for m in messages)


def context_safety_tokens(context_window: int) -> int:
    """Tokens kept free beside the estimate: Pi's 4096, but at most an eighth of the window.

    Pi's constant leaves a window of 4096 or less no output at all (every cap becomes 1) and an
    8192 window none once the context passes half of it, so a small local model could neither
    answer nor write a summary; from a 32768 window up the margin is Pi's.
    """
    return min(CONTEXT_SAFETY_TOKENS, math.ceil(context_window / 8))


def clamp_max_tokens_to_context(model: Model, context: Any, max_tokens: int) -> int:
    if model["contextWindow"] <= 0:
        return max(1, max_tokens)
    window = model["contextWindow"]
    available = window - estimate_context_tokens(context) - context_safety_tokens(window)
    return min(max_tokens, max(1, available))


def base_max_tokens(model: Model, context: Any, max_tokens: int | None) -> int:
    """The cap every request carries: the caller's or the model's, fitted to the context window."""
    return clamp_max_tokens_to_context(model, context, model["maxTokens"] if max_tokens is None else max_tokens)


# -- ids ----------------------------------------------------------------------------------------------


def _imul(a: int, b: int) -> int:
    r = (a * b) & 0xFFFFFFFF
    return r - 0x100000000 if r & 0x80000000 else r


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def short_hash(text: str) -> str:
    """Pi `shortHash` (cyrb53-style over UTF-16 code units)."""
    h1, h2 = 0xDEADBEEF, 0x41C6CE57
    units = text.encode("utf-16-le", "surrogatepass")
    for k in range(0, len(units), 2):
        ch = units[k] | (units[k + 1] << 8)
        h1 = _imul(h1 ^ ch, 2654435761)
        h2 = _imul(h2 ^ ch, 1597334677)
    h1 = _imul(h1 ^ ((h1 & 0xFFFFFFFF) >> 16), 2246822507) ^ _imul(h2 ^ ((h2 & 0xFFFFFFFF) >> 13), 3266489909)
    h2 = _imul(h2 ^ ((h2 & 0xFFFFFFFF) >> 16), 2246822507) ^ _imul(h1 ^ ((h1 & 0xFFFFFFFF) >> 13), 3266489909)
    return _base36(h2 & 0xFFFFFFFF) + _base36(h1 & 0xFFFFFFFF)
