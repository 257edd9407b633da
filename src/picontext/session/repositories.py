"""The repositories behind `open_repository` (repository.py): a directory of JSONL files in Pi's
layout, and sessions in process memory. The PostgreSQL one is `postgres/repository.py`.

`BaseRepository` holds what does not depend on the store: opening a session as a
`SessionManager`, creating, forking, the latest session of a directory. A repository supplies
`locate(ref)` (an id, a unique id prefix, or what else it accepts, to a store), `place` (the store
of a new session), `list`, `import_bytes` and `export_bytes`.
"""

from __future__ import annotations

import builtins
import os
import time
from typing import TYPE_CHECKING, Any

from picontext._clock import iso_from_ms, js_date_ms
from picontext.errors import AmbiguousSession, SessionFormatError, SessionNotFound
from picontext.session import paths
from picontext.session.listing import (
    SessionInfo,
    build_session_info,
    find_most_recent_session,
    info_from_facts,
    jsonl_files,
    list_all_sessions,
    list_sessions,
)
from picontext.session.memory import MemorySessions, MemorySessionStore, memory_sessions
from picontext.session.protocol import SessionStore
from picontext.session.records import is_header, is_js_falsy, parsed_values
from picontext.session.store import JsonlSessionStore, read_session_bytes, read_session_header

if TYPE_CHECKING:
    from picontext.session.manager import SessionManager

__all__ = ["BaseRepository", "JsonlRepository", "MemoryRepository", "header_of_bytes", "newest_first"]


def manager_class() -> type[SessionManager]:
    """`SessionManager`, imported when a session is opened for writing: a command that only reads
    a store (`context --json`) does not load the manager, its index and live projection."""
    from picontext.session.manager import SessionManager

    return SessionManager


def header_of_bytes(data: bytes, source: str = "<bytes>") -> dict[str, Any]:
    """The header of a session file's bytes; SessionFormatError when the first value Pi keeps is
    not one (what every store refuses to import)."""
    for value in parsed_values(data.split(b"\n")):
        if is_js_falsy(value):
            continue
        if is_header(value):
            assert isinstance(value, dict)
            return value
        break
    raise SessionFormatError(f"Session file is not a valid pi session: {source}", path=source)


def newest_first(infos: builtins.list[SessionInfo]) -> builtins.list[SessionInfo]:
    return sorted(infos, key=lambda i: i.modified, reverse=True)


def by_prefix(ref: str, ids: builtins.list[str], where: str) -> str:
    """The one id of `ids` equal to `ref`, else the one starting with it (case-insensitively)."""
    if ref in ids:
        return ref
    lowered = ref.lower()
    found = sorted({i for i in ids if i.lower().startswith(lowered)})
    if not found:
        raise SessionNotFound(ref, where)
    if len(found) > 1:
        raise AmbiguousSession(ref, found, where)
    return found[0]


