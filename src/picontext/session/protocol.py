"""`SessionStore`: the one seam between a session and where its records live.

Every writer goes through it — the agent's `SessionManager`, `picontext compact` (all
strategies), legacy migrations, forks — and no module outside a store opens, stats or locks
the storage itself. `JsonlSessionStore` (`store.py`) keeps a session in one Pi-compatible JSONL
file; a database store (PostgreSQL) implements the same protocol.

The contract, in the words a second implementation needs:

* **Records** are JSON values in append order; the first valid one is the session header
  (`{"type": "session", ...}`). Records are never modified or removed, only appended; a whole
  log may be replaced atomically (`replace`, used by legacy upgrades).
* **Tail**: an opaque position, "the log as I last saw it". Every read and write returns the tail
  after it. `append(records, expect=tail)` is all-or-nothing and refuses with
  `StaleSessionError` when the log no longer ends at `tail` (another writer appended, or the log
  was replaced): two writers can never silently fork the tree. `expect=None` appends
  unconditionally (the caller has decided that a fork is what it wants).
* **Incremental read**: `read_since(tail)` returns only what was appended after `tail`
  (how the JSONL store picks up lines Pi appended), or None when the log does not extend `tail`
  any more (replaced or truncated: the caller reloads).
* **Writer section**: `writer()` (threads, CLI) and `awriter()` (asyncio: waiting never blocks the
  event loop) hold the session exclusively against other writers; both yield the current tail.
  Appends made by the holder inside the section do not wait for it again. `try_writer()` is the
  same section without the wait: while another writer holds it, `SessionLockedError` at once
  (what synchronous code running on an event loop uses, e.g. `AgentSession`'s constructor).
* **Listing facts** (`facts()`): header, name, message and entry counts, first user message, last
  activity, so listing never has to read a whole session.
* `location` names the session in messages (a path, a URL); callers never interpret it.

Errors: `SessionFormatError` for what is not a session (including storage that is not a regular
file: FIFO, device, directory, refused before it is opened), `SessionWriteError` when storage
refused a write (nothing of the batch is kept), `SessionLockedError` when the writer section
could not be had in time, `StaleSessionError` as above.
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from picontext._clock import js_date_ms
from picontext.errors import StaleSessionError

__all__ = [
    "ColumnsOutdated",
    "ListingFacts",
    "LoadResult",
    "SessionHome",
    "SessionStore",
    "SkippedLine",
    "StaleSessionError",
    "Tail",
]


@dataclass(frozen=True, slots=True)
class Tail:
    """Where a session's log ends, as the store saw it. Opaque: compare, keep, pass back.

    `generation` changes when the log is replaced as a whole (JSONL: the file's device and
    inode; a database: the session row's version); `offset` grows with every append (JSONL:
    bytes; a database: records). Two tails are the same position exactly when they are equal.
    """

    generation: Hashable
    offset: int


@dataclass(slots=True)
class SkippedLine:
    line: int  # 1-based record number (JSONL: line number in the file)
    reason: str
    torn: bool = False  # the unterminated last line: most likely a write cut short by a crash


@dataclass(slots=True)
class LoadResult:
    """What a read returned: parsed records in order (header first on a full load), skips, tail."""

    entries: list[Any] = field(default_factory=list)
    skipped: list[SkippedLine] = field(default_factory=list)
    missing_newline: bool = False  # JSONL: the file does not end with "\n"
    valid: bool = False  # first parsed value is a header with a string id
    size: int = 0  # bytes read (0 for an empty or missing session)
    tail: Tail | None = None  # position after the last record read; None when nothing exists
    notices: list[str] = field(default_factory=list)  # other things the reader had to work around

    def warnings(self, location: str) -> list[str]:
        out = [f"{location}: {notice}" for notice in self.notices]
        for s in self.skipped:
            what = "torn last line (incomplete write?)" if s.torn else "unreadable line"
            out.append(f"{location}:{s.line}: {what} skipped: {s.reason}")
        return out


@dataclass(slots=True)
class ListingFacts:
    """What a session picker shows, without the session's bodies. Times in ms since the epoch."""

    header: dict[str, Any]
    name: str | None = None  # from the last session_info entry
    message_count: int = 0
    entry_count: int = 0  # non-header records that are objects
    first_message: str = ""  # text of the first user message ("" when none)
    last_activity_ms: float = 0.0  # newest user/assistant message time (0 when none)
    size: int = 0  # bytes (JSONL) or an equivalent measure
    modified_ms: float = 0.0  # storage modification time


