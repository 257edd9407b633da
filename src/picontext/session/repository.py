"""Sessions by id, in any store: `SessionRepository` and the one factory, `open_repository`.

A front end (the CLI, the viewer, an adapter for another agent framework) asks a repository for
a session by id or unique id prefix and gets a `SessionManager`; it never asks which store holds
it. `open_repository(url)` is the only place in picontext that looks at the kind of store:

    None               $PICONTEXT_STORE if set, else the JSONL directory `$PICONTEXT_DIR/sessions`
    a directory path,  JSONL files under that directory, in Pi's layout (one subdirectory per
    file:///dir,       working directory, `<ts>_<id>.jsonl` files): `PICONTEXT_DIR=~/.pi/agent`
    jsonl:/dir         shares a Pi user's sessions
    postgresql://...   a PostgreSQL database (`pip install 'picontext[postgres]'`)
    memory:            sessions in process memory, private to this repository
    memory:NAME        ... shared by every `memory:NAME` repository of the process
    SCHEME:...         a store of another package: a factory registered for SCHEME with
                       `register_store`, or installed under the `picontext.stores` entry-point
                       group (name: the scheme; value: `module:factory`, called with the URL)

A bad URL, a store that cannot be reached or a missing driver is `StoreUnavailable` (one line).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import unquote, urlsplit

from picontext.errors import ConfigError, StoreUnavailable
from picontext.session import paths
from picontext.session.listing import SessionInfo, list_all_sessions
from picontext.session.protocol import SessionStore
from picontext.session.repositories import BaseRepository, JsonlRepository, MemoryRepository

if TYPE_CHECKING:
    from picontext.session.manager import SessionManager

__all__ = [
    "STORE_ENV",
    "BaseRepository",
    "JsonlRepository",
    "MemoryRepository",
    "SessionInfo",
    "SessionRepository",
    "StoreFactory",
    "list_directory",
    "open_repository",
    "register_store",
    "session_file",
    "store_url",
]

STORE_ENV = "PICONTEXT_STORE"
ENTRY_POINT_GROUP = "picontext.stores"


@runtime_checkable
class SessionRepository(Protocol):
    """Sessions by id: see the module docstring. `BaseRepository` implements everything above
    `locate`/`place`/`list`/`import_bytes`/`export_bytes` for a new kind of store."""

    url: str

    def create(self, cwd: str, *, id: str | None = None, parent_session: str | None = None,
               **options: Any) -> SessionManager:
        """A new session of `cwd` (written at its first assistant message, as Pi's).
        `options`: the manager's (`warn=`, `clock=`, `ids=`)."""
        ...

    def open(self, ref: str, *, cwd: str | None = None, create: bool = False, **options: Any) -> SessionManager:
        """A full id or unique id prefix (a JSONL repository also takes a file path);
        SessionNotFound / AmbiguousSession. With `create`, a ref that could name a new session
        (a valid id; a file path) is one."""
        ...

    def latest(self, cwd: str, **options: Any) -> SessionManager | None:
        """The most recently active session of `cwd`."""
        ...

    def list(self, cwd: str | None = None) -> list[SessionInfo]:
        """Listing lines, newest activity first; `cwd` None: every directory's."""
        ...

    def fork(self, ref: str, cwd: str, *, id: str | None = None, **options: Any) -> SessionManager:
        """A copy of the whole session as a new session of `cwd` (`parentSession` set)."""
        ...

    def import_bytes(self, data: bytes) -> str:
        """Store a Pi JSONL session file's bytes (kept byte for byte); returns its id.
        SessionFormatError when it is not a session, FileExistsError when the id is taken."""
        ...

    def import_file(self, path: str) -> str:
        """`import_bytes` of a session file (what is not a regular file is refused unopened)."""
        ...

    def export_bytes(self, ref: str) -> bytes:
        """The session as its JSONL file, byte for byte what was imported or written."""
        ...

    def latest_store(self, cwd: str) -> tuple[SessionStore, str | None] | None:
        """`latest` without opening it: its store and file (None when `cwd` has no session)."""
        ...

    def store(self, ref: str) -> SessionStore:
        """The store of a session, for commands that only read it."""
        ...

    def resolve(self, ref: str) -> str:
        """The id of the session `ref` names."""
        ...

    def place(self, cwd: str, session_id: str, timestamp: str) -> tuple[SessionStore, str | None]:
        """The store of a new session and its file (None when not a file); see `SessionHome`."""
        ...

    def close(self) -> None: ...


StoreFactory = Callable[[str], SessionRepository]
_FACTORIES: dict[str, StoreFactory] = {}
_BUILT_IN = ("postgresql", "postgres", "memory", "jsonl", "file")


def register_store(scheme: str, factory: StoreFactory | None) -> None:
    """Let `open_repository` build `scheme:...` URLs with `factory(url)` (None: forget it). For a
    store used in one process (tests, an application); an installed package declares an entry
    point in the `picontext.stores` group instead, and every picontext command then finds it."""
    key = scheme.lower().rstrip(":")
    if key in _BUILT_IN or len(key) < 2 or not key.replace("+", "").replace("-", "").replace(".", "").isalnum():
        raise ValueError(f"{scheme!r} cannot name a third-party store (a URL scheme other than {', '.join(_BUILT_IN)})")
    if factory is None:
        _FACTORIES.pop(key, None)
    else:
        _FACTORIES[key] = factory


def _third_party(scheme: str) -> StoreFactory | None:
    """The factory registered or installed for `scheme`; entry points are read only for a
    scheme that is neither built in nor registered (no cost for the usual URLs)."""
    found = _FACTORIES.get(scheme)
    if found is not None:
        return found
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINT_GROUP, name=scheme):
        try:
            loaded = point.load()
        except Exception as exc:  # a broken plug-in: one line naming it, not its traceback
            raise StoreUnavailable(f"the {scheme}: store ({point.value}) could not be loaded: "
                                   f"{type(exc).__name__}: {exc}") from None
        if not callable(loaded):
            raise StoreUnavailable(f"the {scheme}: store ({point.value}) is not a factory")
        return loaded
    return None


