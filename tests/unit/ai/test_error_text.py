"""Provider error bodies shown to people by their message, on one line."""

from __future__ import annotations

import pytest

from picontext.ai.error_text import readable_error


@pytest.mark.parametrize(("raw", "shown"), [
    # llama-cpp-python's overflow 400, OpenAI's wording
    ('400 {"error":{"message":"This model\'s maximum context length is 2048 tokens. However, you requested '
     '2074 tokens","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}',
     "400 This model's maximum context length is 2048 tokens. However, you requested 2074 tokens"),
    ('Summarization failed: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
     "Summarization failed: 529 Overloaded"),
    ('500 {"detail":"Internal\\nServer Error"}', "500 Internal Server Error"),
    ('503 {"error":"model is loading"}', "503 model is loading"),
    ('422 {"unexpected":true}', '422 {"unexpected":true}'),
    ("400 {not json", "400 {not json"),
    ("first line\nsecond line", "first line"),
    ("", ""),
])
def test_readable_error(raw: str, shown: str) -> None:
    assert readable_error(raw) == shown
