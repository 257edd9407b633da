"""`picontext serve`: a local web viewer over the sessions of a directory.

`/` lists the sessions (as `picontext sessions` does); `/view/KEY` is the export page of one,
which polls `/api/view/KEY?stamp=1` every second and, when the session's stamp changed (a file:
size and mtime; a session database: the log's tail), fetches `/api/view/KEY` (the page data as
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
from typing import Any, Protocol
from urllib.parse import urlsplit

import orjson

from picontext.errors import PicontextError
from picontext.session.listing import SessionInfo
from picontext.session.migrations import migrate_to_current
from picontext.session.store import read_session_file
from picontext.viewer.model import build_view
from picontext.viewer.page import pack, render_page

__all__ = ["FileSource", "SessionSource", "ViewerServer", "session_key", "view_of"]

Lister = Callable[[], list[SessionInfo]]


class SessionSource(Protocol):
    """Where the listed sessions are read from: session files, or a session database (the CLI
    passes one for `--store URL`)."""

    def exists(self, location: str) -> bool: ...

    def stamp(self, location: str) -> str:
        """Changes whenever the session does (cheap: polled every second by each open page)."""
        ...

    def view(self, location: str) -> tuple[dict[str, Any], list[bytes]]: ...


def session_key(path: str) -> str:
    return hashlib.sha256(os.path.abspath(path).encode("utf-8", "surrogatepass")).hexdigest()[:16]


class FileSource:
    """Session files: stamped by size and mtime."""

    def exists(self, location: str) -> bool:
        return os.path.exists(location)

    def stamp(self, location: str) -> str:
        st = os.stat(location)
        return f"{st.st_size}-{st.st_mtime_ns}"

    def view(self, location: str) -> tuple[dict[str, Any], list[bytes]]:
        return view_of(read_session_file(location), os.path.basename(location), f"not a session file: {location}")


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
            f'<tr><td><a class="session" href="/view/{session_key(info.path)}">{html.escape(title)}</a></td>'
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
                 source: SessionSource | None = None) -> None:
        self.lister = lister
        self.where = where
        self.source: SessionSource = source or FileSource()
        handler = self._handler_class()
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]  # ::1 is IPv6

        class Server(ThreadingHTTPServer):
            address_family = family

        self.httpd = Server((host, port), handler)
        self.httpd.daemon_threads = True
        self.host = host
        self.port = int(self.httpd.server_address[1])
        self._thread: threading.Thread | None = None
        self._paths: dict[str, str] = {}

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

    def _find(self, key: str) -> str | None:
        # Listing reads every file (entry counts): the page polls every second, so remember paths
        # and list again only for a key not seen yet.
        path = self._paths.get(key)
        if path is None or not self.source.exists(path):
            self._paths = {session_key(i.path): i.path for i in self.lister()}
            path = self._paths.get(key)
        return path

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
                        infos = server.lister()
                        server._paths = {session_key(i.path): i.path for i in infos}
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
                path = server._find(key)
                if path is None:
                    self._error(HTTPStatus.NOT_FOUND, "no such session in this directory")
                    return
                stamp = server.source.stamp(path)
                meta, lines = server.source.view(path)
                page = render_page(meta, lines, live_url=f"/api/view/{key}?v=1", stamp=stamp)
                self._send(200, page.encode("utf-8"), "text/html; charset=utf-8")

            def _data(self, key: str, stamp_only: bool) -> None:
                path = server._find(key)
                if path is None:
                    self._error(HTTPStatus.NOT_FOUND, "no such session in this directory")
                    return
                stamp = server.source.stamp(path)
                if stamp_only:
                    body = orjson.dumps({"stamp": stamp})
                else:
                    meta, lines = server.source.view(path)
                    body = orjson.dumps({"stamp": stamp, "meta": meta, "lines": pack(b"\n".join(lines))})
                self._send(200, body, "application/json")

        return Handler
