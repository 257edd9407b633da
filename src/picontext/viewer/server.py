"""`picontext serve`: a local web viewer over the sessions of a directory.

`/` lists the sessions (as `picontext sessions` does); `/view/KEY` is the export page of one,
which polls `/api/view/KEY?stamp=1` every second and, when the session's stamp changed (its
store's tail: a file grows or is replaced, a database log too), fetches `/api/view/KEY` (the page data as
JSON) and redraws: a running session can be watched. Only sessions of the listing are served
(KEY is a hash of the location, never a path), requests with a foreign Host header are refused
(DNS rebinding), and the server binds 127.0.0.1 by default.
"""

from __future__ import annotations

import hashlib
import html
import os
import socket
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import orjson

from picontext.errors import PicontextError
from picontext.session.migrations import migrate_to_current
from picontext.session.protocol import SessionStore
from picontext.session.repository import SessionInfo, session_file
from picontext.viewer.model import build_view
from picontext.viewer.page import pack, render_page

__all__ = ["ViewerServer", "file_store", "session_key", "stamp_of", "view_info", "view_of"]

Lister = Callable[[], list[SessionInfo]]


def session_key(location: str) -> str:
    """The URL key of a listed session: a hash of its location, never the location itself."""
    return hashlib.sha256(location.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def file_store(info: SessionInfo) -> SessionStore:
    """The store of a listed session file (the default of `ViewerServer(store_of=)`)."""
    if info.file is None:
        raise PicontextError(f"not a session file: {info.location}")
    return session_file(info.file)


def stamp_of(store: SessionStore, location: str) -> str:
    """Changes whenever the session does (its store's tail: cheap, polled every second by each
    open page)."""
    tail = store.tail()
    if tail is None:
        raise PicontextError(f"no longer stored: {location}")
    return f"{tail.generation}-{tail.offset}"


def view_info(info: SessionInfo, store: SessionStore) -> tuple[dict[str, Any], list[bytes]]:
    name = os.path.basename(info.file) if info.file else info.id
    return view_of(store.load(), name, f"not a session file: {info.location}")


def view_of(result: Any, name: str, invalid: str) -> tuple[dict[str, Any], list[bytes]]:
    """The page data of a loaded session (a store's `LoadResult`); `invalid`: the error's text
    when it holds no session."""
    if not result.valid:
        raise PicontextError(invalid)
    entries = result.entries
    migrate_to_current(entries)
    return build_view(entries, None, file_name=name)


_LIST_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:18px;color:#1d1f21;background:#fbfbfa}
table{border-collapse:collapse}td,th{padding:4px 12px;border-bottom:1px solid #e3e4e6;text-align:left}
td.num{text-align:right}a{color:#2f6fdf;text-decoration:none}.dim{color:#8a8f98}"""


def _list_page(infos: list[SessionInfo], where: str) -> bytes:
    rows = []
    for info in infos:
        title = info.name or info.first_message or "(no messages)"
        title = " ".join(title.split())[:100]
        rows.append(
            f'<tr><td><a class="session" href="/view/{session_key(info.location)}">{html.escape(title)}</a></td>'
            f'<td class="num">{info.entry_count}</td><td class="num">{info.size:,}</td>'
            f'<td>{html.escape(info.modified.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S"))}</td>'
            f'<td class="dim">{html.escape(info.id)}</td><td class="dim">{html.escape(info.cwd)}</td></tr>')
    body = "".join(rows) or '<tr><td colspan="6" class="dim">no sessions</td></tr>'
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><meta http-equiv='refresh' content='5'>"
            f"<title>picontext sessions</title><style>{_LIST_CSS}</style></head><body>"
            f"<h1>Sessions</h1><p class='dim'>{html.escape(where)} · {len(infos)} sessions · "
            f"{datetime.now(tz=UTC).strftime('%H:%M:%S')} UTC</p>"
            f"<table><tr><th>name / first message</th><th>entries</th><th>bytes</th><th>last activity</th>"
            f"<th>id</th><th>cwd</th></tr>{body}</table></body></html>")
    return page.encode("utf-8")


class ViewerServer:
    """A threaded HTTP server; `start()` runs it in a thread, `serve_forever()` in the caller."""

    def __init__(self, lister: Lister, where: str, host: str = "127.0.0.1", port: int = 0,
                 view: Callable[[SessionInfo, SessionStore], tuple[dict[str, Any], list[bytes]]] = view_info,
                 store_of: Callable[[SessionInfo], SessionStore] = file_store) -> None:
        """`lister`: the sessions to serve; `store_of`: the store of a listed one (default: its
        file)."""
        self.lister = lister
        self.where = where
        self.view = view
        self.store_of = store_of
        handler = self._handler_class()
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]  # ::1 is IPv6

        class Server(ThreadingHTTPServer):
            address_family = family

        self.httpd = Server((host, port), handler)
        self.httpd.daemon_threads = True
        self.host = host
        self.port = int(self.httpd.server_address[1])
        self._thread: threading.Thread | None = None
        self._listed: dict[str, SessionInfo] = {}

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def start(self) -> None:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="picontext-serve", daemon=True)
        self._thread.start()

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _list(self) -> list[SessionInfo]:
        infos = self.lister()
        self._listed = {session_key(i.location): i for i in infos}
        return infos

    def _find(self, key: str) -> tuple[SessionInfo, SessionStore] | None:
        # Listing reads every session's facts: the page polls every second, so remember the
        # listed sessions and list again only for a key not seen yet (or gone).
        info = self._listed.get(key)
        store = None if info is None else self.store_of(info)
        if store is None or not store.exists():
            self._list()
            info = self._listed.get(key)
            store = None if info is None else self.store_of(info)
        return None if info is None or store is None else (info, store)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "picontext"
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet: the terminal is the user's
                return

            def _send(self, status: int, body: bytes, kind: str, extra: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.send_header("X-Content-Type-Options", "nosniff")
                self.send_header("Referrer-Policy", "no-referrer")
                for key, value in (extra or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _error(self, status: HTTPStatus, text: str) -> None:
                self._send(status, text.encode("utf-8") + b"\n", "text/plain; charset=utf-8")

            def do_HEAD(self) -> None:
                self.do_GET()

            def do_GET(self) -> None:
                host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]")
                if host not in ("127.0.0.1", "localhost", "::1", server.host):
                    self._error(HTTPStatus.FORBIDDEN, "unexpected Host header")
                    return
                url = urlsplit(self.path)
                parts = [p for p in url.path.split("/") if p]
                try:
                    if not parts:
                        infos = server._list()
                        self._send(200, _list_page(infos, server.where), "text/html; charset=utf-8",
                                   {"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'"})
                    elif len(parts) == 2 and parts[0] == "view":
                        self._page(parts[1])
                    elif len(parts) == 3 and parts[:2] == ["api", "view"]:
                        self._data(parts[2], "stamp=1" in url.query.split("&"))
                    else:
                        self._error(HTTPStatus.NOT_FOUND, "not found")
                except (OSError, PicontextError) as exc:
                    self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"cannot read the session: {exc}")
                except Exception as exc:  # a bug must not drop the page's connection unanswered
                    self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"cannot show the session: {type(exc).__name__}")

            def _page(self, key: str) -> None:
                found = server._find(key)
                if found is None:
                    self._error(HTTPStatus.NOT_FOUND, "no such session in this directory")
                    return
                info, store = found
                stamp = stamp_of(store, info.location)
                meta, lines = server.view(info, store)
                page = render_page(meta, lines, live_url=f"/api/view/{key}?v=1", stamp=stamp)
                self._send(200, page.encode("utf-8"), "text/html; charset=utf-8")

            def _data(self, key: str, stamp_only: bool) -> None:
                found = server._find(key)
                if found is None:
                    self._error(HTTPStatus.NOT_FOUND, "no such session in this directory")
                    return
                info, store = found
                stamp = stamp_of(store, info.location)
                if stamp_only:
                    body = orjson.dumps({"stamp": stamp})
                else:
                    meta, lines = server.view(info, store)
                    body = orjson.dumps({"stamp": stamp, "meta": meta, "lines": pack(b"\n".join(lines))})
                self._send(200, body, "application/json")

        return Handler
