"""A TCP proxy between PostgreSQL clients and a server that can lose a COMMIT, for tests of what a
client does when the connection dies at the one moment a transaction's fate is decided.

It forwards bytes both ways and reads the client's half of the wire protocol message by message
(the untyped start-up messages first: SSLRequest, GSSENCRequest, StartupMessage; then typed
messages). psycopg sends COMMIT as a simple query (`Q` "COMMIT"), a statement with parameters in
the extended protocol (`P`arse ... `S`ync; on an autocommit connection, its own transaction, which
commits at the Sync). When armed, the next COMMIT (or the next statement containing `sql`, sent
either way) is lost in one of two ways:

- `"commit"` (the COMMIT is lost on its way): the proxy closes both sides instead of forwarding
  it; the server never receives it and rolls the transaction back;
- `"answer"` (the answer is lost on its way back): the proxy forwards the COMMIT, discards what
  the server answers until its ReadyForQuery (so the transaction is committed, durably, before
  the client notices anything), then closes both sides.

Either way the client sees the same thing: its connection broke while it waited for COMMIT's
answer. Deterministic: `fired` is set once the loss happened, and nothing depends on timing.

    with FaultProxy(cluster.port) as proxy:
        url = proxy.url_for(cluster.url)
        proxy.arm("answer")
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

Fault = Literal["commit", "answer"]
_STARTUP_CODES = (80877103, 80877104)  # SSLRequest, GSSENCRequest: the server answers one byte
_PROTOCOL_3 = 196608
_CANCEL = 80877102


class FaultProxy:
    """Listens on 127.0.0.1 (a free port) and forwards every connection to `server_port`."""

    def __init__(self, server_port: int, server_host: str = "127.0.0.1") -> None:
        self.server = (server_host, server_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._armed: Fault | None = None
        self._skip = 0
        self._sql = b"COMMIT"
        self.fired = threading.Event()
        self.refusing = threading.Event()  # new connections are closed at once (a dead network)
        self.commits = 0  # COMMITs seen (forwarded or lost)
        self._sockets: set[socket.socket] = set()
        self._closed = False
        self._thread = threading.Thread(target=self._accept, name="pg-fault-proxy", daemon=True)

    def url_for(self, url: str) -> str:
        """`url` (of the proxied server) pointing at the proxy instead."""
        parts = urlsplit(url)
        netloc = parts.netloc.rsplit("@", 1)
        host = f"127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) == 2 else host))

    def arm(self, fault: Fault, *, after: int = 0, sql: str = "COMMIT") -> None:
        """Lose a COMMIT (on any connection) the given way: the next one, or the one after
        `after` more; with `sql`, a statement whose text contains it instead."""
        with self._lock:
            self._armed = fault
            self._skip = after
            self._sql = sql.encode().upper()
            self.fired.clear()

    def _matches(self, kind: bytes, body: bytes) -> bool:
        if kind == b"Q":
            text = body.rstrip(b"\x00").strip().upper().rstrip(b";")
        elif kind == b"P":  # name\0 query\0 ...
            text = body.split(b"\x00", 2)[1].upper() if body.count(b"\x00") >= 2 else b""
        else:
            return False
        return text == self._sql if self._sql == b"COMMIT" else self._sql in text

    def disarm(self) -> None:
        with self._lock:
            self._armed = None

    def _take(self) -> Fault | None:
        with self._lock:
            self.commits += 1
            if self._armed is None or self._skip:
                self._skip = max(0, self._skip - 1)
                return None
            fault, self._armed = self._armed, None
            return fault

    # ------------------------------------------------------------------ plumbing

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def close(self) -> None:
        self._closed = True
        _shut(self._listener)  # shutdown() wakes the thread blocked in accept()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)
        self._thread.join(timeout=10)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.refusing.is_set():
                _shut(client)
                continue
            try:
                server = socket.create_connection(self.server, timeout=30)
            except OSError:
                _shut(client)
                continue
            server.settimeout(None)
            with self._lock:
                self._sockets.update((client, server))
            link = _Link(self, client, server)
            threading.Thread(target=link.client_to_server, daemon=True).start()
            threading.Thread(target=link.server_to_client, daemon=True).start()


class _Link:
    """One proxied connection: the client's messages are parsed, the server's bytes copied (and
    parsed only while an answer is being swallowed)."""

    def __init__(self, proxy: FaultProxy, client: socket.socket, server: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.server = server
        self.swallow = threading.Event()  # the server's answer to a forwarded COMMIT is dropped

    def close(self) -> None:
        for sock in (self.client, self.server):
            _shut(sock)
        with self.proxy._lock:
            self.proxy._sockets.difference_update((self.client, self.server))

    def client_to_server(self) -> None:
        try:
            started = False
            while True:
                if not started:
                    length = struct.unpack("!I", _read(self.client, 4))[0]
                    body = _read(self.client, length - 4)
                    code = struct.unpack("!I", body[:4])[0] if len(body) >= 4 else 0
                    started = code == _PROTOCOL_3 or code == _CANCEL
                    self.server.sendall(struct.pack("!I", length) + body)
                    if code not in _STARTUP_CODES and not started:
                        return
                    continue
                message = self._message()
                if self.proxy._matches(message[:1], message[5:]):
                    last = message
                    while last[:1] not in (b"S", b"Q"):  # a Parse: the statement runs (and commits) at Sync
                        last = self._message()
                        message += last
                    fault = self.proxy._take()
                    if fault == "commit":
                        self.proxy.fired.set()
                        self.close()
                        return
                    if fault == "answer":
                        self.swallow.set()
                self.server.sendall(message)
        except OSError:
            pass
        finally:
            if not self.swallow.is_set():
                self.close()

    def _message(self) -> bytes:
        head = _read(self.client, 5)
        return head + _read(self.client, struct.unpack("!I", head[1:])[0] - 4)

    def server_to_client(self) -> None:
        try:
            while True:
                if self.swallow.is_set():
                    # Everything the server sends from here on answers the COMMIT (the client sent
                    # nothing else while it waits): drop it up to ReadyForQuery, then break the line.
                    while True:
                        head = _read(self.server, 5)
                        _read(self.server, struct.unpack("!I", head[1:])[0] - 4)
                        if head[:1] == b"Z":
                            self.proxy.fired.set()
                            return
                data = self.server.recv(65536)
                if not data:
                    return
                if self.swallow.is_set():
                    # The COMMIT went out while we were blocked in recv: `data` is its answer.
                    self._drop_answer(data)
                    return
                self.client.sendall(data)
        except OSError:
            pass
        finally:
            self.close()

    def _drop_answer(self, data: bytes) -> None:
        buffer = data
        while True:
            while len(buffer) >= 5:
                kind, length = buffer[:1], struct.unpack("!I", buffer[1:5])[0]
                if len(buffer) < 1 + length:
                    break
                buffer = buffer[1 + length:]
                if kind == b"Z":
                    self.proxy.fired.set()
                    return
            more = self.server.recv(65536)
            if not more:
                return
            buffer += more


def _read(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionResetError("peer closed")
        out += chunk
    return bytes(out)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
