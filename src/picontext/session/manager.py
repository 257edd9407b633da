"""SessionManager: one session as Pi's `SessionManager` API, over parts with one job each.

    index.py   EntryIndex: entries by position and id, children, labels, session name
    tree.py    paths root -> leaf, the whole forest
    live.py    LiveProjection: the projection of the leaf's path, kept current per append
    writer.py  SessionWriter: persistence rules (lazy flush, legacy upgrade, other writers)
    confirm.py ConfirmedWrites: writes whose answer was lost, settled from what is stored
    store.py   the storage itself, behind the `SessionStore` protocol (protocol.py)

This class holds the leaf and composes the parts; it builds entries (ids, timestamps, Pi's
field order) and keeps memory and storage in step: an entry that cannot be written is removed
from memory again. The behaviour and error messages are Pi's (session-manager.ts), in
snake_case; the differences are in docs/divergences.md.

Usage:
    sm = SessionManager.create("/home/u/proj")
    sm.append_message({"role": "user", "content": "hi", "timestamp": 1})
    ctx = sm.build_session_context()
"""

from __future__ import annotations

import builtins
import contextlib
import os
import re
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any

from msgspec import UNSET

from picontext._clock import Clock, IdFactory, RandomIds, SystemClock, iso_from_ms, js_date_ms
from picontext._gc import gc_paused
from picontext.errors import (
    EntryNotFound,
    ForkError,
    InvalidReplacement,
    InvalidSessionId,
    NotEditable,
    NotOnActiveBranch,
    SessionError,
    SessionFormatError,
    SessionLockedError,
    StaleSessionError,
)
from picontext.session import paths
from picontext.session.confirm import ConfirmedWrites, Record, Unconfirmed
from picontext.session.index import EntryIndex, key_of
from picontext.session.live import LiveProjection
from picontext.session.migrations import CURRENT_SESSION_VERSION, file_version, migrate_to_current
from picontext.session.projection import LAST, Entry, LeafArg, SessionProjection, field_of
from picontext.session.protocol import LoadResult, SessionHome, SessionStore
from picontext.session.store import JsonlSessionStore
from picontext.session.system_prompt import get_current_system_message
from picontext.session.tree import BranchView, TreeNode, build_tree, on_path, path_to
from picontext.session.writer import APP_NAME, SessionWriter

Warn = Callable[[str], None]


def stderr_warn(message: str) -> None:
    print(f"picontext: warning: {message}", file=sys.stderr)


