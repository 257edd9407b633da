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

Bounds (documented in docs/compaction.md): only samples whose estimated delta is at least
`MIN_SAMPLE_TOKENS` count (small deltas are noise); the ratio is clamped to
[`MIN_RATIO`, `MAX_RATIO`]; with no sample the ratio is 1 (Pi's estimate). Everything is computed
from the messages themselves, so a reopened session calibrates identically. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from picontext.compaction.tokens import (
    ContextUsageEstimate,
    calculate_context_tokens,
    estimate_projected_context_tokens,
    estimate_tokens,
    get_assistant_usage,
)

__all__ = [
    "MAX_RATIO", "MIN_RATIO", "MIN_SAMPLE_TOKENS", "WINDOW", "Sample", "accuracy", "calibrated_projected_tokens",
    "calibrated_tokens", "learn_ratio", "samples", "summarize_accuracy",
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

    @property
    def reported_delta(self) -> int:
        return self.reported - self.previous


def _model_of(message: Any) -> str:
    return f"{message.get('provider')}/{message.get('model')}"


def samples(messages: Sequence[Any]) -> list[Sample]:
    """Every consecutive same-model anchor pair of `messages` (a projection's messages), in order."""
    out: list[Sample] = []
    previous: tuple[str, int] | None = None
    trailing = 0
    for index, message in enumerate(messages):
        trailing += estimate_tokens(message)
        usage = get_assistant_usage(message) if isinstance(message, dict) else None
        if usage is None:
            continue
        reported = int(calculate_context_tokens(usage))
        model = _model_of(message)
        if previous is not None and previous[0] == model:
            out.append(Sample(index, model, previous[1], trailing, reported))
        previous, trailing = (model, reported), 0
    return out


def learn_ratio(history: Sequence[Sample], model: str | None = None) -> float:
    """reported/estimated over the newest `WINDOW` usable samples (of `model` when given), clamped."""
    usable = [s for s in history if (model is None or s.model == model) and s.estimated >= MIN_SAMPLE_TOKENS]
    usable = usable[-WINDOW:]
    estimated = sum(s.estimated for s in usable)
    if not usable or estimated <= 0:
        return 1.0
    ratio = sum(s.reported_delta for s in usable) / estimated
    return min(MAX_RATIO, max(MIN_RATIO, ratio))


def calibrated_tokens(usage_tokens: int, trailing_tokens: int, ratio: float) -> int:
    """The context size with the trailing (estimated) part corrected by `ratio`."""
    return usage_tokens + round(trailing_tokens * ratio)


def calibrated_projected_tokens(projection: Any, branch_entries: Sequence[Any], model: str | None
                                ) -> ContextUsageEstimate:
    """`estimate_projected_context_tokens` with its estimated (trailing) part corrected by the
    ratio learned for `model` ("provider/id") from the projection's own usage reports."""
    estimate = estimate_projected_context_tokens(projection, branch_entries)
    ratio = learn_ratio(samples(projection.messages), model)
    if ratio == 1.0:
        return estimate
    trailing = round(estimate["trailingTokens"] * ratio)
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
        plain = sample.previous + sample.estimated
        calibrated = calibrated_tokens(sample.previous, sample.estimated, ratio)
        rows.append({
            "index": sample.index, "model": sample.model, "reported": sample.reported,
            "estimate": plain, "calibrated": calibrated, "ratio": round(ratio, 4),
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
