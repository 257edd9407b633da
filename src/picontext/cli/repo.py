"""The session repository every command works on, chosen once per process.

`--store URL` (anywhere on the command line, for every command) or `$PICONTEXT_STORE` names it;
without either it is the JSONL directory under `$PICONTEXT_DIR` (docs/storage.md). Commands
take a session id or unique id prefix (a file path too, for session files) and never ask which
kind of store holds it: `picontext.session.repository.open_repository` is the one place that
knows.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from picontext.session.repository import SessionRepository, open_repository, store_url

if TYPE_CHECKING:
    from picontext.session.manager import SessionManager

__all__ = ["apply_store_flag", "choose_store", "chosen_url", "open_session", "repository"]

_choice: dict[str, str] = {}  # "url": what --store said (absent: $PICONTEXT_STORE decides)


def choose_store(url: str | None) -> None:
    """Make `url` the store of this process's commands (None: back to $PICONTEXT_STORE)."""
    if url is None:
        _choice.pop("url", None)
    else:
        _choice["url"] = url


def apply_store_flag(argv: Sequence[str]) -> list[str]:
    """Take `--store URL` / `--store=URL` out of the arguments (valid on every command, in any
    position) and make it this command's store (`choose_store`; without it, $PICONTEXT_STORE)."""
    choose_store(None)
    out: list[str] = []
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            out += args[i:]
            break
        if arg == "--store" and i + 1 < len(args):
            choose_store(args[i + 1])
            i += 2
            continue
        if arg.startswith("--store="):
            choose_store(arg.split("=", 1)[1])
            i += 1
            continue
        out.append(arg)
        i += 1
    return out


def chosen_url() -> str | None:
    """The store URL in effect: --store's, else $PICONTEXT_STORE's, else None (the default)."""
    url = _choice.get("url", store_url())
    return (url.strip() or None) if url is not None else None


def repository() -> SessionRepository:
    """The repository of this command (cheap to open: a database's connection pool is the
    process's); StoreUnavailable in one line."""
    quiet_driver_logs()
    return open_repository(chosen_url())


def open_session(ref: str, loaded: Any = None) -> SessionManager:
    """A writable SessionManager for the session `ref` names. `loaded`: the session as the
    caller just read it (`loading.read_session`), not read again."""
    return repository().open(ref, loaded=loaded)


def quiet_driver_logs() -> None:
    """The CLI reports a store failure in one line of its own; a database driver's pool logs
    (failed reconnections, discarded connections) would print before it through logging's
    last-resort handler. Library users keep them."""
    logger = logging.getLogger("psycopg.pool")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
        logger.propagate = False
