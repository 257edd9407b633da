"""`ScriptedModelServer`: a real HTTP model server on 127.0.0.1 that replays a script.

It speaks four wire dialects, chosen by the request path:

* `POST .../chat/completions`          OpenAI Chat Completions (also every OpenAI-compatible server)
* `POST .../responses`                 OpenAI Responses
* `POST .../v1/messages`               Anthropic Messages
* `POST .../models/<id>:streamGenerateContent`   Google Gemini

Each request consumes the next step of the script. Steps are built with helpers::

    reply(thinking("hmm"), text("Hello"), tool_call("read", {"path": "a"}), usage=tokens(1200, 40))
    text("hi")                                   # a one-block reply
    overflow()                                   # the dialect's own context-overflow error
    rate_limit(retry_after=1)                    # 429 + retry-after
    server_error(503) / overloaded()             # 5xx / Anthropic 529
    http_error(400, '{"error": ...}')            # any status and body
    text("abc").drop_after(2)                    # connection dropped after 2 SSE frames
    text("abc").hold_after(1, event)             # stream pauses until `event` is set
    text("abc").slow(0.05)                       # delay between frames
    raw_stream('{"choices": 5}', "not json")     # exactly these data: payloads
    silent_stream()                              # a 200 stream with no event at all

Every request is recorded (`server.requests`: path, headers, JSON body). A request with no step
left is answered with a 500 and remembered; `assert_complete()` fails on such unexpected requests
and on steps never used. Usage::

    with ScriptedModelServer() as server:
        server.expect(text("hi"))
        model = server.model("anthropic-messages")
        msg = await complete(model, ctx, StreamOptions(api_key="test"))
        server.assert_complete()
"""

from __future__ import annotations

import json
import re
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Self

from picontext.ai.models import Model

__all__ = [
    "Block",
    "HttpError",
    "RecordedRequest",
    "Reply",
    "ScriptedModelServer",
    "Step",
    "UnexpectedModelRequest",
    "http_error",
    "measured",
    "overflow",
    "overloaded",
    "rate_limit",
    "raw_stream",
    "reply",
    "request_tokens",
    "server_error",
    "silent_stream",
    "text",
    "thinking",
    "tokens",
    "tool_call",
]

Dialect = Literal["openai-completions", "openai-responses", "anthropic-messages", "google-generative-ai"]


class UnexpectedModelRequest(AssertionError):
    """The server got a request its script did not expect (raised by `assert_complete`)."""


# -- script steps ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Block:
    kind: Literal["text", "thinking", "tool_call"]
    text: str = ""
    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    call_id: str = ""
    signature: str = ""


@dataclass(frozen=True, slots=True)
class Usage:
    input: int = 10
    output: int = 5
    cache_read: int = 0
    cache_write: int = 0


def tokens(input: int = 10, output: int = 5, *, cache_read: int = 0, cache_write: int = 0) -> Usage:
    """Usage numbers the reply reports, in picontext terms (input excludes cached tokens)."""
    return Usage(input, output, cache_read, cache_write)


MEASURED = -1


def measured(output: int = 5) -> Usage:
    """Usage whose input is the request's own size (ceil(JSON body chars / 4)), as a real server
    counts what it was sent: for tests whose requests grow and shrink (compaction)."""
    return Usage(MEASURED, output)


