"""Writing imported sessions: streamed to temporary files, put in place all together or not at all.

An import reads its sources line by line and writes each Pi session as it goes (a 100 MB
transcript is never held in memory). Every session goes to a temporary file beside its final
name; only when every source of the command has been read without error are the temporary files
renamed into place. A bad line anywhere, or a refusal to overwrite, removes them all: nothing
partial is ever left under a session name.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

from picontext import _json
from picontext.errors import PicontextError
from picontext.session import paths
from picontext.session.migrations import CURRENT_SESSION_VERSION

if TYPE_CHECKING:
    from picontext.session.protocol import SessionStore
    from picontext.session.repository import SessionRepository

__all__ = ["ImportBatch", "ImportFailed", "SessionSink", "custom_entry", "session_header"]

_BUFFER = 1 << 20


class ImportFailed(PicontextError):
    """A source that cannot be imported: `FILE:LINE: why` (one line), nothing written."""

    def __init__(self, source: str, message: str, line: int | None = None) -> None:
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {message}")
        self.source = source
        self.line = line


def session_header(session_id: str, timestamp: str, cwd: str, parent_session: str | None = None) -> dict[str, Any]:
    """A v3 header in Pi's key order (parentSession only when there is one)."""
    header: dict[str, Any] = {"type": "session", "version": CURRENT_SESSION_VERSION, "id": session_id,
                              "timestamp": timestamp, "cwd": cwd}
    if parent_session is not None:
        header["parentSession"] = parent_session
    return header


def custom_entry(entry_id: str, parent_id: str | None, timestamp: str, custom_type: str, data: Any) -> dict[str, Any]:
    """A `custom` entry in Pi's key order (type, customType, data, id, parentId, timestamp)."""
    return {"type": "custom", "customType": custom_type, "data": data, "id": entry_id, "parentId": parent_id,
            "timestamp": timestamp}


@dataclass(slots=True)
class SessionSink:
    """One Pi session being written: header first, then entries in order, to `tmp_path`."""

    path: str
    tmp_path: str
    header: dict[str, Any]
    source: str
    entries: int = 0
    store: SessionStore | None = None  # where it goes when that is not a file (`path`: its location)
    _file: BinaryIO | None = None

    def open(self) -> None:
        paths.ensure_dir(os.path.dirname(self.path))
        fd = os.open(self.tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        self._file = os.fdopen(fd, "wb", buffering=_BUFFER)
        self._file.write(_json.dumps_line(self.header))

    def add(self, entry: dict[str, Any]) -> None:
        assert self._file is not None, "SessionSink.add before open"
        self._file.write(_json.dumps_line(entry))
        self.entries += 1

    def finish(self) -> None:
        """Flush and fsync: the file is complete before any rename makes it visible."""
        if self._file is None:
            return
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        self._file = None

    def discard(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
        with contextlib.suppress(OSError):
            os.unlink(self.tmp_path)

    @property
    def session_id(self) -> str:
        return str(self.header["id"])


@dataclass(slots=True)
class ImportBatch:
    """The sessions one command writes. `commit()` renames them all into place; `abort()` (or an
    exception inside `with`) removes every temporary file. Existing sessions are refused unless
    `force`, before anything is renamed."""

    out_dir: str | None
    force: bool = False
    repository: SessionRepository | None = None  # without `out_dir`: where the sessions go
    sinks: list[SessionSink] = field(default_factory=list)
    _targets: set[str] = field(default_factory=set)
    _spool: str | None = None  # temporary files of sessions bound for a store that is not files

    def __enter__(self) -> ImportBatch:
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        if exc_type is not None:
            self.abort()

    def _target(self, header: dict[str, Any]) -> tuple[str, str, SessionStore | None]:
        """(final path or store location, temporary file, the store when it is not a file)."""
        cwd, session_id, stamp = str(header["cwd"]), str(header["id"]), str(header["timestamp"])
        if self.out_dir or self.repository is None:
            directory = paths.resolve_path(self.out_dir) if self.out_dir else paths.default_session_dir(cwd)
            path = os.path.join(directory, paths.session_file_name(stamp, session_id))
            return path, f"{path}.{os.getpid()}.import.tmp", None
        store, file = self.repository.place(cwd, session_id, stamp)
        if file is not None:
            return file, f"{file}.{os.getpid()}.import.tmp", None
        if self._spool is None:
            self._spool = tempfile.mkdtemp(prefix="picontext-import-")
        return store.location, os.path.join(self._spool, f"{len(self.sinks)}.jsonl"), store

    def open(self, header: dict[str, Any], source: str) -> SessionSink:
        path, tmp_path, store = self._target(header)
        if path in self._targets:
            raise ImportFailed(source, f"imports the same session twice in one command ({os.path.basename(path)})")
        self._targets.add(path)
        sink = SessionSink(path, tmp_path, header, source, store=store)
        self.sinks.append(sink)
        try:
            sink.open()
        except OSError as exc:
            raise ImportFailed(source, f"cannot write {sink.tmp_path}: {exc.strerror}") from None
        return sink

    def commit(self) -> list[SessionSink]:
        """Every session in place, or none: sessions bound for a store that is not files are
        checked first and stored last (a store cannot take one back)."""
        renamed: list[SessionSink] = []
        files = [s for s in self.sinks if s.store is None]
        stored = [s for s in self.sinks if s.store is not None]
        try:
            for sink in self.sinks:
                sink.finish()
            if not self.force:
                for sink in files:
                    if os.path.lexists(sink.path):
                        raise ImportFailed(sink.source, f"{sink.path} exists (imported before?); --force replaces it")
                for sink in stored:
                    assert sink.store is not None
                    if sink.store.exists():
                        raise ImportFailed(sink.source, f"session {sink.session_id} is already in the store "
                                           "(imported before?); --force replaces it")
            for sink in files:
                os.replace(sink.tmp_path, sink.path)
                renamed.append(sink)
            for sink in stored:
                self._store(sink)
        except BaseException as exc:
            self.abort()
            if not self.force:  # new files only: take back the ones already renamed
                for sink in renamed:
                    with contextlib.suppress(OSError):
                        os.unlink(sink.path)
            if isinstance(exc, OSError):
                raise ImportFailed(self.sinks[len(renamed)].source if len(renamed) < len(self.sinks) else "import",
                                   f"cannot write {exc.filename or 'the session'}: {exc.strerror}") from None
            raise
        self._drop_spool()
        return list(self.sinks)

    def _store(self, sink: SessionSink) -> None:
        assert sink.store is not None and self.repository is not None
        if sink.store.exists():  # --force: the whole log replaced, as a file would be
            with open(sink.tmp_path, "rb") as f:
                sink.store.replace([_json.loads(line) for line in f.read().splitlines() if line.strip()])
        else:
            self.repository.import_file(sink.tmp_path)

    def abort(self) -> None:
        for sink in self.sinks:
            sink.discard()
        self._drop_spool()

    def _drop_spool(self) -> None:
        if self._spool is not None:
            shutil.rmtree(self._spool, ignore_errors=True)
            self._spool = None