class BaseRepository:
    """A `SessionRepository` over `locate`/`place`; see the module docstring."""

    url = ""

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    # -- what each repository supplies

    def locate(self, ref: str) -> tuple[SessionStore, str | None]:
        """The store of the session `ref` names, and its file (None when not a file)."""
        raise NotImplementedError

    def place(self, cwd: str, session_id: str, timestamp: str) -> tuple[SessionStore, str | None]:
        raise NotImplementedError

    def create_at(self, ref: str, cwd: str, **options: Any) -> SessionManager:
        """`open(ref, create=True)` of a `ref` that names no session yet: a new session of that
        id (SessionNotFound when `ref` cannot be one)."""
        if not paths.is_valid_session_id(ref):
            raise SessionNotFound(ref, self.url)
        return self.create(cwd, id=ref, **options)

    def session_dir(self, cwd: str) -> str:
        """The manager's session directory for `cwd` ("" when sessions are not files)."""
        return ""

    def latest_store(self, cwd: str) -> tuple[SessionStore, str | None] | None:
        infos = self.list(cwd)
        return self.locate(infos[0].id) if infos else None

    def list(self, cwd: str | None = None) -> builtins.list[SessionInfo]:
        raise NotImplementedError

    def import_bytes(self, data: bytes) -> str:
        raise NotImplementedError

    def export_bytes(self, ref: str) -> bytes:
        raise NotImplementedError

    def close(self) -> None:
        return None

    # -- the same for every repository

    def import_file(self, path: str) -> str:
        """`import_bytes` of a session file: a FIFO, a device or a directory is refused before it
        is opened, a file that does not start as a session before more than 1 MiB of it is read
        (SessionFormatError, naming the file)."""
        data = read_session_bytes(path)
        try:
            return self.import_bytes(data)
        except SessionFormatError as exc:
            raise SessionFormatError(str(exc).replace("<bytes>", path), path=path) from None

    def store(self, ref: str) -> SessionStore:
        """The store of the session `ref` names (for commands that only read)."""
        return self.locate(ref)[0]

    def resolve(self, ref: str) -> str:
        """The id of the session `ref` names."""
        store = self.store(ref)
        header = store.read_header()
        if header is None:
            raise SessionFormatError(f"not a session (its first record is not a session header): {store.location}",
                                     path=store.location)
        return str(header["id"])

    def create(self, cwd: str, *, id: str | None = None, parent_session: str | None = None,
               **options: Any) -> SessionManager:
        """A new session for `cwd` (stored at its first assistant message, as Pi's)."""
        directory = self.session_dir(cwd)
        if directory:
            paths.ensure_dir(directory)  # as Pi: the session directory exists from here on
        return manager_class()(cwd, directory, None, True, new_session_id=id, parent_session=parent_session,
                              repository=self, **options)

    def open(self, ref: str, *, cwd: str | None = None, create: bool = False, **options: Any) -> SessionManager:
        """The session `ref` names. With `create`, a ref that names no session yet but could
        (a valid id; in a JSONL repository, a file path) is a new session there."""
        try:
            store, file = self.locate(ref)
        except SessionNotFound:
            if not create:
                raise
            return self.create_at(ref, paths.resolve_path(cwd or os.getcwd()), **options)
        return self.open_store(store, file, cwd=cwd, **options)

    def open_store(self, store: SessionStore, file: str | None, *, cwd: str | None = None,
                   **options: Any) -> SessionManager:
        directory = os.path.dirname(file) if file else ""
        return manager_class().open_store(store, file=file, session_dir=directory, cwd=cwd, repository=self,
                                         **options)

    def latest(self, cwd: str, **options: Any) -> SessionManager | None:
        """The most recently active session of `cwd`, or None."""
        found = self.latest_store(paths.resolve_path(cwd))
        return None if found is None else self.open_store(*found, **options)

    def fork(self, ref: str, cwd: str, *, id: str | None = None, **options: Any) -> SessionManager:
        """A copy of the whole session `ref` names, as a new session of `cwd` (`parentSession`:
        the source's location)."""
        source, _file = self.locate(ref)
        directory = self.session_dir(paths.resolve_path(cwd))
        if directory:
            paths.ensure_dir(directory)
        return manager_class().fork_store(source, cwd, self, id=id, session_dir=directory, repository=self,
                                         **options)


# ---------------------------------------------------------------------------------- JSONL