def request_tokens(body: Any) -> int:
    """The input tokens `measured()` reports for a request body."""
    return -(-len(json.dumps(body, ensure_ascii=False)) // 4)


@dataclass(frozen=True, slots=True)
class Reply:
    """A streamed 200 answer. Modifiers return new replies (`slow`, `drop_after`, `hold_after`)."""

    blocks: tuple[Block, ...]
    usage: Usage = field(default_factory=Usage)
    stop: str | None = None
    """Raw stop reason in the dialect's own words; default: tool-use if a tool is called, else end."""
    delay: float = 0.0
    drop_after_frames: int | None = None
    hold_after_frames: int | None = None
    hold_event: threading.Event | None = None
    held_event: threading.Event | None = None
    """Set when the stream reaches the hold point (the frames before it are sent)."""
    status: int = 200
    match: Callable[[RecordedRequest], bool] | None = None
    """Only a request this accepts takes the step; None: the next request, whatever it is."""
    raw_frames: tuple[bytes, ...] | None = None
    """Sent instead of the dialect's frames (`raw_stream`, `silent_stream`)."""

    def slow(self, delay: float) -> Reply:
        return replace(self, delay=delay)

    def drop_after(self, frames: int) -> Reply:
        """Close the socket (no chunked terminator) after `frames` SSE frames."""
        return replace(self, drop_after_frames=frames)

    def hold_after(self, frames: int, event: threading.Event, held: threading.Event | None = None) -> Reply:
        """Send `frames` SSE frames, then wait for `event` before sending the rest (`held` is set
        once those frames are out: a test can wait for "the reply is streaming" as an event)."""
        return replace(self, hold_after_frames=frames, hold_event=event, held_event=held)

    def with_usage(self, usage: Usage) -> Reply:
        return replace(self, usage=usage)

    def with_stop(self, stop: str) -> Reply:
        return replace(self, stop=stop)

    def when(self, predicate: Callable[[RecordedRequest], bool]) -> Reply:
        """Serve this reply only to a request `predicate` accepts (for requests sent concurrently)."""
        return replace(self, match=predicate)

    def when_body_contains(self, needle: str) -> Reply:
        """Serve this reply only to a request whose JSON body contains `needle`."""
        return self.when(lambda req: needle in json.dumps(req.body, ensure_ascii=False))


@dataclass(frozen=True, slots=True)
class HttpError:
    """A non-streamed error answer. `body` None means the dialect's default body for `kind`."""

    status: int
    body: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    kind: Literal["raw", "overflow", "rate_limit", "server", "overloaded"] = "raw"
    match: Callable[[RecordedRequest], bool] | None = None

    def when(self, predicate: Callable[[RecordedRequest], bool]) -> HttpError:
        """Serve this error only to a request `predicate` accepts."""
        return replace(self, match=predicate)


Step = Reply | HttpError

_call_ids = iter(range(1, 1_000_000))


def text(value: str) -> Reply:
    return Reply((Block("text", text=value),))


def thinking(value: str, signature: str = "sig-1") -> Reply:
    return Reply((Block("thinking", text=value, signature=signature),))


def tool_call(name: str, arguments: dict[str, Any] | None = None, *, call_id: str | None = None) -> Reply:
    return Reply(
        (Block("tool_call", name=name, arguments=arguments or {}, call_id=call_id or f"call_{next(_call_ids)}"),)
    )


def reply(*parts: Reply | Block, usage: Usage | None = None, stop: str | None = None) -> Reply:
    """One reply made of the blocks of `parts`, in order (e.g. thinking, text, two tool calls)."""
    blocks: list[Block] = []
    for part in parts:
        blocks.extend(part.blocks if isinstance(part, Reply) else (part,))
    return Reply(tuple(blocks), usage or Usage(), stop)


def http_error(
    status: int,
    body: str | dict[str, Any] | None = "",
    *,
    retry_after: float | None = None,
    content_type: str | None = None,
) -> HttpError:
    """An error answer with exactly this status and body (dicts are sent as JSON); `content_type`
    replaces application/json (e.g. "text/html" for a proxy's error page)."""
    headers: tuple[tuple[str, str], ...] = (("retry-after", _num(retry_after)),) if retry_after is not None else ()
    if content_type is not None:
        headers += (("content-type", content_type),)
    raw = json.dumps(body) if isinstance(body, dict) else (body or "")
    return HttpError(status, raw, headers)


def raw_stream(*data: str, status: int = 200) -> Reply:
    """A 200 event stream of exactly these `data:` payloads (anything: broken JSON, wrong
    types), each its own SSE frame, then the end of the stream."""
    return Reply((), status=status, raw_frames=tuple(_sse_raw(d) for d in data))


def silent_stream() -> Reply:
    """A 200 event stream that ends without a single event (how llama.cpp's server answers a
    streamed request over its window)."""
    return Reply((), raw_frames=())


def _sse_raw(data: str) -> bytes:
    return b"".join(b"data: " + line.encode() + b"\n" for line in data.split("\n")) + b"\n"


def overflow(status: int | None = None) -> HttpError:
    """The dialect's real context-overflow error (status 400, or `status`)."""
    return HttpError(status or 400, None, (), "overflow")


def rate_limit(retry_after: float | None = 1) -> HttpError:
    headers = (("retry-after", _num(retry_after)),) if retry_after is not None else ()
    return HttpError(429, None, headers, "rate_limit")


def server_error(status: int = 500) -> HttpError:
    return HttpError(status, None, (), "server")


def overloaded() -> HttpError:
    """Anthropic's 529 overloaded_error (other dialects: 503 with an overloaded message)."""
    return HttpError(529, None, (), "overloaded")


def describe_step(step: Step) -> str:
    """A step in a few words (a repr of a step holds every frame and can run to kilobytes)."""
    if isinstance(step, HttpError):
        return f"http {step.status} ({step.kind})"
    if step.raw_frames is not None:
        return f"raw stream of {len(step.raw_frames)} frames"
    parts = []
    for block in step.blocks:
        if block.kind == "tool_call":
            parts.append(f"tool_call {block.name}")
        else:
            flat = " ".join(block.text.split())
            parts.append(f"{block.kind} {flat[:30]!r}{'…' if len(flat) > 30 else ''}")
    held = " held" if step.hold_event is not None else ""
    return f"reply[{', '.join(parts) or 'empty'}]{held}"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


# -- error bodies per dialect (real provider shapes) --------------------------------------------------

_ERROR_TEXT = {
    "overflow": {
        "openai-completions": (
            "This model's maximum context length is 128000 tokens. However, your messages resulted in "
            "131407 tokens. Please reduce the length of the messages.",
            "context_length_exceeded",
        ),
        "openai-responses": (
            "Your input exceeds the context window of this model. Please adjust your input and try again.",
            "context_length_exceeded",
        ),
        "anthropic-messages": ("prompt is too long: 213462 tokens > 200000 maximum", "invalid_request_error"),
        "google-generative-ai": (
            "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).",
            "INVALID_ARGUMENT",
        ),
    },
    "rate_limit": {
        "openai-completions": ("Rate limit reached for requests. Please try again in 1s.", "rate_limit_exceeded"),
        "openai-responses": ("Rate limit reached for requests. Please try again in 1s.", "rate_limit_exceeded"),
        "anthropic-messages": ("Number of request tokens has exceeded your rate limit.", "rate_limit_error"),
        "google-generative-ai": ("Resource has been exhausted (e.g. check quota).", "RESOURCE_EXHAUSTED"),
    },
    "server": {
        d: ("The server had an error while processing your request.", "server_error")
        for d in ("openai-completions", "openai-responses", "anthropic-messages", "google-generative-ai")
    },
    "overloaded": {
        d: ("Overloaded", "overloaded_error")
        for d in ("openai-completions", "openai-responses", "anthropic-messages", "google-generative-ai")
    },
}


def error_body(dialect: Dialect, kind: str, status: int) -> str:
    """The JSON body a real provider sends for this kind of error."""
    message, code = _ERROR_TEXT[kind][dialect]
    if dialect == "anthropic-messages":
        return json.dumps({"type": "error", "error": {"type": code, "message": message}})
    if dialect == "google-generative-ai":
        return json.dumps({"error": {"code": status, "message": message, "status": code}})
    err_type = "invalid_request_error" if kind == "overflow" else ("tokens" if kind == "rate_limit" else code)
    return json.dumps({"error": {"message": message, "type": err_type, "param": None, "code": code}})


# -- SSE frames per dialect ------------------------------------------------------------------------------


def _pieces(value: str) -> list[str]:
    parts = re.findall(r"\S+\s*|\s+", value)
    return parts or [""]


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {payload}\n\n".encode()


def _args_pieces(arguments: dict[str, Any]) -> list[str]:
    raw = json.dumps(arguments)
    cut = max(1, len(raw) // 2)
    return [raw[:cut], raw[cut:]] if len(raw) > 2 else [raw]


def frames_openai_completions(r: Reply, model_id: str) -> list[bytes]:
    base = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": model_id}
    out = [_sse({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})]
    tool_index = 0
    for b in r.blocks:
        if b.kind == "text":
            for piece in _pieces(b.text):
                out.append(_sse({**base, "choices": [{"index": 0, "delta": {"content": piece}}]}))
        elif b.kind == "thinking":
            for piece in _pieces(b.text):
                out.append(_sse({**base, "choices": [{"index": 0, "delta": {"reasoning_content": piece}}]}))
        else:
            first = {
                "index": tool_index,
                "id": b.call_id,
                "type": "function",
                "function": {"name": b.name, "arguments": ""},
            }
            out.append(_sse({**base, "choices": [{"index": 0, "delta": {"tool_calls": [first]}}]}))
            for piece in _args_pieces(b.arguments):
                tc = {"index": tool_index, "function": {"arguments": piece}}
                out.append(_sse({**base, "choices": [{"index": 0, "delta": {"tool_calls": [tc]}}]}))
            tool_index += 1
    stop = r.stop or ("tool_calls" if tool_index else "stop")
    out.append(_sse({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": stop}]}))
    u = r.usage
    usage = {
        "prompt_tokens": u.input + u.cache_read + u.cache_write,
        "completion_tokens": u.output,
        "total_tokens": u.input + u.cache_read + u.cache_write + u.output,
        "prompt_tokens_details": {"cached_tokens": u.cache_read, "cache_write_tokens": u.cache_write},
    }
    out.append(_sse({**base, "choices": [], "usage": usage}))
    out.append(_sse("[DONE]"))
    return out


def completion_openai(r: Reply, model_id: str) -> dict[str, Any]:
    """The same reply as one Chat Completions JSON body (a request with `"stream": false`)."""
    message: dict[str, Any] = {"role": "assistant", "content": "".join(b.text for b in r.blocks if b.kind == "text")}
    reasoning = "".join(b.text for b in r.blocks if b.kind == "thinking")
    if reasoning:
        message["reasoning_content"] = reasoning
    calls = [{"id": b.call_id, "type": "function", "function": {"name": b.name, "arguments": json.dumps(b.arguments)}}
             for b in r.blocks if b.kind == "tool_call"]
    if calls:
        message["tool_calls"] = calls
    u = r.usage
    prompt = u.input + u.cache_read + u.cache_write
    return {
        "id": "chatcmpl-scripted", "object": "chat.completion", "created": 0, "model": model_id,
        "choices": [{"index": 0, "message": message, "finish_reason": r.stop or ("tool_calls" if calls else "stop")}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": u.output, "total_tokens": prompt + u.output,
                  "prompt_tokens_details": {"cached_tokens": u.cache_read}},
    }


def frames_openai_responses(r: Reply, model_id: str) -> list[bytes]:
    resp = {"id": "resp_scripted", "object": "response", "model": model_id, "status": "in_progress"}
    out = [_sse({"type": "response.created", "response": resp}, "response.created")]
    items = []
    for idx, b in enumerate(r.blocks):
        if b.kind == "text":
            item = {"type": "message", "id": f"msg_{idx}", "role": "assistant", "status": "in_progress", "content": []}
            out.append(_sse({"type": "response.output_item.added", "output_index": idx, "item": item}))
            for piece in _pieces(b.text):
                out.append(
                    _sse(
                        {"type": "response.output_text.delta", "output_index": idx, "content_index": 0, "delta": piece}
                    )
                )
            done = {
                **item,
                "status": "completed",
                "content": [{"type": "output_text", "text": b.text, "annotations": []}],
            }
        elif b.kind == "thinking":
            item = {"type": "reasoning", "id": f"rs_{idx}", "summary": []}
            out.append(_sse({"type": "response.output_item.added", "output_index": idx, "item": item}))
            for piece in _pieces(b.text):
                out.append(
                    _sse(
                        {
                            "type": "response.reasoning_summary_text.delta",
                            "output_index": idx,
                            "summary_index": 0,
                            "delta": piece,
                        }
                    )
                )
            done = {**item, "summary": [{"type": "summary_text", "text": b.text}], "encrypted_content": b.signature}
        else:
            item = {"type": "function_call", "id": f"fc_{idx}", "call_id": b.call_id, "name": b.name, "arguments": ""}
            out.append(_sse({"type": "response.output_item.added", "output_index": idx, "item": item}))
            for piece in _args_pieces(b.arguments):
                out.append(
                    _sse({"type": "response.function_call_arguments.delta", "output_index": idx, "delta": piece})
                )
            done = {**item, "arguments": json.dumps(b.arguments), "status": "completed"}
        out.append(_sse({"type": "response.output_item.done", "output_index": idx, "item": done}))
        items.append(done)
    u = r.usage
    status, incomplete = "completed", None
    if r.stop and r.stop != "completed":
        status, incomplete = "incomplete", {"reason": r.stop}
    final = {
        **resp,
        "status": status,
        "incomplete_details": incomplete,
        "output": items,
        "usage": {
            "input_tokens": u.input + u.cache_read + u.cache_write,
            "input_tokens_details": {"cached_tokens": u.cache_read},
            "output_tokens": u.output,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": u.input + u.cache_read + u.cache_write + u.output,
        },
    }
    kind = "response.completed" if status == "completed" else "response.incomplete"
    out.append(_sse({"type": kind, "response": final}, kind))
    return out


def frames_anthropic(r: Reply, model_id: str) -> list[bytes]:
    u = r.usage
    start_usage = {
        "input_tokens": u.input,
        "output_tokens": 1,
        "cache_read_input_tokens": u.cache_read,
        "cache_creation_input_tokens": u.cache_write,
    }
    msg: dict[str, Any] = {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": model_id,
        "content": [],
        "stop_reason": None,
        "usage": start_usage,
    }
    out = [_sse({"type": "message_start", "message": msg}, "message_start"), _sse({"type": "ping"}, "ping")]
    has_tool = False
    for idx, b in enumerate(r.blocks):
        if b.kind == "text":
            cb: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(b.text)]
        elif b.kind == "thinking":
            cb = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(b.text)]
            deltas.append({"type": "signature_delta", "signature": b.signature})
        else:
            has_tool = True
            cb = {"type": "tool_use", "id": b.call_id, "name": b.name, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _args_pieces(b.arguments)]
        out.append(_sse({"type": "content_block_start", "index": idx, "content_block": cb}, "content_block_start"))
        for d in deltas:
            out.append(_sse({"type": "content_block_delta", "index": idx, "delta": d}, "content_block_delta"))
        out.append(_sse({"type": "content_block_stop", "index": idx}, "content_block_stop"))
    stop = r.stop or ("tool_use" if has_tool else "end_turn")
    out.append(
        _sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": u.output},
            },
            "message_delta",
        )
    )
    out.append(_sse({"type": "message_stop"}, "message_stop"))
    return out


def frames_gemini(r: Reply, model_id: str) -> list[bytes]:
    out = []
    for b in r.blocks:
        if b.kind == "tool_call":
            parts = [{"functionCall": {"name": b.name, "args": b.arguments, "id": b.call_id}}]
            out.append({"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}]})
            continue
        for piece in _pieces(b.text):
            part: dict[str, Any] = {"text": piece}
            if b.kind == "thinking":
                part["thought"] = True
            out.append({"candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}]})
    u = r.usage
    last: dict[str, Any] = {
        "candidates": [{"content": {"role": "model", "parts": []}, "finishReason": r.stop or "STOP", "index": 0}],
        "usageMetadata": {
            "promptTokenCount": u.input + u.cache_read,
            "candidatesTokenCount": u.output,
            "totalTokenCount": u.input + u.cache_read + u.output,
            "cachedContentTokenCount": u.cache_read,
        },
        "modelVersion": model_id,
        "responseId": "gemini-scripted",
    }
    out.append(last)
    return [_sse(c) for c in out]


_FRAMES = {
    "openai-completions": frames_openai_completions,
    "openai-responses": frames_openai_responses,
    "anthropic-messages": frames_anthropic,
    "google-generative-ai": frames_gemini,
}


def dialect_for_path(path: str) -> Dialect | None:
    p = path.split("?", 1)[0]
    if p.endswith("/chat/completions"):
        return "openai-completions"
    if p.endswith("/responses"):
        return "openai-responses"
    if p.endswith("/messages"):
        return "anthropic-messages"
    if ":streamGenerateContent" in p or ":generateContent" in p:
        return "google-generative-ai"
    return None


# -- the server ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    """Header names lower-cased."""
    body: Any
    dialect: str | None
    peer: tuple[str, int] | None = None
    """The client's address and port: one per TCP connection (connection reuse is visible here)."""
    received: float = 0.0
    """`time.monotonic()` when the request's headers had arrived (before its body was read)."""

    @property
    def json(self) -> Any:
        return self.body


class _StampedWriter:
    """The handler's socket writer, noting when each write begins."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.last_write: float | None = None

    def write(self, data: Any) -> int:
        self.last_write = time.monotonic()
        return int(self.raw.write(data))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def _readable(sockets: list[socket.socket], timeout: float | None) -> bool:
    """Whether any of `sockets` has bytes (or EOF, or a connection) to read; `poll`, as a long
    test run's descriptors can pass select's limit of 1024."""
    poller = select.poll()
    for sock in sockets:
        poller.register(sock, select.POLLIN)
    return bool(poller.poll(None if timeout is None else timeout * 1000))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as model APIs' servers send: with Nagle's algorithm a stream's last small frame
    # waits for the client's delayed ACK (~40 ms on Linux), time a benchmark would count as the
    # client's.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return

    def handle_one_request(self) -> None:
        # Counted as busy only once its bytes (or its EOF) have arrived, and counted before they
        # are read: `wait_idle` then sees either the busy count or a readable socket, never a gap.
        # (Clients here do not pipeline, so nothing waits in `rfile`'s buffer between requests.)
        _readable([self.connection], None)
        owner = self.server.owner
        owner._busy(+1)
        try:
            super().handle_one_request()
        finally:
            owner._busy(-1)

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _handle(self) -> None:
        received = time.monotonic()
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        dialect = dialect_for_path(self.path)
        owner = self.server.owner
        req = RecordedRequest(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body, dialect,
                              tuple(self.client_address[:2]), received)  # type: ignore[arg-type]
        writer = _StampedWriter(self.wfile)
        self.wfile = writer  # type: ignore[assignment]  # duck-typed: only write/flush are used
        try:
            self._respond(owner, req, dialect, body)
        finally:
            owner._answered(req, writer.last_write)

    def _respond(self, owner: ScriptedModelServer, req: RecordedRequest, dialect: Dialect | None, body: Any) -> None:
        step = owner._take(req)
        if step is None or dialect is None:
            why = "no step left" if step is None else "unknown path"
            self._send_plain(
                500,
                json.dumps(
                    {
                        "error": {
                            "message": f"ScriptedModelServer: unexpected request ({why}): {self.command} {self.path}"
                        }
                    }
                ),
            )
            return
        if isinstance(step, HttpError):
            body_text = step.body if step.body is not None else error_body(dialect, step.kind, step.status)
            self._send_plain(step.status, body_text, dict(step.headers))
            return
        model_id = body.get("model", "scripted") if isinstance(body, dict) else "scripted"
        if step.usage.input == MEASURED:
            step = replace(step, usage=replace(step.usage, input=request_tokens(body)))
        if dialect == "google-generative-ai":
            m = re.search(r"/models/([^/:]+)", self.path)
            model_id = m.group(1) if m else model_id
        if dialect == "openai-completions" and isinstance(body, dict) and not body.get("stream"):
            self._send_plain(step.status, json.dumps(completion_openai(step, model_id)))  # a non-streaming client
            return
        frames = list(step.raw_frames) if step.raw_frames is not None else _FRAMES[dialect](step, model_id)
        self._stream(step, frames)

    def _send_plain(self, status: int, body: str, headers: dict[str, str] | None = None) -> None:
        data = body.encode()
        headers = dict(headers or {})
        self.send_response(status)
        self.send_header("content-type", headers.pop("content-type", "application/json"))
        self.send_header("content-length", str(len(data)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, step: Reply, frames: list[bytes]) -> None:
        self.send_response(step.status)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        try:
            for n, frame in enumerate(frames):
                if step.drop_after_frames is not None and n >= step.drop_after_frames:
                    self._drop()
                    return
                if step.hold_after_frames is not None and n == step.hold_after_frames and step.hold_event is not None:
                    self.wfile.flush()
                    if step.held_event is not None:
                        step.held_event.set()
                    while not step.hold_event.wait(0.02):
                        if self.server.owner._stopping.is_set():
                            self._drop()
                            return
                if step.delay and n:
                    time.sleep(step.delay)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
                self.wfile.flush()
            if step.drop_after_frames is not None and step.drop_after_frames >= len(frames):
                self._drop()
                return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    def _drop(self) -> None:
        self.wfile.flush()
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: ScriptedModelServer

    def get_request(self) -> tuple[socket.socket, Any]:
        # Busy from before `accept` takes the connection off the backlog (while the listening
        # socket is still readable) until the connection is in the set `wait_idle` watches.
        self.owner._busy(+1)
        try:
            conn, address = super().get_request()
            self.owner._opened(conn)
            return conn, address
        finally:
            self.owner._busy(-1)

    def shutdown_request(self, request: Any) -> None:
        self.owner._closed(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client closing its kept-alive connection (or abandoning a stream) is normal here.
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class ScriptedModelServer:
    """A model server on 127.0.0.1 (free port, background thread) that replays a script.

    Invariant: each request consumes exactly one step, in order; a request with no step left is
    recorded in `unexpected` and answered 500. Thread-safe: tests add steps from the event loop
    while the server thread serves.
    """

    def __init__(self, *steps: Step) -> None:
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._finished = threading.Condition(self._lock)
        self._steps: list[Step] = list(steps)
        self.requests: list[RecordedRequest] = []
        self._answered_at: dict[int, float] = {}  # id(request) -> time.monotonic() after its response
        self.unexpected: list[RecordedRequest] = []
        self._busy_count = 0  # connections being accepted + requests being read or answered
        self._connections: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # lifecycle
    def start(self) -> Self:
        if self._httpd is not None:
            return self
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # script
    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("ScriptedModelServer is not running; call start() or use it as a context manager")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def expect(self, *steps: Step) -> ScriptedModelServer:
        """Append steps to the script."""
        with self._lock:
            self._steps.extend(steps)
        return self

    def reset(self) -> None:
        """Forget steps and recorded requests (between tests sharing one server), once the
        requests already sent have landed (`wait_idle`), so none is counted after the reset."""
        self.wait_idle(5.0)  # a stream still held open: go on; its step is the test's to check
        with self._lock:
            self._steps.clear()
            self.requests.clear()
            self._answered_at.clear()
            self.unexpected.clear()

    @property
    def pending_steps(self) -> list[Step]:
        with self._lock:
            return list(self._steps)

    def _take(self, req: RecordedRequest) -> Step | None:
        with self._lock:
            self.requests.append(req)
            self._arrived.notify_all()
            if req.dialect is not None:
                # Steps are served in order; a step with a `when` predicate waits for a request
                # it accepts, so concurrent requests get the reply meant for them.
                for i, step in enumerate(self._steps):
                    if step.match is None or step.match(req):
                        return self._steps.pop(i)
            self.unexpected.append(req)
            return None

    def _answered(self, req: RecordedRequest, last_write: float | None) -> None:
        with self._lock:
            self._answered_at[id(req)] = last_write if last_write is not None else time.monotonic()
            self._finished.notify_all()

    def answered_at(self, req: RecordedRequest, timeout: float = 5.0) -> float | None:
        """`time.monotonic()` when the last write of the response to `req` began (taken before the
        write, so it precedes anything the client does after reading the response);
        with `req.received`, what a benchmark needs to time the client's work between a response
        and its next request. The client can read the last byte before the server's thread notes
        the time, so this waits up to `timeout` seconds for it (None if it is still being served)."""
        with self._lock:
            self._finished.wait_for(lambda: id(req) in self._answered_at, timeout)
            return self._answered_at.get(id(req))

    def _busy(self, delta: int) -> None:
        with self._lock:
            self._busy_count += delta
            self._finished.notify_all()

    def _opened(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.add(conn)

    def _closed(self, conn: Any) -> None:
        with self._lock:
            self._connections.discard(conn)
            self._finished.notify_all()

    def _idle(self) -> bool:
        # Under the lock: a handler must take the lock to count itself busy before it reads, so
        # bytes not yet counted are still in a socket and show as readable here.
        if self._busy_count:
            return False
        if self._httpd is None:
            return True
        try:
            return not _readable([self._httpd.socket, *self._connections], 0)
        except (OSError, ValueError):  # a connection closed under us: look again
            return False

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until every request a client has sent has been answered: none being read or
        answered, no connection waiting to be accepted, no bytes unread on an open connection.

        A client that gives up on a request (a cancelled sibling, an abandoned stream) may have
        sent it already; the server sees it late on a loaded machine. `reset()` and
        `assert_complete()` wait so, so that such a request is counted in the test that sent it.
        False on timeout (a stream held open by its step). Waits on the server's events,
        re-checking the sockets between them (every 10 ms at most)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not self._idle():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._finished.wait(min(left, 0.01))
        return True

    def wait_for_requests(self, count: int, timeout: float = 30) -> None:
        """Block until `count` requests have arrived (an event, not a sleep); AssertionError on timeout."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self.requests) >= count, timeout):
                raise AssertionError(f"ScriptedModelServer: {len(self.requests)} of {count} requests after {timeout}s")

    def assert_complete(self) -> None:
        """Fail on unexpected requests or steps never consumed (once the requests sent have landed)."""
        self.wait_idle(5.0)  # a stream still held open: go on; its step is the test's to check
        with self._lock:
            if self.unexpected:
                listed = ", ".join(f"{r.method} {r.path}" for r in self.unexpected)
                raise UnexpectedModelRequest(
                    f"ScriptedModelServer got {len(self.unexpected)} unexpected request(s): {listed}"
                )
            if self._steps:
                shown = "; ".join(describe_step(step) for step in self._steps[:5])
                more = f"; and {len(self._steps) - 5} more" if len(self._steps) > 5 else ""
                raise AssertionError(f"ScriptedModelServer: {len(self._steps)} scripted step(s) never requested "
                                     f"({len(self.requests)} requests arrived): {shown}{more}")

    def model(
        self,
        api: Dialect = "openai-completions",
        *,
        id: str = "scripted-model",
        provider: str | None = None,
        context_window: int = 200_000,
        max_tokens: int = 8192,
        reasoning: bool = False,
        cost: tuple[float, float, float, float] = (3.0, 15.0, 0.3, 3.75),
    ) -> Model:
        """A `Model` whose `baseUrl` points at this server for the given wire API."""
        suffix = {
            "openai-completions": "/v1",
            "openai-responses": "/v1",
            "anthropic-messages": "",
            "google-generative-ai": "/v1beta",
        }[api]
        return {
            "id": id,
            "name": f"Scripted {api}",
            "api": api,
            "provider": provider
            or {
                "openai-completions": "openai-compatible",
                "openai-responses": "openai",
                "anthropic-messages": "anthropic",
                "google-generative-ai": "google",
            }[api],
            "baseUrl": self.url + suffix,
            "reasoning": reasoning,
            "input": ["text", "image"],
            "cost": {"input": cost[0], "output": cost[1], "cacheRead": cost[2], "cacheWrite": cost[3]},
            "contextWindow": context_window,
            "maxTokens": max_tokens,
        }

    @property
    def connections(self) -> int:
        """How many TCP connections the recorded requests came over."""
        with self._lock:
            return len({r.peer for r in self.requests})

    def iter_bodies(self) -> Iterator[Any]:
        with self._lock:
            reqs = list(self.requests)
        for r in reqs:
            yield r.body
