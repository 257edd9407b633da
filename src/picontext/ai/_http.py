"""HTTP plumbing shared by the providers: client factory, SSE decoding, error text, Retry-After.

Private to `picontext.ai`. Everything except `open_stream` and the Retry-After sink is pure.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import re
import ssl
import sys
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from picontext import _json

MAX_ERROR_BODY_CHARS = 4000
_SECRET_HEADERS = frozenset({"authorization", "x-api-key", "x-goog-api-key", "api-key"})


@dataclass(frozen=True, slots=True)
class ProviderRequest:
    """One HTTP request as a provider's `build_request` describes it.

    `repr()` redacts credentials so a request can be logged safely.
    """

    method: str
    url: str
    headers: dict[str, str]
    body: dict[str, Any]

    def __repr__(self) -> str:
        safe = {k: ("<redacted>" if k.lower() in _SECRET_HEADERS else v) for k, v in self.headers.items()}
        return f"ProviderRequest(method={self.method!r}, url={redact_url(self.url)!r}, headers={safe!r})"


def redact_url(url: str) -> str:
    """The URL with a `key=` query parameter masked."""
    if "key=" not in url:
        return url
    head, _, tail = url.partition("key=")
    rest = tail.split("&", 1)
    return head + "key=<redacted>" + ("&" + rest[1] if len(rest) > 1 else "")


def join_url(base: str, path: str) -> str:
    return base.rstrip("/") + "/" + path.lstrip("/")


class ProviderHTTPStatus(Exception):
    """A non-2xx response before any event was streamed (internal; becomes an `error` event)."""

    def __init__(self, status: int, body: str, headers: Mapping[str, str] | None = None) -> None:
        self.status = status
        self.body = body
        self.headers = dict(headers or {})
        super().__init__(format_http_error(status, body))


def format_http_error(status: int, body: str) -> str:
    """`"<status> <body>"` or `"<status> status code (no body)"`; body trimmed to 4000 chars.

    The provider's own body text is kept verbatim (compact JSON stays compact) because overflow
    and retry classification read it. Same shape as the SDK errors Pi formats, e.g.
    `413 {"type":"error","error":{"type":"request_too_large",...}}`.
    """
    text = body.strip()
    if not text:
        return f"{status} status code (no body)"
    if _HTML.match(text):
        return f"{status} {html_error_line(text)}"
    if len(text) > MAX_ERROR_BODY_CHARS:
        text = f"{text[:MAX_ERROR_BODY_CHARS]}... [truncated {len(text) - MAX_ERROR_BODY_CHARS} chars]"
    return f"{status} {text}"


_HTML = re.compile(r"\s*(?:<!doctype html|<html|<head|<body|<title|<h1|<center)", re.IGNORECASE)
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]+>")


def html_error_line(html: str) -> str:
    """An HTML error page (a proxy's or a framework's) as one line: its title, else its text."""
    title = _TITLE.search(html)
    text = title.group(1) if title else _TAG.sub(" ", html)
    text = " ".join(text.split())
    if len(text) > 200:
        text = text[:200] + "…"
    return f"(HTML error page) {text}" if text else "(HTML error page)"


# -- SSE --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class SseEvent:
    event: str | None
    data: str
    id: str | None = None


@dataclass(slots=True)
class SseDecoder:
    """Incremental text/event-stream decoder (WHATWG rules); feed lines without their newline."""

    _event: str | None = None
    _data: list[str] = field(default_factory=list)
    _id: str | None = None

    def feed(self, line: str) -> SseEvent | None:
        """The completed event when `line` is blank, else None."""
        if line == "":
            if not self._data and self._event is None:
                return None
            ev = SseEvent(self._event, "\n".join(self._data), self._id)
            self._event, self._data = None, []
            return ev
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            self._id = value
        return None

    def flush(self) -> SseEvent | None:
        """An event left without its terminating blank line at end of stream."""
        return self.feed("") if self._data else None


def decode_sse(lines: Iterable[str]) -> Iterator[SseEvent]:
    """Pure: the SSE events in `lines`."""
    dec = SseDecoder()
    for line in lines:
        ev = dec.feed(line.rstrip("\r"))
        if ev is not None:
            yield ev
    last = dec.flush()
    if last is not None:
        yield last


async def aiter_sse(response: httpx.Response) -> AsyncIterator[SseEvent]:
    dec = SseDecoder()
    async for line in response.aiter_lines():
        ev = dec.feed(line.rstrip("\r"))
        if ev is not None:
            yield ev
    last = dec.flush()
    if last is not None:
        yield last


def loads_json(text: str) -> Any:
    return json.loads(text)


# -- Retry-After -----------------------------------------------------------------------------------------


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms` or `retry-after` (seconds or HTTP date), or None."""
    lower = {k.lower(): v for k, v in headers.items()}
    ms = lower.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    ra = lower.get("retry-after")
    if ra:
        try:
            return float(ra)
        except ValueError:
            try:
                when = parsedate_to_datetime(ra).timestamp()
            except (TypeError, ValueError):
                return None
            return max(0.0, when - (time.time() if now is None else now))
    return None


@dataclass(slots=True)
class RetryAfterSink:
    """The server's requested delay for the latest request made under `capture_retry_after()`.

    The finished assistant message carries no header data (it is written to the session file as
    it is), so the one retry loop (`picontext.ai.retrying`) learns a 429's `Retry-After` here.
    """

    latest: float | None = None

    def take(self) -> float | None:
        value, self.latest = self.latest, None
        return value


