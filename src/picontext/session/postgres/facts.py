"""Listing facts kept on the session row, updated with every append (no listing reads lines).

The rules are the JSONL listing's (session/listing.py): after the header, every object counts as
an entry; `message` entries count as messages; the name is the last `session_info`'s; the first
message is the first user message's text; last activity is the newest user/assistant message
time. `FactsDelta` is what one batch of lines adds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from picontext._clock import js_date_ms
from picontext.ai.types import content_text
from picontext.session.store import RawLine


@dataclass(slots=True)
class FactsDelta:
    entries: int = 0
    messages: int = 0
    size: int = 0  # bytes of the lines plus their newlines
    name_set: bool = False
    name: str | None = None
    first_message: str = ""
    last_activity_ms: float = 0.0

    def add(self, value: Any) -> None:
        """Account one parsed non-header value (a dict, a RawLine, or any other JSON value)."""
        if type(value) is RawLine:
            value = value.parse()
        if not isinstance(value, dict):
            return
        self.entries += 1
        kind = value.get("type")
        if kind == "session_info":
            raw = value.get("name")
            self.name_set = True
            self.name = (raw.strip() or None) if isinstance(raw, str) else None
        elif kind == "message":
            self.messages += 1
            message = value.get("message")
            role = message.get("role") if isinstance(message, dict) else None
            if role in ("user", "assistant"):
                assert isinstance(message, dict)
                ts = message.get("timestamp")
                activity = ts if isinstance(ts, int | float) else js_date_ms(value.get("timestamp"))
                if activity == activity and activity > self.last_activity_ms:
                    self.last_activity_ms = float(activity)
                if role == "user" and not self.first_message:
                    self.first_message = content_text(message.get("content"), " ")
