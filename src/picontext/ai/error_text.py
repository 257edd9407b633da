"""Provider errors as people read them (stored messages and JSON output keep the verbatim text)."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["readable_error"]

_STATUS_JSON = re.compile(r"\b(\d{3}) (\{.*\})")


def readable_error(text: str) -> str:
    """An error message for people: its first line, with a `<status> <JSON body>` part shown as
    `<status> <the body's message>` (OpenAI, Anthropic, llama.cpp and FastAPI put it in
    `error.message`, `error`, `message` or `detail`). Stored messages and JSON output keep the
    verbatim body, which overflow and retry classification read."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    found = _STATUS_JSON.search(line)
    if found is None:
        return line
    try:
        body = json.loads(found.group(2))
    except ValueError:
        return line
    message = _body_message(body)
    return f"{line[:found.start(2)]}{message}{line[found.end(2):]}" if message else line


def _body_message(body: Any) -> str | None:
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if isinstance(error, dict):
        error = error.get("message")
    for value in (error, body.get("message"), body.get("detail")):
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())
    return None