def account_listing_fact(facts: Any, value: Any) -> None:
    """Add one non-header record to `facts` (a `ListingFacts` or any object with its counting
    fields), by Pi's listing rules: objects count as entries, `message` entries as messages; the
    name is the last `session_info`'s; the first message is the first user message's text; last
    activity is the newest user/assistant message time (its own numeric timestamp, else the
    entry's). One rule for every store, so JSONL and PostgreSQL listings cannot drift apart."""
    if not isinstance(value, dict):
        return
    facts.entry_count += 1
    kind = value.get("type")
    if kind == "session_info":
        raw_name = value.get("name")
        facts.name = raw_name.strip() or None if isinstance(raw_name, str) else None
    elif kind == "message":
        facts.message_count += 1
        message = value.get("message")
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant"):
            return
        assert isinstance(message, dict)
        ts = message.get("timestamp")
        if isinstance(ts, int | float) and not isinstance(ts, bool):  # typeof ts === "number"
            activity = float(ts)
        else:
            activity = float(js_date_ms(value.get("timestamp")))
        if activity == activity and activity > facts.last_activity_ms:  # NaN never wins
            facts.last_activity_ms = activity
        if role == "user" and not facts.first_message:
            from picontext.ai.types import content_text  # lazily: listing runs at CLI start-up

            facts.first_message = content_text(message.get("content"), " ")


@runtime_checkable
class SessionStore(Protocol):
    """Where one session's records live; see the module docstring for the contract."""

    @property
    def location(self) -> str: ...

    def exists(self) -> bool:
        """True when the session exists (even if empty or not a valid session)."""
        ...

    def tail(self) -> Tail | None:
        """The current tail, cheaply (JSONL: one stat); None when the session does not exist."""
        ...

    def load(self, *, lazy: bool = False) -> LoadResult:
        """Every record (header first). With `lazy`, bulky records may come back as
        `store.RawLine` (id, parent, type known; body parsed on first use)."""
        ...

    def read_since(self, tail: Tail, *, lazy: bool = False) -> LoadResult | None:
        """Records appended after `tail` (complete records only), or None when the log no longer
        extends `tail` (replaced, truncated): reload then."""
        ...

    def read_header(self) -> dict[str, Any] | None:
        """The header when the first record is one, reading as little as possible."""
        ...

    def facts(self) -> ListingFacts | None:
        """Listing facts, or None when this is not a session."""
        ...

    def append(self, entries: list[Any], *, expect: Tail | None = None) -> Tail:
        """Append all of `entries` or none; refuse with StaleSessionError unless the log still
        ends at `expect` (when given). A vanished session raises SessionWriteError(missing=True)
        and is not recreated."""
        ...

    def create(self, file_entries: list[Any]) -> Tail:
        """Write a brand-new session (header first); FileExistsError when it already exists."""
        ...

    def replace(self, file_entries: list[Any], *, backup_suffix: str | None = None) -> Tail:
        """Atomically replace the whole log; with `backup_suffix`, keep the previous content under
        that tag (JSONL: `<file><suffix>`) unless such a backup exists already."""
        ...

    def writer(self) -> contextlib.AbstractContextManager[Tail | None]:
        """Exclusive writer section for threads; waits (bounded) for other writers."""
        ...

    def awriter(self) -> contextlib.AbstractAsyncContextManager[Tail | None]:
        """Exclusive writer section for asyncio: waiting yields to the event loop."""
        ...

    def try_writer(self) -> contextlib.AbstractContextManager[Tail | None]:
        """The writer section if no other writer holds it now, else SessionLockedError on entering
        (never waits). Reentrant like `writer()`."""
        ...


class ColumnsOutdated(Exception):
    """A store's entry columns no longer describe its session (it changed under them while they
    were used): read the session again."""


@runtime_checkable
class SessionHome(Protocol):
    """Where a new session goes: a directory of session files, or a repository
    (`picontext.session.repository`). `place` gives the store of the new session `session_id`
    (created `timestamp`, for `cwd`) and its file when that store is one (else None); nothing is
    written until the session's first write."""

    def place(self, cwd: str, session_id: str, timestamp: str) -> tuple[SessionStore, str | None]: ...
