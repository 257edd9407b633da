"""What every wire-API module shares: options, context, the partial message, and the HTTP driver.

A provider module supplies two pure pieces, and `start_http_stream` does the IO:

* `build_request(model, context, options, api_key) -> ProviderRequest`
* a parser class: `Parser(model, output)` with `feed(sse) -> list[event]` and
  `finish() -> list[event]` (raises `StreamProtocolError` when the stream ended wrongly).

The driver turns *every* failure after the call starts into a terminal `error` event whose
message carries the provider's own text (`stopReason` "error"), and cancellation (abort signal,
or the consumer task being cancelled) into `stopReason` "aborted" with the content received so
far. Pi: the `catch` blocks of each `stream()` in packages/ai/src/api/*.ts.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, Protocol, TypedDict

import httpx

from picontext import _json
from picontext.ai._http import (
    ProviderHTTPStatus,
    ProviderRequest,
    SseEvent,
    aiter_sse,
    default_client,
    describe_transport_error,
    json_headers,
    open_stream,
)
from picontext.ai.auth import redact_secret
from picontext.ai.event_stream import AbortSignal, AssistantMessageStream
from picontext.ai.events import AssistantMessageEvent
from picontext.ai.models import Model
from picontext.ai.request_gate import serial_gate
from picontext.ai.types import AssistantMessage, Message, Tool, empty_usage

ThinkingLevel = Literal["off", "minimal", "low", "medium", "high", "xhigh"]
CacheRetention = Literal["none", "short", "long"]

ABORTED_TEXT = "Request was aborted"
Sleep = Callable[[float], Awaitable[None]]


class Context(TypedDict):
    """A provider request: messages already in LLM roles (system/user/assistant/toolResult)."""

    messages: list[Message]
    tools: NotRequired[list[Tool]]
    systemPrompt: NotRequired[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamOptions:
    """Per-request options (never persisted, hence snake_case).

    Attributes:
        api_key: the key; `stream()` resolves one from env/auth.json when left None.
        signal: abort signal; firing it ends the stream with stopReason "aborted".
        max_tokens: output cap; default `model["maxTokens"]` where the API needs one.
        temperature: sampling temperature, omitted when None (`stream()` takes the model's
            `compat.temperature` when this is None).
        seed: sampling seed, sent by the APIs that take one (OpenAI-compatible servers,
            Gemini); omitted when None (`stream()` takes the model's `compat.seed`).
        reasoning: thinking level; None or "off" means no reasoning parameters are sent.
        thinking_budget_tokens: explicit budget for token-budget APIs (Anthropic, Gemini).
        session_id: routing / prompt-cache id; not sent when `cache_retention` is "none".
        cache_retention: "short" (default), "long" (1h/24h where supported) or "none"
            (no cache writes at all: summarization requests use this, spec 02 §7.5).
        cache_before_last: the last message is this request's own and no earlier request sent
            it: the message cache breakpoint goes on the message before it (the end of the
            prefix shared with earlier requests) instead of on the last user message. Summary
            requests that reuse the session's cached prefix set it (compaction/prompt_cache.py).
        headers: extra request headers (win over defaults).
        timeout: per-request timeout in seconds (httpx semantics).
        client: an `httpx.AsyncClient` to use (tests inject transports); a fresh one otherwise.
        sleep: the retry loop's back-off sleep (`picontext.ai.retrying`; tests pass a recorder).
        tool_choice: passed through in each API's own shape.
    """

    api_key: str | None = None
    signal: AbortSignal | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    seed: int | None = None
    reasoning: ThinkingLevel | None = None
    thinking_budget_tokens: int | None = None
    session_id: str | None = None
    cache_retention: CacheRetention = "short"
    cache_before_last: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None
    client: httpx.AsyncClient | None = None
    sleep: Sleep = asyncio.sleep
    tool_choice: Any = None

    @property
    def thinking(self) -> ThinkingLevel | None:
        """The reasoning level when reasoning is requested, else None."""
        return None if self.reasoning in (None, "off") else self.reasoning

    @property
    def cache_session_id(self) -> str | None:
        return None if self.cache_retention == "none" else self.session_id


class StreamProtocolError(Exception):
    """The stream broke the API's rules (no terminal event, provider error event, ...)."""


class Parser(Protocol):
    def feed(self, sse: SseEvent) -> list[AssistantMessageEvent]: ...
    def finish(self) -> list[AssistantMessageEvent]: ...


ParserFactory = Callable[[Model, AssistantMessage], Parser]
RequestBuilder = Callable[[Model, Context, StreamOptions, str], ProviderRequest]


def now_ms() -> int:
    return int(time.time() * 1000)


def new_output(model: Model, *, timestamp: int | None = None) -> AssistantMessage:
    """The empty assistant message a stream fills in (`stopReason` "pending" until the end)."""
    return {
        "role": "assistant",
        "content": [],
        "api": model["api"],
        "provider": model["provider"],
        "model": model["id"],
        "usage": empty_usage(),
        "stopReason": "pending",
        "timestamp": now_ms() if timestamp is None else timestamp,
    }


# -- tolerant JSON for streamed tool arguments ------------------------------------------------------


def parse_streaming_json(text: str) -> dict[str, Any]:
    """Best-effort object from a possibly incomplete JSON prefix; {} when nothing usable.

    Closes an open string and open brackets, drops a dangling key or comma (Pi uses the
    `partial-json` package for the same job).
    """
    if not text or not text.strip():
        return {}
    try:
        value = json.loads(text)
        return value if isinstance(value, dict) else {}
    except ValueError:
        pass
    completed = _complete_json(text)
    for candidate in completed:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        return value if isinstance(value, dict) else {}
    return {}


def _complete_json(text: str) -> Iterable[str]:
    stack: list[str] = []
    in_str = False
    esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
    base = text
    if in_str:
        if esc:
            base = base[:-1]
        base += '"'
    closers = "".join(reversed(stack))
    yield base + closers
    # Drop a trailing partial member: `{"a": 1, "b` / `{"a": 1, "b":` / `{"a": 1,`
    trimmed = base.rstrip()
    for _ in range(3):
        for cut in (",", ":"):
            if trimmed.endswith(cut):
                trimmed = trimmed[:-1].rstrip()
        yield trimmed + closers
        idx = max(trimmed.rfind(","), trimmed.rfind("{"), trimmed.rfind("["))
        if idx < 0:
            break
        trimmed = trimmed[: idx + 1] if trimmed[idx] in "{[" else trimmed[:idx]
        yield trimmed + closers


# -- system prompt ----------------------------------------------------------------------------------


def system_text(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def split_system(context: Context) -> tuple[str, list[Message]]:
    """(system prompt, the other messages).

    The leading system message becomes the system prompt. APIs here take no mid-conversation
    system messages, so later ones are folded into the prompt too, in order (Pi
    `resolveTranscript` collapses them the same way for such models). `systemPrompt` on the
    context, if given, comes first.
    """
    parts: list[str] = []
    if context.get("systemPrompt"):
        parts.append(context["systemPrompt"])
    rest: list[Message] = []
    for msg in context["messages"]:
        if msg["role"] == "system":
            text = system_text(msg)
            if text:
                parts.append(text)
        else:
            rest.append(msg)
    return "\n\n".join(parts), rest


def context_tools(context: Context) -> list[Tool]:
    """Tools of the request: `context["tools"]`, else the leading system message's `toolsAdded`."""
    if "tools" in context:
        return list(context["tools"])
    for msg in context["messages"]:
        if msg["role"] == "system":
            return list(msg.get("toolsAdded", []))
        break
    return []


# -- terminal events --------------------------------------------------------------------------------


def terminal_event(output: AssistantMessage) -> AssistantMessageEvent:
    """`done` for stop/length/toolUse, `error` otherwise (stopReason "pending" becomes "error")."""
    reason = output["stopReason"]
    if reason in ("stop", "length", "toolUse"):
        return {"type": "done", "reason": reason, "message": output}
    if reason not in ("error", "aborted"):
        output["stopReason"] = "error"
        output.setdefault("errorMessage", "Stream ended without a stop reason")
    output.setdefault("errorMessage", "An unknown error occurred")
    return {"type": "error", "reason": output["stopReason"], "error": output}  # type: ignore[typeddict-item]


def fail(output: AssistantMessage, reason: Literal["error", "aborted"], text: str) -> AssistantMessageEvent:
    output["stopReason"] = reason
    output["errorMessage"] = text
    return {"type": "error", "reason": reason, "error": output}


def parse_events(
    parser_factory: ParserFactory, model: Model, sse_events: Iterable[SseEvent], *, timestamp: int = 0
) -> list[AssistantMessageEvent]:
    """Pure: all events (start … done/error) a stream of `sse_events` produces."""
    output = new_output(model, timestamp=timestamp)
    events: list[AssistantMessageEvent] = [{"type": "start", "partial": output}]
    parser = parser_factory(model, output)
    try:
        for sse in sse_events:
            events.extend(parser.feed(sse))
        events.extend(parser.finish())
    except Exception as exc:
        events.append(fail(output, "error", str(exc) or type(exc).__name__))
        return events
    events.append(terminal_event(output))
    return events


# -- the driver ---------------------------------------------------------------------------------------


def start_http_stream(
    model: Model,
    context: Context,
    options: StreamOptions,
    *,
    build_request: RequestBuilder,
    parser_factory: ParserFactory,
    resolve_silent: bool = False,
) -> AssistantMessageStream:
    """Run one streamed HTTP call as an `AssistantMessageStream` (see module docstring).

    `resolve_silent` (APIs that switch streaming with a `stream` body flag): a 2xx stream that
    ends without a single event, for a request whose size is near or over the model's window, is
    re-issued once without streaming to read the server's own error (llama.cpp's server answers
    an oversized streamed request with an empty 200 stream, the same request unstreamed with a
    400 in OpenAI's overflow wording); that error is then reported, so overflow recovery sees it.
    """
    api_key = options.api_key or ""
    signal = options.signal

    async def run(stream: AssistantMessageStream) -> None:
        output = new_output(model)
        client = options.client or default_client()
        opened = None
        gate = serial_gate(model)
        gated = False
        try:
            if signal is not None and signal.aborted:
                stream.push(fail(output, "aborted", ABORTED_TEXT))
                return
            request = build_request(model, context, options, api_key)
            if gate is not None:  # compat.serialRequests: wait for the request in flight there
                await gate.acquire()
                gated = True
            opened = await open_stream(client, request, timeout=options.timeout)
            stream.push({"type": "start", "partial": output})
            parser = parser_factory(model, output)
            seen = produced = 0
            try:
                async for sse in aiter_sse(opened.response):
                    seen += 1
                    for ev in _feed_checked(parser, sse, seen, request.url):
                        produced += 1
                        stream.push(ev)
            except httpx.RemoteProtocolError:
                # Cut off before any content (llama.cpp, failing inside its stream after a
                # role-only chunk, may drop the connection mid-body): the same silence.
                if produced or not (resolve_silent and near_window(model, request.body)):
                    raise
            if not produced and resolve_silent and near_window(model, request.body):
                await _quiet_close(opened.aclose())
                opened = None
                await reissue_without_streaming(client, request, timeout=options.timeout)
            for ev in parser.finish():
                stream.push(ev)
            stream.push(terminal_event(output))
        except asyncio.CancelledError:
            ours = stream.cancel_requested or (signal is not None and signal.aborted)
            stream.push(fail(output, "aborted", ABORTED_TEXT))
            task = asyncio.current_task()
            if ours and task is not None:
                task.uncancel()
            else:
                raise
        except ProviderHTTPStatus as exc:
            stream.push(fail(output, "error", redact_secret(str(exc), api_key)))
        except httpx.TransportError as exc:
            reason: Literal["error", "aborted"] = "aborted" if signal is not None and signal.aborted else "error"
            stream.push(fail(output, reason, redact_secret(describe_transport_error(exc), api_key)))
        except Exception as exc:
            reason = "aborted" if signal is not None and signal.aborted else "error"
            text = ABORTED_TEXT if reason == "aborted" else (str(exc) or type(exc).__name__)
            stream.push(fail(output, reason, redact_secret(text, api_key)))
        finally:
            if opened is not None:
                await _quiet_close(opened.aclose())
            if gated:
                gate.release()  # type: ignore[union-attr]
            if options.client is None:
                await _quiet_close(client.aclose())

    return AssistantMessageStream.from_producer(run, signal=signal)


_SHAPE_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError)


def _feed_checked(parser: Parser, sse: SseEvent, number: int, url: str) -> list[AssistantMessageEvent]:
    """`parser.feed(sse)`, with a payload that is not a JSON object, or one whose fields have the
    wrong types, reported as one clear line naming the server, the event and the payload (not
    Python's `can only concatenate str (not "int") to str` or a bare `0`)."""
    data = sse.data.strip()
    if data and data != "[DONE]" and not data.startswith("{"):
        raise MalformedResponse(_malformed(url, number, "is not a JSON object", data))
    try:
        return parser.feed(sse)
    except StreamProtocolError:
        raise
    except json.JSONDecodeError as exc:
        why = f"is not valid JSON ({exc.msg} at char {exc.pos})"
        raise MalformedResponse(_malformed(url, number, why, data)) from None
    except _SHAPE_ERRORS as exc:
        why = f"has a field of the wrong type or shape ({type(exc).__name__}: {exc})"
        raise MalformedResponse(_malformed(url, number, why, data)) from None


def _malformed(url: str, number: int, why: str, data: str) -> str:
    host = httpx.URL(url).netloc.decode() if url else "the server"
    shown = " ".join(data.split())
    shown = shown if len(shown) <= 160 else shown[:160] + "…"
    return f"Malformed response from {host}: stream event {number} {why}: {shown}"


class MalformedResponse(Exception):
    """The server's stream could not be read (one-line text naming the server and the event)."""


SILENT_NEAR_WINDOW = 0.5
"""A silent stream is resolved when the request's chars/4 size is at least this share of the
window: dense text (numbers, code) tokenizes to 1.5-2x the chars/4 estimate, so a request
estimated at half the window can already be over it."""


def near_window(model: Model, body: dict[str, Any]) -> bool:
    """True when `body` (chars/4 of the whole request) may not fit the model's window; an unknown
    window counts as near (nothing rules an overflow out)."""
    window = int(model.get("contextWindow") or 0)
    if window <= 0:
        return True
    size = len(json.dumps(body, ensure_ascii=False)) / 4  # tools and all: the server counts them too
    return size >= window * SILENT_NEAR_WINDOW


async def reissue_without_streaming(
    client: httpx.AsyncClient, request: Any, *, timeout: float | None = None  # noqa: ASYNC109
) -> None:
    """Send `request` once more with `stream: false`; raise `ProviderHTTPStatus` with the server's
    own error when it answers one. A 2xx answer raises nothing (the empty stream was transient,
    and is reported as such)."""
    body = {k: v for k, v in request.body.items() if k != "stream_options"}
    body["stream"] = False
    extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
    # A fresh connection: a server that failed inside its stream (llama.cpp) drops the kept-alive
    # one, and the pool would hand that one out again.
    async with httpx.AsyncClient(timeout=client.timeout) as fresh:
        response = await fresh.request(request.method, request.url, headers=json_headers(request.headers),
                                       content=_json.dumps(body), **extra)
    if response.status_code >= 400:
        raise ProviderHTTPStatus(response.status_code, response.text, response.headers)


async def _quiet_close(awaitable: Any) -> None:
    try:
        await awaitable
    except Exception:
        pass


def block_index(message: AssistantMessage, block: dict[str, Any]) -> int:
    """Position of `block` (by identity) in the message's content: the events' `contentIndex`."""
    return next(i for i, b in enumerate(message["content"]) if b is block)