class SessionDirectory:
    """Pi's home for new sessions: `<directory>/<timestamp>_<id>.jsonl`."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def place(self, cwd: str, session_id: str, timestamp: str) -> tuple[SessionStore, str | None]:
        path = os.path.join(self.directory, paths.session_file_name(timestamp, session_id))
        return JsonlSessionStore(path), path


class SessionManager(ConfirmedWrites):
    """One session: its index, its leaf, its live projection and its writer.

    Invariant: the live projection, when valid, is the projection of the path to `_leaf` over
    `_index`; every change of either goes through `_move_leaf`, `_append` or `_set_file_entries`.
    """

    def __init__(
        self,
        cwd: str,
        session_dir: str,
        session_file: str | None,
        persist: bool,
        *,
        new_session_id: str | None = None,
        parent_session: str | None = None,
        preloaded: list[Any] | None = None,
        clock: Clock | None = None,
        ids: IdFactory | None = None,
        warn: Warn | None = None,
        loaded: LoadResult | None = None,
        repository: SessionHome | None = None,
        store: SessionStore | None = None,
    ) -> None:
        self._clock = clock or SystemClock()
        self._ids = ids or RandomIds(self._clock)
        self._warn = warn or stderr_warn
        self._cwd = paths.resolve_path(cwd)
        self._session_dir = paths.resolve_path(session_dir) if session_dir else ""
        self._persist = persist
        # Where new sessions of this manager go (`new_session`, `create_branched_session`): the
        # repository it came from, else Pi's session directory.
        self._repository = repository
        self._home: SessionHome = repository if repository is not None else SessionDirectory(self._session_dir)
        self._session_file: str | None = None
        self._index = EntryIndex(share_strings=True)
        self._writer = SessionWriter(self._warn)
        self._leaf: LeafArg = None
        self._live = LiveProjection()
        self._batch: list[Record] | None = None  # see batch()
        self._section_writes: Unconfirmed | None = None  # appends of the writer section in progress
        self._unsettled: Unconfirmed | None = None  # written, not confirmed: settled before the next write
        self._deferred: list[Record] | None = None  # in memory, not written yet: see batch(wait=False)
        self._writing_deferred = False
        # Unlike Pi's constructor, nothing is created here: a session file's directory appears
        # with the file, at the first write (`open` of a new path has no side effect until then).
        with gc_paused():
            if store is not None:
                self._open_store(store, session_file, preloaded, loaded)
            elif session_file:
                self._set_session_file(session_file, preloaded, loaded)
            elif preloaded:
                self._load_entries(preloaded, new_session_id, parent_session)
            else:
                self.new_session(id=new_session_id, parent_session=parent_session)

    # ------------------------------------------------------------------ factories

    @classmethod
    def create(
        cls, cwd: str, session_dir: str | None = None, *, id: str | None = None,
        parent_session: str | None = None, **kw: Any,
    ) -> SessionManager:
        """A new persisted session; its file appears with the first assistant message."""
        directory = session_dir or paths.default_session_dir(cwd)
        paths.ensure_dir(directory)  # as Pi: the session directory exists from here on
        return cls(cwd, directory, None, True, new_session_id=id, parent_session=parent_session, **kw)

    @classmethod
    def open(cls, path: str, session_dir: str | None = None, cwd_override: str | None = None,
             **kw: Any) -> SessionManager:
        """Open a session file. A path that does not exist is a new session: nothing is created
        (neither the file nor its directories) until the first write, which creates both (the
        directories 0700). `loaded=` (keyword): the store's `load(lazy=True)` result the caller
        already has, used instead of reading again."""
        resolved = paths.resolve_path(path)
        store = JsonlSessionStore(resolved)
        directory = session_dir or os.path.dirname(resolved)
        return cls.open_store(store, file=resolved, session_dir=directory, cwd=cwd_override, **kw)

    @classmethod
    def open_store(cls, store: SessionStore, *, file: str | None = None, session_dir: str = "",
                   cwd: str | None = None, **kw: Any) -> SessionManager:
        """Open the session `store` holds (a new, empty session when it does not exist yet: written
        at the first write). `file`: the store's file, when it is one (`get_session_file()`);
        `repository=` (keyword): where this manager's new sessions go (`SessionRepository`)."""
        if cwd is None and store.exists():
            header = store.read_header()
            if header is not None and isinstance(header.get("cwd"), str):
                cwd = header["cwd"]
        return cls(cwd or os.getcwd(), session_dir, file, True, store=store, **kw)

    @classmethod
    def continue_recent(cls, cwd: str, session_dir: str | None = None, **kw: Any) -> SessionManager:
        """The most recently modified session of the directory, or a new one."""
        from picontext.session.listing import find_most_recent_session

        directory = session_dir or paths.default_session_dir(cwd, create=True)
        filter_cwd = session_dir is not None and paths.resolve_path(directory) != paths.default_session_dir(cwd)
        recent = find_most_recent_session(directory, cwd if filter_cwd else None)
        return cls(cwd, directory, recent, True, **kw)

    @classmethod
    def in_memory(cls, cwd: str | None = None, *, id: str | None = None, parent_session: str | None = None,
                  entries: list[Any] | None = None, **kw: Any) -> SessionManager:
        """A session that never touches the filesystem."""
        return cls(cwd or os.getcwd(), "", None, False, new_session_id=id, parent_session=parent_session,
                   preloaded=entries, **kw)

    @classmethod
    def fork_from(cls, source_path: str, target_cwd: str, session_dir: str | None = None, *,
                  id: str | None = None, **kw: Any) -> SessionManager:
        """Copy a whole session (all branches) into a new file for `target_cwd`.

        Unlike Pi 0.87.0, a legacy source is migrated before copying, so the copy is a valid tree.
        """
        source = paths.resolve_path(source_path)
        target = paths.resolve_path(target_cwd)
        directory = session_dir or paths.default_session_dir(target, create=True)
        paths.ensure_dir(directory)
        return cls.fork_store(JsonlSessionStore(source), target, SessionDirectory(directory), id=id,
                              session_dir=directory, **kw)

    @classmethod
    def fork_store(cls, source: SessionStore, target_cwd: str, home: SessionHome, *, id: str | None = None,
                   session_dir: str = "", **kw: Any) -> SessionManager:
        """`fork_from` for any store: the copy is a new session `home` places; its header's
        `parentSession` is the source's location (a file's path, as Pi writes it)."""
        loaded = source.load()
        if not loaded.valid:
            raise ForkError(f"Cannot fork: source session file is empty or invalid: {source.location}")
        entries = loaded.entries
        migrate_to_current(entries)
        if id is not None and not paths.is_valid_session_id(id):
            raise InvalidSessionId()
        target = paths.resolve_path(target_cwd)
        ids = kw.get("ids") or RandomIds(kw.get("clock"))
        clock = kw.get("clock") or SystemClock()
        session_id = id or ids.session_id()
        timestamp = iso_from_ms(clock.now_ms())
        header = {"type": "session", "version": CURRENT_SESSION_VERSION, "id": session_id,
                  "timestamp": timestamp, "cwd": target, "parentSession": source.location}
        store, file = home.place(target, session_id, timestamp)
        store.create([header, *(e for e in entries if field_of(e, "type") != "session")])
        if isinstance(home, SessionDirectory):
            kw.pop("repository", None)
        else:
            kw["repository"] = home
        return cls(target, session_dir, file, True, store=store, **kw)

    # ------------------------------------------------------------------ loading

    def new_session(self, *, id: str | None = None, parent_session: str | None = None) -> str | None:
        """Start a fresh session in memory (nothing is written until the first assistant)."""
        if id is not None and not paths.is_valid_session_id(id):
            raise InvalidSessionId()
        session_id = id if id is not None else self._ids.session_id()
        timestamp = iso_from_ms(self._clock.now_ms())
        header: dict[str, Any] = {"type": "session", "version": CURRENT_SESSION_VERSION, "id": session_id,
                                  "timestamp": timestamp, "cwd": self._cwd}
        if parent_session is not None:
            header["parentSession"] = parent_session
        self._set_file_entries([header])
        self._place_new(session_id, timestamp)
        return self._session_file

    def _place_new(self, session_id: str, timestamp: str) -> None:
        """Bind a new session to the store its home gives it (not written yet: the lazy-flush
        rule decides when)."""
        if not self._persist:
            self._bind(None, None)
            return
        store, file = self._home.place(self._cwd, session_id, timestamp)
        self._bind(store, file)

    def _bind(self, store: SessionStore | None, file: str | None) -> None:
        self._session_file = file
        self._writer.bind(store)

    def set_session_file(self, path: str) -> None:
        """Switch to another file, with the same rules as `open`."""
        self._set_session_file(path, None, None)

    def _set_session_file(self, path: str, preloaded: list[Any] | None, read: LoadResult | None = None) -> None:
        resolved = paths.resolve_path(path)
        self._open_store(JsonlSessionStore(resolved), resolved, preloaded, read)

    def _open_store(self, store: SessionStore, file: str | None, preloaded: list[Any] | None,
                    read: LoadResult | None = None) -> None:
        """`read`: what the caller already read from this store (a whole load, its warnings shown),
        so the file is not parsed twice; its tail is the one the writer checks, so an append made
        since that read is still refused or taken in, never forked over."""
        if read is None and not store.exists():
            self.new_session()
            self._bind(store, file)
            return
        loaded = LoadResult()
        if read is not None:
            loaded = read
            entries = loaded.entries if loaded.valid else []
        elif preloaded is None:
            loaded = store.load(lazy=True)
            for line in loaded.warnings(store.location):
                self._warn(line)
            entries = loaded.entries if loaded.valid else []
        else:
            entries = preloaded
            loaded.tail = store.tail()
        if not entries:
            if loaded.size > 0:
                raise SessionFormatError(f"Session file is not a valid {APP_NAME} session: {store.location}",
                                         path=store.location)
            self.new_session()
            self._bind(store, file)
            self._writer.replace_whole(self._index)
            return
        self._session_file = file
        self._writer.bind(store, tail=loaded.tail, flushed=True)
        self._load_entries(entries, None, None)

    def _load_entries(self, entries: list[Any], new_id: str | None, parent_session: str | None) -> None:
        header = next((e for e in entries if field_of(e, "type") == "session"), None)
        if header is None:
            self.new_session(id=new_id, parent_session=parent_session)
            self._set_file_entries(self._index.file_entries + list(entries))
            return
        version = file_version(entries)
        migrated = migrate_to_current(entries)
        self._set_file_entries(entries)
        if migrated:
            # Pi rewrites the file here. We upgrade it atomically on the first append instead,
            # so merely reading a legacy file never modifies it.
            self._writer.pending_upgrade = version

    def _set_file_entries(self, file_entries: list[Any]) -> None:
        self._leave_unsettled()
        self._index.load(file_entries)
        last_id = self._index.last_id()
        self._leaf = LAST if last_id is UNSET else last_id
        self._live.invalidate()

    # ------------------------------------------------------------------ accessors

    def is_persisted(self) -> bool:
        return self._persist

    def get_cwd(self) -> str:
        return self._cwd

    def get_session_dir(self) -> str:
        return self._session_dir

    def get_session_id(self) -> str:
        return str(self._index.header.get("id", ""))

    def get_session_file(self) -> str | None:
        """The session's file, or None when it is not stored in a file (not persisted, or kept by
        a store that is not a file). A new session's file may not exist yet: it is written at the
        first assistant message, as Pi's."""
        return self._session_file

    @property
    def repository(self) -> Any:
        """The `SessionRepository` this session came from (None for `in_memory()` and for files
        opened by path)."""
        return self._repository

    def get_session_location(self) -> str | None:
        """Where the session is stored, as its store names it (a file's path; for a database,
        `<url>#<id>`); None for a session that is not persisted."""
        store = self._writer.store
        return store.location if store is not None else None

    def stored(self) -> bool:
        """Whether the session exists in its store yet (a new one is written at the first
        assistant message)."""
        store = self._writer.store
        return store is not None and store.exists()

    def check_writable(self) -> None:
        """Refuse now (SessionWriteError, one line) a session its store could not take writes
        for (a read-only file or directory), before a model is asked, not after its reply. A
        store without such a check is asked at the first write."""
        check = getattr(self._writer.store, "check_writable", None)
        if check is not None:
            check()

    def stored_in_file(self) -> str | None:
        """`get_session_file()` (kept for callers written when a database session had a path)."""
        return self._session_file

    def uses_default_session_dir(self) -> bool:
        return self._session_dir == paths.default_session_dir(self._cwd)

    def get_header(self) -> dict[str, Any] | None:
        return self._index.header or None

    def get_entries(self) -> list[Entry]:
        index = self._index
        return [index.entry(i) for i in range(len(index))]

    def entry_count(self) -> int:
        return len(self._index)

    def get_leaf_id(self) -> str | None:
        return None if self._leaf is LAST else self._leaf  # type: ignore[return-value]

    def get_leaf_entry(self) -> Entry | None:
        leaf = self.get_leaf_id()
        return self.get_entry(leaf) if leaf else None

    def get_entry(self, entry_id: str) -> Entry | None:
        position = self._index.position_of(entry_id)
        return None if position is None else self._index.entry(position)

    def get_children(self, parent_id: str | None) -> list[Entry]:
        """Entries whose parentId equals `parent_id`, in file order (indexed, not scanned)."""
        return [self._index.entry(i) for i in self._index.children_of(parent_id)]

    def get_label(self, entry_id: str) -> str | None:
        return self._index.labels.get(entry_id)

    def get_session_name(self) -> str | None:
        return self._index.session_name()

    def get_branch(self, from_id: str | None = None) -> list[Entry]:
        """Root-first path to `from_id` (default: the leaf); [] for an unknown start."""
        start = from_id if from_id is not None else self.get_leaf_id()
        if not start or start not in self._index:
            return []
        if start == self._leaf and self._live.valid:
            positions = self._live.path_positions  # already walked for the projection
        else:
            positions = path_to(self._index, start)
        entry = self._index.entry
        # Newest first: a long tool output near the leaf is decoded before the older entries
        # are, while they are still compact bytes (the peak of opening a huge session).
        branch = [entry(i) for i in reversed(positions)]
        branch.reverse()
        return branch

    # The request path asks about the current branch many times per turn; these answer from the
    # live projection and the index, without walking or parsing the branch.

    def _has_branch(self) -> bool:
        leaf = self.get_leaf_id()  # as get_branch(): no branch without a known leaf id
        return bool(leaf) and leaf in self._index

    def branch_view(self) -> BranchView:
        """`get_branch()` as a lazy sequence (entries parsed only when looked at)."""
        return BranchView(self._index, self._live_projection().path_positions if self._has_branch() else [])

    def branch_position(self, entry_id: Any) -> int | None:
        """Position of `entry_id` on the current branch (first occurrence), or None."""
        if entry_id is None or not self._has_branch():
            return None
        return self._live_projection().path_position(entry_id)

    def assistant_message_count(self) -> int:
        """How many assistant messages the current branch holds, read from the index's heads
        (nothing is parsed)."""
        if not self._has_branch():
            return 0
        index = self._index
        positions = self._live_projection().path_positions
        return sum(1 for position, kind in zip(positions, index.types_of(positions), strict=True)
                   if kind == "message" and index.role_of(position) == "assistant")

    def release_contents(self, entry_ids: Iterable[Any]) -> None:
        """Let go of what holds the entries `entry_ids` parsed (the index's values, for lines
        the file gives again; the live projection, rebuilt when next asked). For a compaction
        that replaces their content by context edits: the text is not held while its summaries
        are written, and the rebuild after it reads only their heads (`LiveProjection._fold`)."""
        for entry_id in entry_ids:
            position = self._index.position_of(entry_id)
            if position is not None:
                self._index.forget(position)
        self._live.release()

    def latest_compaction_position(self) -> int | None:
        """Position of the newest compaction on the current branch, or None."""
        return self._live_projection().last_compaction if self._has_branch() else None

    def context_has_edits(self) -> bool:
        """Whether a context_edit entry is among the current context entries."""
        return self._live_projection().edit_count > 0

    def contributes_to_context(self, entry_id: Any) -> bool:
        """Whether the entry `entry_id` is in the current context and projects to a message."""
        return self._live_projection().contributes(entry_id)

    def entries_after(self, entry_id: Any) -> list[Entry]:
        """The current branch's entries after `entry_id` ([] when it is not on the branch)."""
        position = self.branch_position(entry_id)
        return [] if position is None else self.branch_view()[position + 1 :]

    def get_tree(self) -> list[TreeNode]:
        """Forest of nodes; children sorted by timestamp (stable), orphans become roots."""
        return build_tree(self._index)

    # ------------------------------------------------------------------ projection

    def _live_projection(self) -> LiveProjection:
        if not self._live.valid:
            with gc_paused():
                self._live.rebuild(self._index, path_to(self._index, self._leaf))
        return self._live

    def build_session_projection(self) -> SessionProjection:
        return self._live_projection().projection()

    def build_session_context(self) -> dict[str, Any]:
        return self.build_session_projection().context()

    def build_context_entries(self) -> list[Entry]:
        return list(self._live_projection().context_entries)

    # ------------------------------------------------------------------ navigation

    def branch(self, entry_id: str) -> None:
        if entry_id not in self._index:
            raise EntryNotFound(entry_id)
        self._move_leaf(entry_id)

    def reset_leaf(self) -> None:
        self._move_leaf(None)

    def _move_leaf(self, leaf: LeafArg) -> None:
        if leaf != self._leaf or leaf is LAST:
            self._leaf = leaf
            self._live.invalidate()

    def branch_with_summary(self, from_id: str | None, summary: str, details: Any = None,
                            from_hook: bool | None = None, usage: Any = None) -> str:
        if from_id is not None and from_id not in self._index:
            raise EntryNotFound(from_id)
        previous_leaf = self._leaf
        previous = self.get_leaf_id() or "root"
        self._move_leaf(from_id)
        entry = self._base("branch_summary")
        entry.update(_defined(fromId=previous, summary=summary, details=details, usage=usage, fromHook=from_hook))
        try:
            return self._append(entry)["id"]
        except BaseException:
            self._move_leaf(previous_leaf)
            raise

    # ------------------------------------------------------------------ writer sections

    @contextlib.contextmanager
    def exclusive(self, *, strict: bool = True) -> Iterator[None]:
        """Hold the store's writer section; appends inside it do not wait for the lock again.

        `strict`: appends are refused with StaleSessionError (nothing written) if another writer
        appended since this manager last read or wrote — what a compaction planned on what it
        read needs; entering raises the same. Not strict: such appends are taken in first (see
        `_append`).
        """
        with self._section(self._writer.exclusive(strict=strict)):
            yield

    @contextlib.asynccontextmanager
    async def aexclusive(self, *, strict: bool = True) -> AsyncIterator[None]:
        """`exclusive()` for asyncio: waiting for another writer never blocks the event loop."""
        async with self._asection(self._writer.aexclusive(strict=strict)):
            yield

    # ------------------------------------------------------------------ appends

    def _new_id(self) -> str:
        for _ in range(100):
            candidate = self._ids.entry_id()
            if candidate not in self._index:
                return candidate
        return self._ids.session_id()  # a full UUID, as Pi falls back to randomUUID()

    def _now_iso(self) -> str:
        return iso_from_ms(self._clock.now_ms())

    def _base(self, kind: str, timestamp: str | None = None) -> dict[str, Any]:
        return {"type": kind, "id": self._new_id(), "parentId": self.get_leaf_id(),
                "timestamp": timestamp or self._now_iso()}

    def _append(self, entry: dict[str, Any]) -> dict[str, Any]:
        """Add to memory and persist; if another writer appended since our last read, take in
        what it wrote first (file order is kept) and append after it, with a warning."""
        try:
            return self._append_once(entry)
        except StaleSessionError:
            if self._writer.strict or self._writer.store is None:
                raise
            with self._section(self._writer.catching_up(self._index)):
                return self._append_once(entry)

    def _append_once(self, entry: dict[str, Any]) -> dict[str, Any]:
        """Add to memory, persist, and undo the memory change if persisting fails."""
        if self._batch is not None:
            self._batch.append((entry, self._leaf, self._index.snapshot()))
            self._add(entry)
            return entry
        self._settle()
        written, flushed = self._before_write([(entry, self._leaf, self._index.snapshot())])
        self._add(entry)
        try:
            self._writer.persist([entry], self._index)
        except BaseException as exc:
            if not self._write_failed(exc, written, flushed):
                raise
        if flushed:
            self._note_written(written)
        return entry

    def _add(self, entry: dict[str, Any]) -> None:
        live_was_valid = self._live.valid and self._leaf is not LAST and entry.get("parentId") == self._leaf
        position = self._index.add(entry)
        self._leaf = entry.get("id")
        if live_was_valid:
            self._live.append(entry, position)
        else:
            self._live.invalidate()

    def _undo(self, added: list[Record]) -> None:
        for _entry, previous_leaf, snapshot in reversed(added):
            self._index.undo_add(snapshot)
            self._leaf = previous_leaf
        self._live.invalidate()

    @contextlib.contextmanager
    def batch(self, *, wait: bool = True) -> Iterator[None]:
        """Appends inside the block are written together at its end, in one all-or-nothing write
        (under one lock); if that write (or the block) fails, none of them stays in memory.

        `wait=False`, for synchronous code that runs on an event loop (`AgentSession`'s
        constructor): if another writer holds the session at the block's end, nothing waits for
        it. The entries stay in memory (reads and projections have them) and are written before
        anything else at this manager's next write, in that write's writer section: in
        `aexclusive()` the wait yields to the event loop. `pending_writes()` counts them,
        `awrite_pending()` writes them now. (Writes whose answer was lost are settled first, and
        that may wait.)"""
        if self._batch is not None:
            yield
            return
        if wait or self._unsettled is not None:
            self._settle()
        batch: list[Record] = []
        self._batch = batch
        try:
            yield
        except BaseException:
            self._batch = None
            self._undo(batch)
            raise
        self._batch = None
        if not batch:
            return
        if wait:
            self._write_records(batch)
            return
        self._deferred = [*(self._deferred or ()), *batch]
        try:
            self._write_deferred(self._section(self._writer.try_exclusive(strict=False)))
        except SessionLockedError:
            if self._deferred is None:  # not from entering the section: from the write itself
                raise

    def _write_records(self, records: list[Record]) -> None:
        """Write `records`, the newest entries in memory, in one write (see `batch`)."""
        entries = [entry for entry, _leaf, _snapshot in records]
        written, flushed = self._before_write(records)
        try:
            self._writer.persist(entries, self._index)
        except StaleSessionError:
            if self._writer.strict or self._writer.store is None:
                self._undo(records)
                raise
            self._undo(records)
            with self._section(self._writer.catching_up(self._index)), self.batch():
                for entry in entries:  # the same entries (ids, parents), after the foreign ones
                    self._append_once(entry)
        except BaseException as exc:
            if not self._write_failed(exc, written, flushed):
                raise
        if flushed:
            self._note_written(written)

    # Deferred entries (batch(wait=False)) are written by `_settle`/`_asettle`, which every write
    # and every writer section runs first: no later entry can reach storage before them, and a
    # strict section (compaction) finds them written and the other writer's entries taken in.

    def pending_writes(self) -> int:
        """Entries in memory not written yet: `batch(wait=False)` found the session held."""
        return len(self._deferred or ())

    async def awrite_pending(self) -> None:
        """Write the entries `batch(wait=False)` left pending now; waiting for another writer
        yields to the event loop."""
        await self._asettle()

    def _settle(self) -> None:
        super()._settle()
        self._write_deferred(self._section(self._writer.exclusive(strict=False)))

    async def _asettle(self) -> None:
        await super()._asettle()
        if not self._deferred or self._writing_deferred:
            return
        self._writing_deferred = True
        try:
            async with self._asection(self._writer.aexclusive(strict=False)):
                self._write_held()
        finally:
            self._writing_deferred = False

    def _write_deferred(self, section: contextlib.AbstractContextManager[None]) -> None:
        """Write the deferred entries in `section`, a writer section (which settles first: the
        flag stops it from starting on them itself). If it cannot be entered they stay deferred."""
        if not self._deferred or self._writing_deferred:
            return
        self._writing_deferred = True
        try:
            with section:
                self._write_held()
        finally:
            self._writing_deferred = False

    def _write_held(self) -> None:
        """Write the deferred entries, inside a writer section. The leaf stays where it was moved
        since they were appended (navigation moves it without writing)."""
        records, self._deferred = self._deferred, None
        if not records:
            return
        leaf = self._leaf
        try:
            self._write_records(records)
        finally:
            if leaf != self._leaf and (leaf is LAST or leaf is None or leaf in self._index):
                self._move_leaf(leaf)

    def _leave_unsettled(self) -> None:
        if self._deferred:
            count = len(self._deferred)
            try:
                self._settle()
            except SessionError as exc:
                self._warn(f"{count} entries of session {self.get_session_id()} were not written: {exc}")
            self._deferred = None
        super()._leave_unsettled()

    def append_context_edits(self, edits: list[tuple[str, dict[str, Any] | None]]) -> list[str]:
        """Several `append_context_edit`s as one batch: all written, or none (see `batch`)."""
        with gc_paused(), self.batch():  # thousands of new entries over a large parsed session
            return [self.append_context_edit(target, replacement) for target, replacement in edits]

    def append_message(self, message: dict[str, Any]) -> str:
        entry = self._base("message")
        entry["message"] = message
        return self._append(entry)["id"]

    def append_thinking_level_change(self, thinking_level: str) -> str:
        entry = self._base("thinking_level_change")
        entry["thinkingLevel"] = thinking_level
        return self._append(entry)["id"]

    def append_model_change(self, provider: str, model_id: str) -> str:
        entry = self._base("model_change")
        entry.update(provider=provider, modelId=model_id)
        return self._append(entry)["id"]

    def append_usage(self, kind: str, provider: str, model: str, usage: dict[str, Any],
                     note: str | None = None) -> dict[str, Any]:
        """Returns the whole entry, as Pi's appendUsage does."""
        entry = self._base("usage")
        entry.update(kind=kind, provider=provider, model=model, usage=usage)
        if note:
            entry["note"] = note
        return self._append(entry)

    def append_compaction(self, summary: str, first_kept_entry_id: str | None, tokens_before: int,
                          details: Any = None, from_hook: bool | None = None, usage: Any = None) -> str:
        """Append a compaction; `first_kept_entry_id=None` keeps nothing (stores its own id)."""
        timestamp = self._now_iso()
        checkpoint = get_current_system_message(self.build_session_projection().messages)
        entry = self._base("compaction", timestamp)
        entry.update(_defined(summary=summary, firstKeptEntryId=first_kept_entry_id or entry["id"],
                              tokensBefore=tokens_before, details=details, usage=usage, fromHook=from_hook))
        if checkpoint is not None:
            entry["systemMessage"] = {**checkpoint, "timestamp": js_date_ms(timestamp)}
        return self._append(entry)["id"]

    def append_custom_entry(self, custom_type: str, data: Any = None) -> str:
        base = self._base("custom")
        entry = {"type": "custom", "customType": custom_type, **_defined(data=data)}
        entry.update(id=base["id"], parentId=base["parentId"], timestamp=base["timestamp"])
        return self._append(entry)["id"]

    def append_custom_message_entry(self, custom_type: str, content: Any, display: bool,
                                    details: Any = None) -> str:
        base = self._base("custom_message")
        entry = {"type": "custom_message", "customType": custom_type, "content": content, "display": display,
                 **_defined(details=details)}
        entry.update(id=base["id"], parentId=base["parentId"], timestamp=base["timestamp"])
        return self._append(entry)["id"]

    def append_session_info(self, name: str) -> str:
        entry = self._base("session_info")
        entry["name"] = re.sub(r"[\r\n]+", " ", name).strip()
        return self._append(entry)["id"]

    def _on_branch(self, entry_id: str) -> bool:
        """Whether an entry with `entry_id` is on the current branch; a released projection is
        not rebuilt for it (that would parse the whole branch again)."""
        if self._live.valid or not self._has_branch():
            return self._live_projection().on_path(entry_id)
        return on_path(self._index, self._leaf, entry_id)

    def append_label_change(self, target_id: str, label: str | None = None) -> str:
        if target_id not in self._index:
            raise EntryNotFound(target_id)
        entry = self._base("label")
        entry["targetId"] = target_id
        if label is not None:
            entry["label"] = label
        return self._append(entry)["id"]

    def append_context_edit(self, target_id: str, replacement: dict[str, Any] | None) -> str:
        """Hide (`None`) or replace (`{"content": ...}`) an earlier entry's model content."""
        if replacement is not None and not (
            isinstance(replacement, dict) and isinstance(replacement.get("content"), str | list)
        ):
            raise InvalidReplacement()
        # The target's type and role from the index (its head): an output of megabytes that a
        # compaction shortens is not read back to be shortened (`release_contents`).
        position = self._index.position_of(target_id)
        if position is None:
            raise EntryNotFound(target_id)
        if not self._on_branch(target_id):
            raise NotOnActiveBranch(target_id)
        role = "custom" if self._index.type_of(position) == "custom_message" else self._index.role_of(position)
        if role not in ("custom", "user", "assistant", "toolResult"):
            raise NotEditable(target_id)
        if replacement is not None and role in ("assistant", "toolResult") and isinstance(
            replacement["content"], str
        ):
            replacement = {"content": [{"type": "text", "text": replacement["content"]}]}
        entry = self._base("context_edit")
        entry.update(targetId=target_id, replacement=replacement)
        return self._append(entry)["id"]

    # ------------------------------------------------------------------ branched sessions

    def create_branched_session(self, leaf_id: str) -> str | None:
        """Extract the path to `leaf_id` (labels re-created) into a new session; returns its file."""
        previous_store = self._writer.store
        previous = self._session_file or (previous_store.location if previous_store is not None else None)
        path = self.get_branch(leaf_id)
        if not path:
            raise EntryNotFound(leaf_id)
        kept: list[dict[str, Any]] = []
        label_successor: dict[Any, Any] = {}
        pending_labels: list[Any] = []
        parent_id = None
        for entry in path:
            if field_of(entry, "type") == "label":
                pending_labels.append(entry.get("id"))
                continue
            for label_id in pending_labels:
                label_successor[label_id] = entry.get("id")
            pending_labels.clear()
            copy = {**entry, "parentId": parent_id} if isinstance(entry, dict) else entry
            if field_of(entry, "type") == "compaction":
                first = entry.get("firstKeptEntryId")
                if first != entry.get("id"):
                    copy["firstKeptEntryId"] = label_successor.get(key_of(first), first)
            kept.append(copy)
            parent_id = field_of(entry, "id")
        session_id = self._ids.session_id()
        timestamp = self._now_iso()
        header: dict[str, Any] = {"type": "session", "version": CURRENT_SESSION_VERSION, "id": session_id,
                                  "timestamp": timestamp, "cwd": self._cwd}
        if self._persist and previous is not None:
            header["parentSession"] = previous
        kept_ids = {field_of(e, "id") for e in kept}
        label_entries = []
        parent_id = field_of(kept[-1], "id") or None
        for target, label in self._index.labels.items():
            if target in kept_ids:
                new_id = self._ids.entry_id()
                while new_id in kept_ids:
                    new_id = self._ids.entry_id()
                kept_ids.add(new_id)
                label_entries.append({"type": "label", "id": new_id, "parentId": parent_id,
                                      "timestamp": self._index.label_ts.get(target), "targetId": target,
                                      "label": label})
                parent_id = new_id
        self._set_file_entries([header, *kept, *label_entries])
        self._place_new(session_id, timestamp)
        if self._persist and self._index.has_assistant_message():
            self._writer.write_whole(self._index)
        return self._session_file

    # ------------------------------------------------------------------ listing (delegates)

    @staticmethod
    def list(cwd: str, session_dir: str | None = None) -> list[Any]:
        from picontext.session.listing import list_sessions

        return list_sessions(cwd, session_dir)

    @staticmethod
    def list_all(session_dir: str | None = None) -> builtins.list[Any]:
        from picontext.session.listing import list_all_sessions

        return list_all_sessions(session_dir)

    @staticmethod
    def find_by_id(cwd: str, session_id: str, session_dir: str | None = None) -> str | None:
        from picontext.session.listing import find_session_by_id

        return find_session_by_id(cwd, session_id, session_dir)



def _defined(**fields: Any) -> dict[str, Any]:
    """Keyword fields minus the ones that are None (Pi writes undefined fields as absent)."""
    return {k: v for k, v in fields.items() if v is not None}


__all__ = ["APP_NAME", "SessionDirectory", "SessionManager", "TreeNode", "stderr_warn"]
