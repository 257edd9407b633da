"""Everything a real server can do wrong reads as one clear line: which server, which event, what."""

from __future__ import annotations

import pytest

from picontext.ai.providers import StreamOptions
from picontext.ai.stream import complete
from picontext.scripted import ScriptedModelServer, http_error, raw_stream

CTX = {"messages": [{"role": "user", "content": "hi", "timestamp": 0}]}
NGINX_500 = (
    "<html>\r\n<head><title>500 Internal Server Error</title></head>\r\n<body>\r\n"
    "<center><h1>500 Internal Server Error</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)


@pytest.mark.parametrize(
    ("api", "payload", "why"),
    [
        ("openai-completions", "not json {", "is not a JSON object"),
        ("openai-completions", "{not json", "is not valid JSON"),
        ("openai-completions", "[1, 2]", "is not a JSON object"),
        ("openai-completions", "0", "is not a JSON object"),
        ("openai-completions", '{"choices": 5}', "wrong type or shape"),
        ("openai-completions", '{"choices": {"a": 1}}', "wrong type or shape (KeyError: 0)"),
        ("openai-completions", '{"choices":[{"index":0,"delta":{"content":5}}]}', "wrong type or shape"),
        ("openai-completions", '{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}],'
                               '"usage":{"prompt_tokens":"ten"}}', "wrong type or shape"),
        ("anthropic-messages", '{"type":"message_start","message":5}', "wrong type or shape"),
        ("openai-responses", '{"type":"response.output_item.added","item":5}', "wrong type or shape"),
        ("google-generative-ai", '{"candidates":[{"content":{"parts":[{"text":5}]}}]}', "wrong type or shape"),
    ],
)
async def test_a_malformed_stream_event_is_one_clear_line(
    server: ScriptedModelServer, api: str, payload: str, why: str
) -> None:
    server.expect(raw_stream(payload))
    msg = await complete(server.model(api), CTX, StreamOptions(api_key="k"))  # type: ignore[arg-type]
    text = msg["errorMessage"]
    assert msg["stopReason"] == "error" and "\n" not in text
    host = server.url.removeprefix("http://")
    assert text.startswith(f"Malformed response from {host}: stream event 1 ") and why in text
    assert " ".join(payload.split())[:40] in text  # the offending payload is shown


async def test_an_html_error_page_is_its_title_on_one_line(server: ScriptedModelServer) -> None:
    server.expect(http_error(500, NGINX_500, content_type="text/html"))
    msg = await complete(server.model("openai-completions"), CTX, StreamOptions(api_key="k"))  # type: ignore[arg-type]
    assert msg["errorMessage"] == "500 (HTML error page) 500 Internal Server Error"


async def test_an_html_page_without_title_keeps_its_text(server: ScriptedModelServer) -> None:
    server.expect(http_error(502, "<html><body><h1>Bad gateway</h1>\n<p>upstream down</p></body></html>"))
    msg = await complete(server.model("openai-completions"), CTX, StreamOptions(api_key="k"))  # type: ignore[arg-type]
    assert msg["errorMessage"] == "502 (HTML error page) Bad gateway upstream down"