_RETRY_AFTER: contextvars.ContextVar[RetryAfterSink | None] = contextvars.ContextVar(
    "picontext_retry_after", default=None
)


@contextlib.contextmanager
def capture_retry_after(sink: RetryAfterSink | None = None) -> Iterator[RetryAfterSink]:
    """Record the Retry-After of requests started inside the block (and the tasks it creates)."""
    sink = sink if sink is not None else RetryAfterSink()
    token = _RETRY_AFTER.set(sink)
    try:
        yield sink
    finally:
        _RETRY_AFTER.reset(token)


def note_response(headers: Mapping[str, str] | None) -> None:
    """Called once per request by the stream driver: the delay it asked for (None if none)."""
    sink = _RETRY_AFTER.get()
    if sink is not None:
        sink.latest = parse_retry_after(headers) if headers else None


@dataclass(slots=True)
class OpenedStream:
    response: httpx.Response
    _cm: Any

    async def aclose(self) -> None:
        await self._cm.__aexit__(None, None, None)


_COPY_BODY_LIMIT = 1 << 20
"""orjson returns its working buffer as the bytes object, sized for the worst case (about 8x
the output for text: a 41 KB summary request holds 0.5 MB). A body is held while its request
is in flight, several at once during a compaction, so a small one is copied to its own size
(measured: 0.6-0.7 MB less peak RSS in the compaction of a 5 MB session,
tests/agent/test_over_window_memory.py). A large buffer comes from
mmap, whose untouched pages never become resident; copying it would double the body instead."""


async def open_stream(
    client: httpx.AsyncClient,
    request: ProviderRequest,
    *,
    timeout: float | None = None,  # noqa: ASYNC109 - httpx per-request timeout, not a deadline
) -> OpenedStream:
    """Send `request` once and return the open 2xx response.

    Raises `ProviderHTTPStatus` for a non-2xx answer (body read, connection released) and httpx
    transport errors unchanged. Retrying is not done here: the one retry loop
    (`picontext.ai.retrying`) decides, for every caller.
    """
    extra: dict[str, Any] = {}
    if timeout is not None:
        extra["timeout"] = timeout
    # Encoded here, not by httpx: its UTF-8 encoder refuses lone surrogates, which a reply
    # can hold (JavaScript slicing) and which JSON.stringify writes as \udXXX escapes.
    body = _json.dumps(request.body)
    if len(body) <= _COPY_BODY_LIMIT:
        body = bytes(memoryview(body))  # see _COPY_BODY_LIMIT
    cm = client.stream(request.method, request.url, headers=json_headers(request.headers),
                       content=body, **extra)
    response = await cm.__aenter__()
    if response.status_code < 400:
        note_response(None)
        return OpenedStream(response, cm)
    try:
        raw = await response.aread()
    finally:
        await cm.__aexit__(None, None, None)
    note_response(response.headers)
    raise ProviderHTTPStatus(response.status_code, raw.decode("utf-8", "replace"), response.headers)


def json_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """`headers` with a JSON content type unless one is set (the body is encoded by us)."""
    out = dict(headers)
    if not any(name.lower() == "content-type" for name in out):
        out["content-type"] = "application/json"
    return out


class OnDemandTLS(ssl.SSLContext):
    """httpx's default TLS context (the system's or certifi's CA certificates, `SSLKEYLOGFILE`),
    except that the certificates are loaded at the first TLS connection: a client that only talks
    to an http:// server (a local model) never pays the ~5 MB they take in memory."""

    _loaded = False

    def __new__(cls) -> OnDemandTLS:
        context = super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)  # verifies hostname and chain
        keylog = os.environ.get("SSLKEYLOGFILE")
        if keylog and not sys.flags.ignore_environment:
            context.keylog_filename = keylog
        return context

    def _load(self) -> None:
        if self._loaded:
            return
        if os.environ.get("SSL_CERT_FILE"):  # as httpx with trust_env
            self.load_verify_locations(cafile=os.environ["SSL_CERT_FILE"])
        elif os.environ.get("SSL_CERT_DIR"):
            self.load_verify_locations(capath=os.environ["SSL_CERT_DIR"])
        else:
            import certifi

            self.load_verify_locations(cafile=certifi.where())
        self._loaded = True

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        self._load()
        return super().wrap_socket(*args, **kwargs)

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        self._load()
        return super().wrap_bio(*args, **kwargs)


def default_client() -> httpx.AsyncClient:
    """A fresh client: no HTTP/2, generous read timeout (models think), short connect timeout;
    TLS certificates loaded only if it connects to an https:// URL (`OnDemandTLS`)."""
    return httpx.AsyncClient(timeout=httpx.Timeout(connect=30.0, read=600.0, write=60.0, pool=30.0),
                             verify=OnDemandTLS())


def describe_transport_error(exc: BaseException) -> str:
    """Error text for a transport failure, phrased so retry classification recognises it."""
    name = type(exc).__name__
    text = str(exc) or name
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"Connection error: {text} (other side closed)"
    if isinstance(exc, httpx.TimeoutException):
        return f"Request timed out: {text}"
    if isinstance(exc, httpx.ConnectError):
        return f"Connection error: {text} (connection refused)"
    if isinstance(exc, httpx.ReadError):
        return f"Network error: {text} (connection lost)"
    if isinstance(exc, httpx.TransportError):
        return f"Network error: {text}"
    return text
