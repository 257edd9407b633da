"""Where sessions live: `<PICONTEXT_DIR>/sessions/--<encoded cwd>--/<ts>_<id>.jsonl`.

Laid out exactly as Pi lays out `~/.pi/agent`, so `PICONTEXT_DIR=~/.pi/agent` reads and writes
a Pi user's sessions directly. Caches picontext can rebuild live apart, in `cache_dir()`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

from picontext.errors import SessionWriteError

DEFAULT_DIR = "~/.picontext"
SESSION_ID_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")
SESSION_FILE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z_(.+)\.jsonl$")


def resolve_path(path: str | os.PathLike[str], base: str | None = None) -> str:
    """Absolute, normalized path: `~` expanded, file:// URLs converted, trailing separators gone."""
    text = os.fspath(path)
    if text.startswith("file://"):
        text = unquote(urlparse(text).path)
    text = os.path.expanduser(text)
    if not os.path.isabs(text):
        text = os.path.join(base or os.getcwd(), text)
    text = os.path.normpath(text)
    if len(text) > 1:
        text = text.rstrip("/\\") or "/"
    return text


def agent_dir(env: dict[str, str] | None = None) -> str:
    """The picontext home: `$PICONTEXT_DIR` or ~/.picontext."""
    environ = os.environ if env is None else env
    return resolve_path(environ.get("PICONTEXT_DIR") or DEFAULT_DIR)


def cache_dir(env: dict[str, str] | None = None) -> str:
    """picontext's own cache directory (the session index and entry columns, which it can always
    rebuild): `$PICONTEXT_CACHE_DIR`, else `$XDG_CACHE_HOME/picontext` (an absolute one: the XDG
    rule), else `~/.cache/picontext`. Never under `PICONTEXT_DIR`, which may be Pi's `~/.pi/agent`:
    reading sessions writes nothing where they live."""
    environ = os.environ if env is None else env
    explicit = environ.get("PICONTEXT_CACHE_DIR")
    if explicit:
        return resolve_path(explicit)
    xdg = environ.get("XDG_CACHE_HOME") or ""
    return os.path.join(resolve_path(xdg if os.path.isabs(xdg) else "~/.cache"), "picontext")


def sessions_root(env: dict[str, str] | None = None) -> str:
    return os.path.join(agent_dir(env), "sessions")


def encode_cwd(cwd: str) -> str:
    """Pi's directory name for a working directory: `/home/u/a b/c:d` -> `--home-u-a b-c-d--`."""
    resolved = resolve_path(cwd)
    if resolved[:1] in ("/", "\\"):
        resolved = resolved[1:]
    return "--" + re.sub(r"[/\\:]", "-", resolved) + "--"


def default_session_dir(cwd: str, root: str | None = None, *, create: bool = False) -> str:
    """Per-cwd directory under the sessions root (created only when asked to)."""
    path = os.path.join(root or sessions_root(), encode_cwd(cwd))
    if create:
        ensure_dir(path)
    return path


def file_timestamp(iso: str) -> str:
    return iso.replace(":", "-").replace(".", "-")


def session_file_name(iso_timestamp: str, session_id: str) -> str:
    return f"{file_timestamp(iso_timestamp)}_{session_id}.jsonl"


def is_valid_session_id(value: object) -> bool:
    return isinstance(value, str) and SESSION_ID_RE.match(value) is not None and "\n" not in value


def ensure_dir(path: str | Path) -> None:
    """Create `path` and its missing parents as 0700, like the session files (0600) they hold:
    directory names are project paths, which other users of the machine need not list.
    Directories that already exist keep their mode."""
    path = os.path.abspath(path)
    missing: list[str] = []
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            if not os.path.isdir(directory):
                raise SessionWriteError(f"Cannot create the session directory {directory}: "
                                        "a file of that name is in the way") from None
            continue  # another process made it first
        except OSError as exc:  # a read-only filesystem, a directory of another user
            raise SessionWriteError(f"Cannot create the session directory {directory}: {exc.strerror}") from None
        os.chmod(directory, 0o700)  # mkdir's mode is filtered by the umask
