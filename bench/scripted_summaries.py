"""What the compaction benchmarks share: telling a summary request from the conversation's, and
a scripted reply streamed over a given time."""

from __future__ import annotations

import json

from picontext.testing.model_server import RecordedRequest, Reply, frames_openai_completions

SUMMARY_MARK = "hand-off notes"  # in the summarizer's system prompt only


def is_summary(req: RecordedRequest) -> bool:
    """The summarizer's system prompt is the first message (cheap: the bodies grow large)."""
    messages = req.body.get("messages") or [{}] if isinstance(req.body, dict) else [{}]
    return SUMMARY_MARK in json.dumps(messages[0])


def paced(step: Reply, seconds: float) -> Reply:
    """`step` streamed over ~`seconds`: the delay spread over its frames."""
    frames = len(frames_openai_completions(step, "m"))
    return step.slow(seconds / max(1, frames - 1))
