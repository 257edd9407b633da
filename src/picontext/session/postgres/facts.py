"""Listing facts kept on the session row, updated with every append (no listing reads lines).

The rules are the JSONL listing's (session/listing.py): after the header, every object counts as
an entry; `message` entries count as messages; the name is the last `session_info`'s; the first
message is the first user message's text; last activity is the newest user/assistant message
time. `FactsDelta` is what one batch of lines adds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from picontext.session.protocol import account_listing_fact
from picontext.session.records import RawLine


@dataclass(slots=True)
class FactsDelta:
    entry_count: int = 0
    message_count: int = 0
    size: int = 0  # bytes of the lines plus their newlines
    name_set: bool = False
    name: str | None = None
    first_message: str = ""
    last_activity_ms: float = 0.0

    def add(self, value: Any) -> None:
        """Account one parsed non-header value (a dict, a RawLine, or any other JSON value)."""
        if type(value) is RawLine:
            value = value.parse()
        if isinstance(value, dict) and value.get("type") == "session_info":
            self.name_set = True  # the row's name is replaced, even by a blank one
        account_listing_fact(self, value)
