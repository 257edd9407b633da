"""Writes storage has not confirmed, settled from what is stored (docs/storage.md, "A lost COMMIT").

A database commits a writer section's appends when the section ends; if the connection breaks
while COMMIT's answer is awaited, they may or may not be stored, and the same holds for any write
whose answer was lost. Such entries are never left to chance: the store is read (from the tail
before them) and decides. Stored: nothing to do. Not stored: they are appended again, same ids,
after whatever others appended meanwhile. Store unreadable: they stay in memory, unconfirmed, and
this is done before the next write, so no later entry is ever appended after (or as a child of)
an entry that is not stored, and no entry is stored twice.

`ConfirmedWrites` is this part of `SessionManager` (a base class of it, over the manager's index,
leaf and writer); it decides nothing about what a session holds.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from picontext.errors import SessionError, SessionWriteError, WriteOutcomeUnknown
from picontext.session.index import EntryIndex, id_of
from picontext.session.migrations import CURRENT_SESSION_VERSION, file_version
from picontext.session.projection import LAST, LeafArg, field_of
from picontext.session.protocol import Tail
from picontext.session.store import RawLine
from picontext.session.writer import SessionWriter

# An appended entry, the leaf before it and the index snapshot before it: what `_undo` needs.
Record = tuple[dict[str, Any], LeafArg, tuple[Any, ...]]


@dataclass(slots=True)
class Unconfirmed:
    """Entries written whose storage has not confirmed them yet (the appends of a writer section
    until its end, a write whose answer was lost) and the tail the store had before them."""

    start: Tail | None
    records: list[Record] = field(default_factory=list)
    upgrade: float | None = None  # the legacy version the first of them was to upgrade from


class ConfirmedWrites:
    """The manager's writer sections and writes, confirmed (see the module docstring)."""

    # What the manager provides.
    _writer: SessionWriter
    _index: EntryIndex
    _leaf: LeafArg
    _warn: Callable[[str], None]
    _section_writes: Unconfirmed | None  # appends of the writer section in progress
    _unsettled: Unconfirmed | None  # written, not confirmed: settled before the next write

    def _add(self, entry: dict[str, Any]) -> None:
        raise NotImplementedError

    def _undo(self, added: list[Record]) -> None:
        raise NotImplementedError

    def _move_leaf(self, leaf: LeafArg) -> None:
        raise NotImplementedError

    def get_session_id(self) -> str:
        raise NotImplementedError

    @contextlib.contextmanager
    def _section(self, section: contextlib.AbstractContextManager[Any]) -> Iterator[None]:
        """Run a writer section of the store; if it ends with an error after appends, settle them."""
        if self._section_writes is not None:  # nested: the outermost section answers for the appends
            with section:
                yield
            return
        self._settle()
        writes = self._section_writes = Unconfirmed(None)
        body_failed = False
        try:
            with section:
                try:
                    yield
                except BaseException:
                    body_failed = True
                    raise
        except BaseException as exc:
            if not self._section_failed(writes, exc):
                raise
            self._settle()
            if body_failed:
                raise
        finally:
            self._section_writes = None

    @contextlib.asynccontextmanager
    async def _asection(self, section: contextlib.AbstractAsyncContextManager[Any]) -> AsyncIterator[None]:
        """`_section` for an asyncio writer section."""
        if self._section_writes is not None:
            async with section:
                yield
            return
        await self._asettle()
        writes = self._section_writes = Unconfirmed(None)
        body_failed = False
        try:
            async with section:
                try:
                    yield
                except BaseException:
                    body_failed = True
                    raise
        except BaseException as exc:
            if not self._section_failed(writes, exc):
                raise
            await self._asettle()
            if body_failed:
                raise
        finally:
            self._section_writes = None

    def _section_failed(self, writes: Unconfirmed, exc: BaseException) -> bool:
        """A section ended with `exc`: whether its appends are to be settled now."""
        self._section_writes = None
        if not writes.records:
            return False
        self._unsettled = writes
        return isinstance(exc, Exception)  # interrupted (Ctrl+C, cancelled): at the next write

    def _before_write(self, records: list[Record]) -> tuple[Unconfirmed, bool]:
        """`records` as unconfirmed writes from the writer's position now, and whether the session
        is written yet (the first write is its create)."""
        return Unconfirmed(self._writer.tail, records, self._writer.pending_upgrade), self._writer.flushed

    def _note_written(self, written: Unconfirmed) -> None:
        writes = self._section_writes
        if writes is not None:
            if not writes.records:
                writes.start, writes.upgrade = written.start, written.upgrade
            writes.records.extend(written.records)

    def _write_failed(self, exc: BaseException, written: Unconfirmed, flushed: bool) -> bool:
        """A write of entries already in memory raised `exc`: take them back, unless it may have
        been stored; then they stay and are settled at once, or (storage unreadable: raises)
        before the next write. Returns True when settled. (A first write, the session's create,
        needs no more: the session stays unwritten, and its next write creates it or joins what
        was stored, SessionWriter._join.)"""
        if not isinstance(exc, WriteOutcomeUnknown):
            self._undo(written.records)
            return False
        if not flushed:
            return False
        self._unsettled = written
        self._settle()
        return True

    def _settle(self) -> None:
        """Decide what became of unconfirmed writes (see above); raises if storage cannot tell."""
        pending = self._unsettled
        if pending is None:
            return
        again: Unconfirmed | None = None
        checked = False
        try:
            with self._writer.exclusive(strict=False):
                again = self._reconcile(pending)
                checked = True
        except Exception as exc:
            self._settle_failed(exc, checked, again)
        self._settled(again)

    async def _asettle(self) -> None:
        """`_settle` in an asyncio writer section."""
        pending = self._unsettled
        if pending is None:
            return
        again: Unconfirmed | None = None
        checked = False
        try:
            async with self._writer.aexclusive(strict=False):
                again = self._reconcile(pending)
                checked = True
        except Exception as exc:
            self._settle_failed(exc, checked, again)
        self._settled(again)

    def _settle_failed(self, exc: Exception, checked: bool, again: Unconfirmed | None) -> None:
        """After `_settle`'s section failed: fine if the store had confirmed the entries and only
        the end of that (read-only) section failed; otherwise they are still unconfirmed."""
        if checked and again is None:
            return
        if self._unsettled is None:  # given up on (their log was replaced): the error says why
            raise exc
        raise self._unconfirmed_error(exc) from exc

    def _settled(self, again: Unconfirmed | None) -> None:
        self._unsettled = None
        if again is not None:
            assert self._writer.store is not None
            self._warn(f"the connection to {self._writer.store.location} broke before {len(again.records)} "
                       "entries were stored; they were stored again")

    def _reconcile(self, pending: Unconfirmed) -> Unconfirmed | None:
        """In a writer section: read what was stored after `pending.start` and make memory agree.
        Returns the entries written again (confirmed when the section ends), or None."""
        store = self._writer.store
        assert store is not None
        delta = store.read_since(pending.start, lazy=True) if pending.start is not None else None
        if delta is None:
            return self._reconcile_replaced(pending)
        ids = [id_of(entry) for entry, _leaf, _snapshot in pending.records]
        stored = [e for e in delta.entries if type(e) is RawLine or field_of(e, "type") != "session"]
        stored_ids = [id_of(e) for e in stored]
        if stored_ids[: len(ids)] == ids:  # they were stored (a section's appends are contiguous)
            self._unsettled = None
            self._take_in(stored[len(ids):], delta.tail)
            return None
        # Not stored: the same entries again, after what others appended meanwhile (file order);
        # a legacy upgrade made with them was not stored either.
        leaf = self._leaf
        self._undo(pending.records)
        self._take_in(stored, delta.tail)
        if pending.upgrade is not None:
            self._writer.pending_upgrade = pending.upgrade
        return self._write_again(pending, leaf)

    def _reconcile_replaced(self, pending: Unconfirmed) -> Unconfirmed | None:
        """The log was replaced since `pending.start`: by the unconfirmed writes themselves (a
        legacy log is upgraded at its first append) or by another program. Decided on the whole
        log, by id; a legacy log that is still legacy is upgraded again by the next append."""
        store = self._writer.store
        assert store is not None
        current = store.load(lazy=True)
        stored = {id_of(e) for e in current.entries}
        ids = [id_of(entry) for entry, _leaf, _snapshot in pending.records]
        legacy = current.valid and file_version(current.entries) < CURRENT_SESSION_VERSION
        self._writer.pending_upgrade = file_version(current.entries) if legacy else None
        self._writer.tail = current.tail
        if all(i in stored for i in ids):
            self._unsettled = None
            return None
        leaf = self._leaf
        parent = field_of(pending.records[0][0], "parentId")
        self._undo(pending.records)
        if parent and parent not in stored:
            self._unsettled = None
            raise SessionWriteError(f"{store.location} was replaced while {len(ids)} entries written to it were "
                                    "unconfirmed, and no longer holds what they continue: they were dropped from this "
                                    "session; reopen it to see what it holds")
        return self._write_again(pending, leaf)

    def _write_again(self, pending: Unconfirmed, leaf: LeafArg) -> Unconfirmed:
        """Append `pending`'s entries (taken back from memory) again, same ids and parents, at the
        writer's tail; they are unconfirmed until the section around this ends well."""
        again = Unconfirmed(self._writer.tail)
        for entry, _leaf, _snapshot in pending.records:
            again.records.append((entry, self._leaf, self._index.snapshot()))
            self._add(entry)
        if leaf is LAST or leaf in self._index:
            self._move_leaf(leaf)
        self._unsettled = again
        self._writer.persist([entry for entry, _leaf, _snapshot in again.records], self._index)
        return again

    def _take_in(self, entries: list[Any], tail: Tail | None) -> None:
        """Entries another writer stored after ours: indexed in file order, the leaf stays."""
        for entry in entries:
            self._index.add(entry)
        self._writer.tail = tail
        if entries:
            assert self._writer.store is not None
            self._warn(f"{len(entries)} entries were appended to {self._writer.store.location} by another writer; "
                       "they stay on their own branch and this session continues from its leaf")

    def _unconfirmed_error(self, exc: Exception) -> SessionWriteError:
        count = len(self._unsettled.records) if self._unsettled is not None else 0
        root: BaseException = exc
        while root.__cause__ is not None:  # the store's own reason, not the wording of each layer
            root = root.__cause__
        reason = str(root).strip().splitlines()[0] if str(root).strip() else type(root).__name__
        return SessionWriteError(
            f"Cannot confirm that the last {count} entries of session {self.get_session_id()} were stored "
            f"({reason}); they stay in this session and are checked, and stored again if missing, before its "
            "next write")

    def _leave_unsettled(self) -> None:
        """Before this manager moves to another session: settle what is unconfirmed, or say so."""
        if self._unsettled is None:
            return
        count = len(self._unsettled.records)
        try:
            self._settle()
        except SessionError as exc:
            self._warn(f"{count} entries of session {self.get_session_id()} may not be stored: {exc.__cause__ or exc}")
        self._unsettled = None