class JsonlRepository(BaseRepository):
    """Session files under `root`, one directory per cwd (`--home-u-proj--/<ts>_<id>.jsonl`),
    exactly as Pi keeps them under `~/.pi/agent/sessions`."""

    def __init__(self, root: str, *, fsync: bool = False) -> None:
        self.root = paths.resolve_path(root)
        self.url = self.root
        self.fsync = fsync  # fsync every append (docs/storage.md, "fsync policy")

    def store_at(self, path: str) -> JsonlSessionStore:
        return JsonlSessionStore(path, fsync=self.fsync)

    def session_dir(self, cwd: str) -> str:
        return paths.default_session_dir(cwd, self.root)

    def place(self, cwd: str, session_id: str, timestamp: str) -> tuple[SessionStore, str | None]:
        path = os.path.join(self.session_dir(cwd), paths.session_file_name(timestamp, session_id))
        return self.store_at(path), path

    def project_dirs(self) -> builtins.list[str]:
        try:
            names = os.listdir(self.root)
        except OSError:
            return []
        return [d for d in (os.path.join(self.root, n) for n in names) if os.path.isdir(d)]

    def session_files(self, cwd: str | None = None) -> builtins.list[str]:
        """The *.jsonl files of `cwd`'s directory, or of every project directory."""
        if cwd is not None:
            return jsonl_files(self.session_dir(cwd), self.root)
        return [f for d in self.project_dirs() for f in jsonl_files(d, self.root)]

    @staticmethod
    def is_path(ref: str) -> bool:
        return os.sep in ref or ref.endswith(".jsonl") or os.path.exists(ref)

    def locate(self, ref: str) -> tuple[SessionStore, str | None]:
        """A file path (an existing file wins), else an id or unique id prefix: looked up among
        the sessions of the current directory first, then of every directory."""
        if self.is_path(ref):
            path = paths.resolve_path(ref)
            store = self.store_at(path)
            if not store.exists():
                raise SessionNotFound(ref, message=f"no such file: {ref}")
            return store, path
        path = self.find(ref, os.getcwd())
        return self.store_at(path), path

    def create_at(self, ref: str, cwd: str, **options: Any) -> SessionManager:
        """A file path names a new session file there (as Pi's `--session`); an id that names no
        session never creates a file."""
        if not (os.sep in ref or ref.endswith(".jsonl")):
            raise SessionNotFound(ref, message=f"no session with id {ref!r} and no such file (to create a new "
                                  "session file, give a path such as ./name.jsonl)")
        path = paths.resolve_path(ref)
        return self.open_store(self.store_at(path), path, **options)

    def find(self, prefix: str, cwd: str) -> str:
        matches = self.ids_matching(self.session_files(cwd), prefix)
        if not matches:
            matches = self.ids_matching(self.session_files(), prefix)
        ids = sorted(set(matches.values()))
        if not ids:
            raise SessionNotFound(prefix, message=f"no session with id {prefix!r} and no such file")
        chosen = by_prefix(prefix, ids, self.url)
        return max((p for p, i in matches.items() if i == chosen), key=lambda f: self.store_at(f).modified())

    @staticmethod
    def ids_matching(files: builtins.list[str], prefix: str) -> dict[str, str]:
        """{path: id} of the regular session files whose header id starts with `prefix`."""
        found: dict[str, str] = {}
        lowered = prefix.lower()
        for path in files:
            try:
                header = read_session_header(path)  # refuses a FIFO or device before opening it
            except (OSError, SessionFormatError):
                continue
            session_id = header.get("id") if isinstance(header, dict) else None
            if isinstance(session_id, str) and session_id.lower().startswith(lowered):
                found[path] = session_id
        return found

    def latest_store(self, cwd: str) -> tuple[SessionStore, str | None] | None:
        path = find_most_recent_session(self.session_dir(cwd))
        return None if path is None else (self.store_at(path), path)

    def list(self, cwd: str | None = None) -> builtins.list[SessionInfo]:
        if cwd is not None:
            return list_sessions(cwd, self.session_dir(cwd))
        return list_all_sessions(root=self.root)

    def info(self, path: str) -> SessionInfo | None:
        return build_session_info(path)

    def import_bytes(self, data: bytes) -> str:
        """Store a session file's bytes, unchanged, as `<cwd dir>/<ts>_<id>.jsonl`;
        FileExistsError when a session of that id is already here."""
        header = header_of_bytes(data)
        session_id = header["id"]
        if not paths.is_valid_session_id(session_id):
            raise SessionFormatError(f"Session id {session_id!r} cannot name a session file", path="<bytes>")
        if session_id in self.ids_matching(self.session_files(), session_id).values():
            raise FileExistsError(f"session {session_id} already exists in {self.url}")
        cwd = header.get("cwd")
        if not (isinstance(cwd, str) and cwd):
            cwd = "/"
        created = js_date_ms(header.get("timestamp"))  # the file's name: from the header's time if it has one
        valid = created == created and -62135596800000 <= created <= 253402300799000
        stamp = iso_from_ms(int(created) if valid else int(time.time() * 1000))
        _store, path = self.place(cwd, session_id, stamp)
        assert path is not None
        self.store_at(path).create_bytes(data)
        return str(session_id)

    def export_bytes(self, ref: str) -> bytes:
        _store, file = self.locate(ref)
        assert file is not None
        return self.store_at(file).read_bytes()


# ---------------------------------------------------------------------------------- memory


class MemoryRepository(BaseRepository):
    """Sessions in process memory (`memory.py`): `memory:` private, `memory:NAME` shared."""

    def __init__(self, name: str = "", sessions: MemorySessions | None = None) -> None:
        self.sessions = sessions or memory_sessions(name)
        self.url = f"memory:{name}"

    def store_of(self, session_id: str) -> MemorySessionStore:
        return MemorySessionStore(self.sessions, session_id)

    def place(self, cwd: str, session_id: str, timestamp: str) -> tuple[SessionStore, str | None]:
        return self.store_of(session_id), None

    def locate(self, ref: str) -> tuple[SessionStore, str | None]:
        ref = ref.rsplit("#", 1)[-1] if ref.startswith("memory:") else ref
        return self.store_of(by_prefix(ref, self.sessions.ids(), self.url)), None

    def list(self, cwd: str | None = None) -> builtins.list[SessionInfo]:
        wanted = None if cwd is None else paths.resolve_path(cwd)
        infos = []
        for session_id in self.sessions.ids():
            info = info_of(self.store_of(session_id))
            if info is not None and (wanted is None or (info.cwd and paths.resolve_path(info.cwd) == wanted)):
                infos.append(info)
        return newest_first(infos)

    def import_bytes(self, data: bytes) -> str:
        session_id = header_of_bytes(data)["id"]
        self.store_of(session_id).create_bytes(data)
        return str(session_id)

    def export_bytes(self, ref: str) -> bytes:
        store = self.store_of(self.resolve(ref))
        data = store.export_bytes()
        if data is None:
            raise SessionNotFound(ref, self.url)
        return data


def info_of(store: SessionStore) -> SessionInfo | None:
    """A listing line from a store's facts."""
    facts = store.facts()
    return None if facts is None else info_from_facts(facts, store.location, None)
