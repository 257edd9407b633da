"""Writing one session's entries through its `SessionStore`, with Pi's persistence rules.

`SessionWriter` owns the store handle and the tail the session last saw, and decides *how* an
appended entry reaches storage:

* Pi's lazy first flush: a new session is written (whole, `store.create`) only once it holds an
  assistant message; before that, entries stay in memory;
* a legacy (v1/v2) file is upgraded atomically at its first append, under the writer section,
  from what is on disk then;
* appends pass the tail they expect; when another writer got in first, a strict section
  (compaction) refuses, otherwise the foreign entries are taken into the index (`catch_up`);
* a vanished file is written back whole (Pi would write a headerless fragment).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from picontext.errors import SessionFormatError, SessionLockedError, SessionWriteError, StaleSessionError
from picontext.session.index import EntryIndex, id_of
from picontext.session.migrations import CURRENT_SESSION_VERSION, file_version, migrate_to_current
from picontext.session.projection import field_of
from picontext.session.protocol import SessionStore, Tail
from picontext.session.records import RawLine

APP_NAME = "pi"  # the reference's error text names its app; scripts match on it


class SessionWriter:
    """Persistence of one session (see the module docstring)."""

    def __init__(self, warn: Callable[[str], None]) -> None:
        self._warn = warn
        self.store: SessionStore | None = None
        self.tail: Tail | None = None  # where the log ended after our last read or write
        self.flushed = False
        self.pending_upgrade: float | None = None  # legacy version awaiting an atomic upgrade
        self._expect_tail = True  # appends refuse to fork silently (cleared while catching up)
        self._sections: list[bool] = []  # exclusive() sections entered; True = strict

    def bind(self, store: SessionStore | None, *, tail: Tail | None = None, flushed: bool = False) -> None:
        self.store = store
        self.tail = tail
        self.flushed = flushed
        self.pending_upgrade = None

    @property
    def strict(self) -> bool:
        return bool(self._sections) and self._sections[-1]

    # ------------------------------------------------------------------ writing

    def persist(self, entries: list[dict[str, Any]], index: EntryIndex) -> None:
        """Persist `entries` (already added to `index`) all or none, by Pi's lazy-flush rule."""
        store = self.store
        if store is None:
            return
        if not index.has_assistant_message():
            if self.flushed:
                self._write(store, entries, index)
            return
        if not self.flushed:
            try:
                self.tail = store.create(index.file_entries)
            except FileExistsError:
                self.tail = self._join(store, index)
            self.flushed = True
            self.pending_upgrade = None
        else:
            self._write(store, entries, index)

    def _join(self, store: SessionStore, index: EntryIndex) -> Tail:
        """`create` found the session already stored. Either another process created the same
        new session first (two `-p --session NEW` runs at once): ours joins it as a second root
        of its tree; or it is our own create, whose answer was lost (a broken connection at
        COMMIT, a failed directory fsync after the link) although it was stored. Either way only
        the entries whose ids are not stored yet are appended, after the tail just read, so no
        entry is ever stored twice."""
        for _attempt in range(5):
            current = store.load(lazy=True)
            stored = {id_of(e) for e in current.entries}
            stored.discard(None)
            missing = [e for e in index.file_entries
                       if field_of(e, "type") != "session" and id_of(e) not in stored]
            if not missing:
                if current.tail is None:
                    raise SessionWriteError(f"Session disappeared: {store.location}", missing=True)
                return current.tail
            try:
                return store.append(missing, expect=current.tail)
            except StaleSessionError:
                continue  # somebody appended between the read and the append: read again
        raise StaleSessionError(f"{store.location} keeps changing while this session joins it; nothing was "
                                "appended: retry")

    def write_whole(self, index: EntryIndex) -> None:
        """Write the session as a new file now (used for a session that exists as a file)."""
        if self.store is not None:
            self.tail = self.store.create(index.file_entries)
            self.flushed = True

    def replace_whole(self, index: EntryIndex) -> None:
        if self.store is not None:
            self.tail = self.store.replace(index.file_entries)
            self.flushed = True

    def _write(self, store: SessionStore, entries: list[Any], index: EntryIndex) -> None:
        if self.pending_upgrade is not None:
            self._upgrade_and_append(store, entries)
            return
        try:
            self.tail = store.append(entries, expect=self.tail if self._expect_tail else None)
        except SessionWriteError as exc:
            if not exc.missing:
                raise
            # Pi recreates a vanished file without its header; we write the whole session back.
            self.tail = store.replace(index.file_entries)
            self._warn(f"session file was deleted while in use; rewrote it: {store.location}")

    def _upgrade_and_append(self, store: SessionStore, entries: list[Any]) -> None:
        """First append to a legacy file: rewrite it as v3 atomically (original kept as backup).

        Done in the writer section from what is stored *now*, so lines another process appended
        since we loaded are kept; v1 ids are deterministic, so they match ours. (If the section's
        end is lost, WriteOutcomeUnknown: the manager reads what was stored, and upgrades again
        if the upgrade was not.)
        """
        version = self.pending_upgrade
        with store.writer():
            current = store.load()
            if not current.valid:
                raise SessionFormatError(f"Session file is not a valid {APP_NAME} session: {store.location}",
                                         path=store.location)
            if file_version(current.entries) >= CURRENT_SESSION_VERSION:
                upgraded = None  # somebody upgraded it meanwhile
            else:
                migrate_to_current(current.entries)
                upgraded = current.entries + entries
            if upgraded is not None:
                suffix = f".v{int(version) if version is not None and version == version else 'x'}.bak"
                self.tail = store.replace(upgraded, backup_suffix=suffix)
                self._warn(f"upgraded {store.location} to format v{CURRENT_SESSION_VERSION}; original kept as "
                           f"{os.path.basename(store.location)}{suffix}")
            else:
                self.tail = store.append(entries)
        self.pending_upgrade = None

    # ------------------------------------------------------------------ other writers

    @contextlib.contextmanager
    def catching_up(self, index: EntryIndex) -> Iterator[None]:
        """After a stale append: hold the writer section, take in what others appended, and let
        the next append through without a tail check."""
        store = self.store
        assert store is not None
        with store.writer():
            self.catch_up(index)
            self._expect_tail = False
            try:
                yield
            finally:
                self._expect_tail = True

    def catch_up(self, index: EntryIndex) -> int:
        """Index what other writers appended since our tail (the caller's leaf stays put)."""
        store = self.store
        assert store is not None
        delta = store.read_since(self.tail, lazy=True) if self.tail is not None else None
        if delta is None:
            self._warn(f"{store.location} was replaced or truncated by another program since it was read; "
                       "appending to it as it is now")
            self.tail = store.tail()
            return 0
        added = [e for e in delta.entries if type(e) is RawLine or field_of(e, "type") != "session"]
        for entry in added:
            index.add(entry)
        self.tail = delta.tail
        if added:
            self._warn(f"{len(added)} entries were appended to {store.location} by another writer; they stay "
                       f"on their own branch and this session continues from its leaf")
        return len(added)

    # ------------------------------------------------------------------ writer sections

    def _section_store(self) -> SessionStore | None:
        return self.store if self.flushed else None

    def _enter(self, tail: Tail | None, strict: bool) -> None:
        if strict and self.tail is not None and tail is not None and tail != self.tail:
            assert self.store is not None
            raise StaleSessionError(f"{self.store.location} changed since this session read it (another writer "
                                    "appended or replaced it)")
        self._sections.append(strict)

    @contextlib.contextmanager
    def exclusive(self, *, strict: bool = True) -> Iterator[None]:
        store = self._section_store()
        if store is None:
            yield
            return
        with store.writer() as tail:
            self._enter(tail, strict)
            try:
                yield
            finally:
                self._sections.pop()

    @contextlib.contextmanager
    def try_exclusive(self, *, strict: bool = True) -> Iterator[None]:
        """`exclusive()` without the wait: SessionLockedError on entering while another writer
        holds the session (`SessionStore.try_writer`). A store written before `try_writer` was
        part of the protocol cannot say without waiting, so it counts as held: the caller
        defers, and its writes come in the next writer section."""
        store = self._section_store()
        if store is None:
            yield
            return
        try_writer = getattr(store, "try_writer", None)
        if try_writer is None:
            raise SessionLockedError(f"{type(store).__name__} has no try_writer: deferred to the next write")
        with try_writer() as tail:
            self._enter(tail, strict)
            try:
                yield
            finally:
                self._sections.pop()

    @contextlib.asynccontextmanager
    async def aexclusive(self, *, strict: bool = True) -> AsyncIterator[None]:
        store = self._section_store()
        if store is None:
            yield
            return
        async with store.awriter() as tail:
            self._enter(tail, strict)
            try:
                yield
            finally:
                self._sections.pop()