def _installed_schemes() -> list[str]:
    from importlib.metadata import entry_points

    return sorted({*_FACTORIES, *(p.name for p in entry_points(group=ENTRY_POINT_GROUP))})


def _build(factory: StoreFactory, url: str) -> SessionRepository:
    """`factory(url)`; what it raises becomes one line (StoreUnavailable) unless it is already one
    of picontext's errors."""
    from picontext.errors import PicontextError

    try:
        repo = factory(url)
    except PicontextError:
        raise
    except Exception as exc:
        raise StoreUnavailable(f"session store {url!r} is unavailable: {type(exc).__name__}: {exc}") from None
    if not isinstance(repo, SessionRepository):
        raise StoreUnavailable(f"the store factory for {url!r} returned {type(repo).__name__}, not a SessionRepository")
    return repo


def store_url(env: dict[str, str] | None = None) -> str | None:
    """`$PICONTEXT_STORE`, or None when unset or blank."""
    environ = os.environ if env is None else env
    return environ.get(STORE_ENV, "").strip() or None


def open_repository(url: str | None = None) -> SessionRepository:
    """The repository `url` names (see the module docstring); the default: `$PICONTEXT_STORE`,
    else the JSONL directory under `$PICONTEXT_DIR`."""
    if url is None:
        url = store_url()
    if url is None:
        return JsonlRepository(paths.sessions_root())
    url = url.strip()
    if url.startswith(("postgresql://", "postgres://")):
        return _postgres(url)
    if url.startswith("memory:"):
        return MemoryRepository(url[len("memory:"):])
    if url.startswith("jsonl:"):
        return JsonlRepository(_local(url[len("jsonl:"):], url))
    if url.startswith("file:"):
        parts = urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise StoreUnavailable(f"unsupported store {url!r}: a file: URL names a local directory")
        return JsonlRepository(_local(unquote(parts.path), url))
    scheme = urlsplit(url).scheme.lower()
    if url and (not scheme or len(scheme) == 1 or os.sep in url.split(":", 1)[0]):  # a path (C: on Windows)
        return JsonlRepository(_local(url, url))
    factory = _third_party(scheme)
    if factory is not None:
        return _build(factory, url)
    others = "".join(f", {s}:..." for s in _installed_schemes())
    raise StoreUnavailable(f"unsupported {STORE_ENV} {url!r}: expected a directory, file:///dir, jsonl:/dir, "
                           f"postgresql://... or memory:[NAME]{others}")


def session_file(path: str) -> SessionStore:
    """The store of one session file named on a command line (a path, not an id): what reads or
    writes it (a FIFO, a device or a directory is refused before it is opened)."""
    resolved = paths.resolve_path(path)
    return JsonlRepository(os.path.dirname(resolved)).store_at(resolved)


def list_directory(directory: str) -> list[SessionInfo]:
    """The session files of one directory (not Pi's layout: every `*.jsonl` in it, whatever its
    project), newest activity first: `picontext sessions --dir` and `serve --dir`."""
    return list_all_sessions(directory)


def _local(path: str, url: str) -> str:
    if not path:
        raise StoreUnavailable(f"unsupported store {url!r}: no directory named")
    resolved = paths.resolve_path(path)
    if os.path.exists(resolved) and not os.path.isdir(resolved):
        raise StoreUnavailable(f"session store {resolved} is not a directory")
    return resolved


def _postgres(url: str) -> SessionRepository:
    try:
        from picontext.session.postgres.repository import PostgresRepository
    except ConfigError as exc:  # psycopg missing: the message names the extra
        raise StoreUnavailable(str(exc)) from None
    return PostgresRepository(url)
