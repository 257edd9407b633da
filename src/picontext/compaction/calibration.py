"""Learning how far chars/4 is from a model's real tokenizer, from the usage it reports.

Pi (and picontext with `compaction.calibrateTokens` off) sizes the context as "the last reported
usage + chars/4 of every message after it". chars/4 is off by up to 1.5x on numeric text and
dense JSON, so the threshold fires too early or too late. When the provider reports usage on two
consecutive replies of the same model, the difference between the two reports is what the
messages between them really cost; their chars/4 estimate is known too. Their ratio, over the
newest samples, is the correction for that model:

    sample    = (reported_k2 - reported_k1, chars/4 of the messages k1+1 .. k2)
    ratio     = Σ reported deltas / Σ estimated deltas   over the newest `WINDOW` samples of the model
    estimate  = usage_k + ratio x chars/4(trailing)       (only the part after the last usage)

Tokenizers disagree with chars/4 most on dense text: digits, punctuation, hex, symbols, which
cost about one token per character (4x chars/4; SmolLM2 counts every digit), while words cost
fewer. A session mixes numeric tool output with prose and code, so one ratio swings with
whatever the last messages were. Each estimate is therefore split into its dense share (every
character but whitespace and letters in words of three or more letters) and the rest, and when
the samples vary enough in that share (the two columns are not nearly proportional), two ratios
are fitted by least squares:

    reported delta ~ dense_ratio x chars/4(dense) + word_ratio x chars/4(the rest)

each clamped to [`MIN_RATIO`, `MAX_CLASS_RATIO`]. Otherwise both are the single ratio above.

The system prompt and the tool declarations are a part of their own: a server may render them
very differently from their chars/4 (llama-cpp-python's chat template drops the tool schemas:
picontext's system message, 774 tokens by chars/4, is ~300 real tokens there). Every anchored
estimate contains that part inside the reported usage, so it only matters when there is no valid
anchor (after a compaction or an edit). For that case the first reply of the model on the branch
tells what it cost:

    fixed     = (prompt tokens of the first request - ratio x chars/4 of its other messages)
                / chars/4 of its system message       (clamped like the ratio)
    estimate  = fixed x chars/4(system) + ratio x chars/4(the rest)        (no valid anchor)

Bounds (documented in docs/compaction.md): only samples whose estimated delta is at least
`MIN_SAMPLE_TOKENS` count (small deltas are noise), and none whose reports shrank; the ratio is
clamped to [`MIN_RATIO`, `MAX_RATIO`]; with no sample the ratio is 1 (Pi's estimate). Everything
is computed from the messages themselves, so a reopened session calibrates identically. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from picontext.compaction.tokens import (
    ContextUsageEstimate,
    calculate_context_tokens,
    estimate_projected_context_tokens,
    estimate_tokens,
    get_assistant_usage,
    message_chars,
)
from picontext.session.projection import field_of
from picontext.session.system_prompt import get_current_system_message

__all__ = [
    "MAX_RATIO",
    "MIN_RATIO",
    "MIN_SAMPLE_TOKENS",
    "WINDOW",
    "Ratios",
    "Sample",
    "accuracy",
    "calibrated_projected_tokens",
    "calibrated_tokens",
    "dense_tokens",
    "learn_fixed_ratio",
    "learn_ratio",
    "learn_ratios",
    "samples",
    "summarize_accuracy",
]

MIN_RATIO: Final = 0.25
MAX_RATIO: Final = 4.0
MIN_SAMPLE_TOKENS: Final = 50
WINDOW: Final = 8


@dataclass(frozen=True, slots=True)
class Sample:
    """One pair of consecutive usage anchors of the same model.

    `index` is the second anchor's message index; `previous` its predecessor's reported tokens;
    `estimated` chars/4 of the messages in between (the second anchor included); `reported` the
    second anchor's reported tokens.
    """

    index: int
    model: str
    previous: int
    estimated: int
    reported: int
    dense: float = 0.0
    """The share of `estimated` that comes from dense characters (see the module doc)."""

    @property
    def reported_delta(self) -> int:
        return self.reported - self.previous


def _model_of(message: Any) -> str:
    return f"{message.get('provider')}/{message.get('model')}"


_WORDS_AND_SPACE = re.compile(r"[A-Za-z]{3,}|\s+")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def dense_tokens(message: Any) -> float:
    """The part of `estimate_tokens(message)` that dense characters account for."""
    chars = message_chars(message)
    if chars <= 0 or not isinstance(message, dict):
        return 0.0
    dense = 0
    for key in ("content", "summary", "command", "output", "toolsAdded"):
        for text in _strings(message.get(key)):
            dense += len(text) - sum(len(m) for m in _WORDS_AND_SPACE.findall(text))
    return estimate_tokens(message) * min(1.0, dense / chars)


def samples(messages: Sequence[Any]) -> list[Sample]:
    """Every consecutive same-model anchor pair of `messages` (a projection's messages), in order."""
    out: list[Sample] = []
    previous: tuple[str, int] | None = None
    trailing = 0
    dense = 0.0
    for index, message in enumerate(messages):
        trailing += estimate_tokens(message)
        dense += dense_tokens(message)
        usage = get_assistant_usage(message) if isinstance(message, dict) else None
        if usage is None:
            continue
        reported = int(calculate_context_tokens(usage))
        model = _model_of(message)
        if previous is not None and previous[0] == model:
            out.append(Sample(index, model, previous[1], trailing, reported, dense))
        previous, trailing, dense = (model, reported), 0, 0.0
    return out


@dataclass(frozen=True, slots=True)
class Ratios:
    """Reported tokens per chars/4 token, for dense characters and for words."""

    dense: float = 1.0
    words: float = 1.0

    def apply(self, estimated: float, dense: float) -> int:
        """Tokens for an estimate of which `dense` came from dense characters."""
        return round(self.dense * dense + self.words * (estimated - dense))


COLLINEAR: Final = 0.9
"""Above this squared correlation between the dense and the word columns, one ratio is used."""
MAX_CLASS_RATIO: Final = 6.0
"""Dense text is about one token per character, ratio 4; the bound leaves room for noise."""


def _usable(history: Sequence[Sample], model: str | None) -> list[Sample]:
    # A pair whose reports shrank straddles a compaction or an edit (the first report is stale).
    usable = [s for s in history if (model is None or s.model == model) and s.estimated >= MIN_SAMPLE_TOKENS
              and s.reported_delta >= 0]
    return usable[-WINDOW:]


def learn_ratios(history: Sequence[Sample], model: str | None = None) -> Ratios:
    """The dense and word ratios over the newest `WINDOW` usable samples (see the module doc)."""
    usable = _usable(history, model)
    single = learn_ratio(history, model)
    if len(usable) < 2:
        return Ratios(single, single)
    d = [s.dense for s in usable]
    o = [s.estimated - s.dense for s in usable]
    y = [s.reported_delta for s in usable]
    sdd, soo, sdo = sum(v * v for v in d), sum(v * v for v in o), sum(a * b for a, b in zip(d, o, strict=True))
    if sdd <= 0 or soo <= 0 or sdo * sdo > COLLINEAR * sdd * soo:
        return Ratios(single, single)
    sdy, soy = sum(a * b for a, b in zip(d, y, strict=True)), sum(a * b for a, b in zip(o, y, strict=True))
    det = sdd * soo - sdo * sdo
    dense, words = (sdy * soo - soy * sdo) / det, (soy * sdd - sdy * sdo) / det
    return Ratios(min(MAX_CLASS_RATIO, max(MIN_RATIO, dense)), min(MAX_CLASS_RATIO, max(MIN_RATIO, words)))


def learn_ratio(history: Sequence[Sample], model: str | None = None) -> float:
    """reported/estimated over the newest `WINDOW` usable samples (of `model` when given), clamped."""
    usable = _usable(history, model)
    estimated = sum(s.estimated for s in usable)
    if not usable or estimated <= 0:
        return 1.0
    ratio = sum(s.reported_delta for s in usable) / estimated
    return min(MAX_RATIO, max(MIN_RATIO, ratio))


def _clamp(ratio: float) -> float:
    return min(MAX_RATIO, max(MIN_RATIO, ratio))


def learn_fixed_ratio(branch_entries: Sequence[Any], ratios: Ratios, model: str | None) -> float | None:
    """reported/estimated for the system message (prompt + tool declarations), from the branch's
    first reply when `model` wrote it and reported usage; None when there is nothing to learn."""
    seen: list[Any] = []
    rest = 0
    rest_dense = 0.0
    for entry in branch_entries:
        if field_of(entry, "type") != "message":
            continue
        message = entry.get("message")
        if not isinstance(message, dict):
            continue
        if message.get("role") == "assistant":
            usage = get_assistant_usage(message)
            if usage is None or (model is not None and _model_of(message) != model):
                return None
            prompt = sum(int(usage.get(k) or 0) for k in ("input", "cacheRead", "cacheWrite"))
            system = get_current_system_message(seen)
            estimated = estimate_tokens(system) if system is not None else 0
            if estimated < MIN_SAMPLE_TOKENS or prompt <= 0:
                return None
            return _clamp((prompt - ratios.apply(rest, rest_dense)) / estimated)
        seen.append(message)
        if message.get("role") != "system":
            rest += estimate_tokens(message)
            rest_dense += dense_tokens(message)
    return None


def calibrated_tokens(usage_tokens: int, trailing_tokens: int, ratio: float) -> int:
    """The context size with the trailing (estimated) part corrected by `ratio`."""
    return usage_tokens + round(trailing_tokens * ratio)


def calibrated_projected_tokens(projection: Any, branch_entries: Sequence[Any], model: str | None
                                ) -> ContextUsageEstimate:
    """`estimate_projected_context_tokens` with its estimated (trailing) part corrected by the
    ratio learned for `model` ("provider/id") from the projection's own usage reports."""
    estimate = estimate_projected_context_tokens(projection, branch_entries)
    messages = projection.messages
    ratios = learn_ratios(samples(messages), model)
    index = estimate["lastUsageIndex"]
    if index is None:  # no valid anchor: the system part by its own ratio when it can be learned
        system = get_current_system_message(messages)
        rest = [m for m in messages if field_of(m, "role") != "system"]
        system_tokens = estimate_tokens(system) if system is not None else 0
        fixed = learn_fixed_ratio(branch_entries, ratios, model)
        if fixed is None and ratios == Ratios():
            return estimate
        system_part = round(system_tokens * fixed) if fixed is not None else ratios.apply(
            system_tokens, dense_tokens(system) if system is not None else 0.0)
        tokens = system_part + ratios.apply(estimate["tokens"] - system_tokens, sum(map(dense_tokens, rest)))
        return {**estimate, "tokens": tokens, "trailingTokens": tokens}
    if ratios == Ratios():
        return estimate
    trailing = ratios.apply(estimate["trailingTokens"], sum(map(dense_tokens, messages[index + 1:])))
    return {**estimate, "tokens": estimate["usageTokens"] + trailing, "trailingTokens": trailing}


def accuracy(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """For every sample: what chars/4 predicted, what the ratio learned from the earlier samples
    predicted, and what the provider reported (the `picontext tokens --accuracy` rows).

    Each prediction uses only what was known before that request: no sample predicts itself.
    """
    history = samples(messages)
    rows: list[dict[str, Any]] = []
    for i, sample in enumerate(history):
        ratio = learn_ratio(history[:i], sample.model)
        ratios = learn_ratios(history[:i], sample.model)
        plain = sample.previous + sample.estimated
        calibrated = sample.previous + ratios.apply(sample.estimated, sample.dense)
        rows.append({
            "index": sample.index, "model": sample.model, "reported": sample.reported,
            "estimate": plain, "calibrated": calibrated, "ratio": round(ratio, 4),
            "denseRatio": round(ratios.dense, 4), "wordRatio": round(ratios.words, 4),
            "error": _error(plain, sample.reported), "calibratedError": _error(calibrated, sample.reported),
            "trailingError": _error(sample.estimated, sample.reported_delta),
            "calibratedTrailingError": _error(calibrated - sample.previous, sample.reported_delta),
        })
    return rows


def summarize_accuracy(rows: Sequence[dict[str, Any]], tolerance: float = 0.15) -> dict[str, Any]:
    """Counts within `tolerance` and median absolute errors, for chars/4 and calibrated."""
    def median(key: str) -> float:
        values = sorted(abs(r[key]) for r in rows)
        return values[len(values) // 2] if values else 0.0

    return {
        "samples": len(rows), "tolerance": tolerance,
        "within": sum(abs(r["error"]) <= tolerance for r in rows),
        "calibratedWithin": sum(abs(r["calibratedError"]) <= tolerance for r in rows),
        "medianError": median("error"), "medianCalibratedError": median("calibratedError"),
        "medianTrailingError": median("trailingError"),
        "medianCalibratedTrailingError": median("calibratedTrailingError"),
    }


def _error(predicted: int, reported: int) -> float:
    return round((predicted - reported) / reported, 4) if reported > 0 else 0.0
