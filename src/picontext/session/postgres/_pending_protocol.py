"""TEMPORARY: the shapes of the issue-8 `SessionStore` protocol (session/protocol.py) until that
branch is merged; replaced by imports from picontext.session.protocol at the merge."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, fields
from typing import Any

from picontext.session import store as _store


@dataclass(frozen=True, slots=True)
class Tail:
    generation: Hashable
    offset: int


@dataclass(slots=True)
class LoadResult(_store.LoadResult):
    tail: Tail | None = None


@dataclass(slots=True)
class ListingFacts:
    header: dict[str, Any]
    name: str | None = None
    message_count: int = 0
    entry_count: int = 0
    first_message: str = ""
    last_activity_ms: float = 0.0
    size: int = 0
    modified_ms: float = 0.0


def _wrap(base: _store.LoadResult) -> LoadResult:
    return LoadResult(**{f.name: getattr(base, f.name) for f in fields(_store.LoadResult)})


def parse_session_bytes(lines: list[bytes], *, lazy: bool = False) -> LoadResult:
    return _wrap(_store.parse_session_bytes(lines, lazy=lazy))


def parse_session_lines(lines: list[bytes], *, first_line: int, lazy: bool = False) -> LoadResult:
    base = _store.LoadResult()
    if lazy:
        _store._parse_rest_lazily(lines, 0, base)
    else:
        _store._parse_full(lines, 0, base)
    for s in base.skipped:
        s.line += first_line - 1
    return _wrap(base)
