"""One module per wire API: a pure `build_request()`, a pure SSE parser, and `stream_<api>()`.

`transform.py` holds the cross-provider message normalisation; `_base.py` the shared driver.
"""

from __future__ import annotations

from picontext.ai.providers._base import Context, StreamOptions, parse_events, parse_streaming_json
from picontext.ai.providers.anthropic_messages import stream_anthropic_messages
from picontext.ai.providers.google_gemini import stream_google_gemini
from picontext.ai.providers.openai_completions import stream_openai_completions
from picontext.ai.providers.openai_responses import stream_openai_responses

__all__ = [
    "Context",
    "StreamOptions",
    "parse_events",
    "parse_streaming_json",
    "stream_anthropic_messages",
    "stream_google_gemini",
    "stream_openai_completions",
    "stream_openai_responses",
]
