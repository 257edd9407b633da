"""Request bodies and final messages of picontext's providers against Pi 0.87.0's, over real HTTP.

For each of the four wire APIs, a handful of contexts (system prompt + user; a tool turn with
thinking, text, a tool call and its result; parallel tool calls with an error result; a reasoning
request; a no-cache summarization-style request) and `SCENARIOS` (varied models and options), the
reference's `streamSimple` (pi-ai `dist/api/<api>.js`, driven by node/ops/requests_ops.mjs) and our
`stream()` are pointed at the
same ScriptedModelServer (same baseUrl) and get the same scripted SSE reply. We compare:

* the recorded request bodies, parsed JSON, after `normalize()`: JSON carried in strings (tool-call
  arguments) is parsed, so the comparison is by value (both sides now write compact JSON); any
  difference must be a deliberate one listed in `KNOWN_BODY` (docs/divergences.md, "Provider
  requests") with both values, so a change on either side shows up (there are none), or one of
  the rules applied in `reference_body` and `small_window_caps`;
* the event types in order, and the final assistant messages: content, usage (cost rounded to
  1e-12), stopReason, rawStopReason, responseId, errorMessage (differences in `KNOWN_MESSAGE`).

All four APIs compare fairly: the reference's SDK clients (openai, @anthropic-ai/sdk,
@google/genai) accept the scripted server's baseUrl. Headers are not compared (each SDK adds its
own), nor timestamps.

Thinking signatures are written per API the way each API's own parser stores them (a JSON
reasoning item for Responses, a base64 thought signature for Gemini), so both sides replay them.
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest

from picontext.ai.providers import StreamOptions
from picontext.ai.stream import stream
from picontext.scripted import ScriptedModelServer, reply, text, thinking, tokens, tool_call

APIS = ["openai-completions", "openai-responses", "anthropic-messages", "google-generative-ai"]
KEY = "sk-test-differential-123456"

SIGNATURES = {
    "openai-completions": "reasoning_content",
    "openai-responses": json.dumps(
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "need to read"}],
            "encrypted_content": "enc-1",
        }
    ),
    "anthropic-messages": "sig-anthropic-1",
    "google-generative-ai": "c2lnLWdlbWluaS0x",
}

READ = {
    "name": "read",
    "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}
LS = {
    "name": "ls",
    "description": "List a directory",
    "parameters": {"type": "object", "properties": {"dir": {"type": "string"}, "all": {"type": "boolean"}}},
}


def _usage() -> dict[str, Any]:
    return {
        "input": 50,
        "output": 10,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 60,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }


def _assistant(model: dict[str, Any], content: list[dict[str, Any]], stop: str = "toolUse") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": content,
        "api": model["api"],
        "provider": model["provider"],
        "model": model["id"],
        "usage": _usage(),
        "stopReason": stop,
        "timestamp": 2,
    }


def context_for(case: str, model: dict[str, Any]) -> dict[str, Any]:
    api = model["api"]
    if case == "plain":
        return {"systemPrompt": "You are terse.", "messages": [{"role": "user", "content": "hi", "timestamp": 1}]}
    if case in ("tool_turn", "reasoning", "no_cache"):
        return {
            "systemPrompt": "You are a coding agent.",
            "messages": [
                {"role": "user", "content": "read a.txt", "timestamp": 1},
                _assistant(
                    model,
                    [
                        {"type": "thinking", "thinking": "need to read", "thinkingSignature": SIGNATURES[api]},
                        {"type": "text", "text": "Reading it."},
                        {"type": "toolCall", "id": "call_1", "name": "read", "arguments": {"path": "a.txt"}},
                    ],
                ),
                {
                    "role": "toolResult",
                    "toolCallId": "call_1",
                    "toolName": "read",
                    "content": [{"type": "text", "text": "hello\nworld"}],
                    "isError": False,
                    "timestamp": 3,
                },
                {"role": "user", "content": [{"type": "text", "text": "and now?"}], "timestamp": 4},
            ],
            "tools": [READ, LS],
        }
    if case == "parallel_calls":
        return {
            "systemPrompt": "You are a coding agent.",
            "messages": [
                {"role": "user", "content": "look around", "timestamp": 1},
                _assistant(
                    model,
                    [
                        {"type": "toolCall", "id": "call_a", "name": "ls", "arguments": {"dir": "src", "all": True}},
                        {"type": "toolCall", "id": "call_b", "name": "read", "arguments": {"path": "missing.txt"}},
                    ],
                ),
                {
                    "role": "toolResult",
                    "toolCallId": "call_a",
                    "toolName": "ls",
                    "content": [{"type": "text", "text": "main.py"}],
                    "isError": False,
                    "timestamp": 3,
                },
                {
                    "role": "toolResult",
                    "toolCallId": "call_b",
                    "toolName": "read",
                    "content": [{"type": "text", "text": "ENOENT: no such file"}],
                    "isError": True,
                    "timestamp": 4,
                },
            ],
            "tools": [READ, LS],
        }
    if case == "images":
        return {
            "systemPrompt": "You look at pictures.",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "what is this?"},
                        {"type": "image", "mimeType": "image/png", "data": PNG},
                    ],
                    "timestamp": 1,
                },
                _assistant(
                    model,
                    [
                        {"type": "toolCall", "id": "call_s", "name": "read", "arguments": {"path": "b.png"}},
                        {"type": "toolCall", "id": "call_t", "name": "read", "arguments": {"path": "c.png"}},
                    ],
                ),
                {
                    "role": "toolResult",
                    "toolCallId": "call_s",
                    "toolName": "read",
                    "content": [
                        {"type": "text", "text": "an image:"},
                        {"type": "image", "mimeType": "image/png", "data": PNG},
                    ],
                    "isError": False,
                    "timestamp": 3,
                },
                {
                    "role": "toolResult",
                    "toolCallId": "call_t",
                    "toolName": "read",
                    "content": [{"type": "image", "mimeType": "image/png", "data": PNG}],
                    "isError": False,
                    "timestamp": 4,
                },
            ],
            "tools": [READ],
        }
    if case == "no_tools":
        ctx = context_for("tool_turn", model)
        del ctx["tools"]
        return ctx
    raise AssertionError(case)


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


CASES = ["plain", "tool_turn", "parallel_calls", "reasoning", "no_cache"]


def options_for(case: str) -> tuple[dict[str, Any], StreamOptions]:
    """(reference options, our options) with the same meaning."""
    if case == "reasoning":
        return ref_options(StreamOptions(api_key=KEY, session_id="sess-1", reasoning="high", max_tokens=4000)), (
            StreamOptions(api_key=KEY, session_id="sess-1", reasoning="high", max_tokens=4000)
        )
    if case == "no_cache":
        opts = StreamOptions(api_key=KEY, session_id="sess-1", cache_retention="none", max_tokens=2000)
        return ref_options(opts), opts
    opts = StreamOptions(api_key=KEY, session_id="sess-1")
    return ref_options(opts), opts


def ref_options(opts: StreamOptions) -> dict[str, Any]:
    """The reference's `streamSimple` options for ours. "off" is sent as no reasoning at all, as
    Pi's agent does (`reasoning: level === "off" ? undefined : level`)."""
    out: dict[str, Any] = {"apiKey": opts.api_key}
    if opts.session_id is not None:
        out["sessionId"] = opts.session_id
    if opts.reasoning not in (None, "off"):
        out["reasoning"] = opts.reasoning
    if opts.max_tokens is not None:
        out["maxTokens"] = opts.max_tokens
    if opts.cache_retention != "short":
        out["cacheRetention"] = opts.cache_retention
    if opts.temperature is not None:
        out["temperature"] = opts.temperature
    if opts.thinking_budget_tokens is not None and opts.reasoning not in (None, "off"):
        level = "high" if opts.reasoning in ("xhigh", "max") else opts.reasoning
        out["thinkingBudgets"] = {level: opts.thinking_budget_tokens}
    if opts.tool_choice is not None:
        out["toolChoice"] = opts.tool_choice
    return out


def scripted_reply(case: str):  # type: ignore[no-untyped-def]
    if case == "plain":
        return text("Hello there, friend.")
    if case == "parallel_calls":
        return reply(
            tool_call("read", {"path": "a.txt"}, call_id="call_x"),
            tool_call("ls", {"dir": "."}, call_id="call_y"),
            usage=tokens(300, 25, cache_read=120),
        )
    return reply(
        thinking("let me think", signature="sig-out"),
        text("Done: hello world"),
        tool_call("read", {"path": "b.txt"}, call_id="call_7"),
        usage=tokens(1200, 40, cache_read=800, cache_write=64),
    )


# -- deliberate differences (docs/divergences.md, "Provider requests") ---------------------------------------

# Each deliberate difference is pinned as {api: {path: (reference value, our value)}}, so a change
# on either side shows up; "<absent>" means the key is not sent. There are none at present.
ABSENT = "<absent>"
KNOWN_BODY: dict[str, dict[str, tuple[Any, Any]]] = {}
KNOWN_MESSAGE: dict[str, dict[str, tuple[Any, Any]]] = {}


# The third rule (docs/divergences.md, "A safety margin that fits small windows"): the output cap
# keeps min(4096, window / 8) tokens free beside the estimate, Pi always 4096. The context of these
# scenarios is estimated at 65 tokens, so Pi leaves 4300 - 65 - 4096 = 139 and we 4300 - 65 - 538;
# with 6000, 1839 against 6000 - 65 - 750. Anthropic's thinking budget stays 1024 under the cap.
SMALL_WINDOW_CAPS: dict[str, tuple[int, int]] = {"small-window": (139, 3697), "small-window-high": (1839, 5185)}
CAP_PATH = {"openai-completions": "max_tokens", "openai-responses": "max_output_tokens",
            "anthropic-messages": "max_tokens", "google-generative-ai": "generationConfig.maxOutputTokens"}


def small_window_caps(api: str, scenario: str) -> dict[str, tuple[Any, Any]]:
    if scenario not in SMALL_WINDOW_CAPS:
        return {}
    pi_cap, our_cap = SMALL_WINDOW_CAPS[scenario]
    known: dict[str, tuple[Any, Any]] = {CAP_PATH[api]: (pi_cap, our_cap)}
    if api == "anthropic-messages" and scenario == "small-window-high":
        known["thinking.budget_tokens"] = (pi_cap - 1024, our_cap - 1024)
    return known


def user_text_as_string(body: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The one rule-shaped body difference (docs/divergences.md, "Text-only user content as a
    string"): on openai-completions we send a user message whose parts are all text as one string.
    Returns the reference body with that rule applied, and how many messages it rewrote."""
    body = copy.deepcopy(body)
    rewritten = 0
    for message in body.get("messages", []):
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list) and content:
            if all(isinstance(p, dict) and p.get("type") == "text" and set(p) == {"type", "text"} for p in content):
                message["content"] = "\n".join(p["text"] for p in content)
                rewritten += 1
    return body, rewritten


def max_tokens_for_local_servers(body: dict[str, Any]) -> dict[str, Any]:
    """The second rule (docs/divergences.md, "`max_tokens` for servers on this machine"): a
    local base URL (the scripted server is one) gets `max_tokens`, not `max_completion_tokens`."""
    if "max_completion_tokens" not in body:
        return body
    body = dict(body)
    body["max_tokens"] = body.pop("max_completion_tokens")
    return body


def reference_body(api: str, body: dict[str, Any]) -> dict[str, Any]:
    if api != "openai-completions":
        return body
    return max_tokens_for_local_servers(user_text_as_string(body)[0])


def _parse_json_strings(value: Any, key: str | None = None) -> Any:
    if isinstance(value, dict):
        return {k: _parse_json_strings(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_parse_json_strings(v) for v in value]
    if key == "arguments" and isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def normalize(body: Any) -> Any:
    return _parse_json_strings(copy.deepcopy(body))


def diff(a: Any, b: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Paths where `a` and `b` differ: (path, a's value, b's value); ABSENT for a missing key."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[tuple[str, Any, Any]] = []
        for k in sorted(set(a) | set(b)):
            out += diff(a.get(k, ABSENT), b.get(k, ABSENT), f"{path}.{k}" if path else k)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out += diff(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [(path, a, b)]


def final_view(message: dict[str, Any]) -> dict[str, Any]:
    view = {k: message.get(k) for k in ("content", "stopReason", "rawStopReason", "responseId", "errorMessage")}
    usage = dict(message["usage"])
    usage["cost"] = {k: round(float(v), 12) for k, v in usage["cost"].items()}
    view["usage"] = usage
    return view


async def _ours(model: dict[str, Any], ctx: dict[str, Any], opts: StreamOptions) -> tuple[list[str], dict[str, Any]]:
    s = stream(model, ctx, opts)  # type: ignore[arg-type]
    types = [ev["type"] async for ev in s]
    return types, dict(await s.result())


@pytest.fixture(scope="module")
def server():  # type: ignore[no-untyped-def]
    with ScriptedModelServer() as srv:
        yield srv


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("api", APIS)
def test_request_and_message_match_reference(pi, server: ScriptedModelServer, api: str, case: str) -> None:  # type: ignore[no-untyped-def]
    server.reset()
    model = server.model(api, reasoning=True, max_tokens=8192)  # type: ignore[arg-type]
    ctx = context_for(case, model)  # type: ignore[arg-type]
    ref_opts, our_opts = options_for(case)
    server.expect(scripted_reply(case), scripted_reply(case))

    ref = pi.op("requests_ops.streamOnce", model, ctx, ref_opts)
    our_events, ours = asyncio.run(_ours(model, ctx, our_opts))  # type: ignore[arg-type]
    server.assert_complete()
    ref_req, our_req = server.requests
    # The Anthropic SDK adds `?beta=true` to the path; headers differ by SDK (x-stainless-*, accept)
    # and are not compared.
    assert ref_req.path.replace("?beta=true", "") == our_req.path

    _assert_known(
        diff(normalize(reference_body(api, ref_req.body)), normalize(our_req.body)), KNOWN_BODY.get(api, {}),
        f"{api}/{case} body",
    )
    assert ref["events"] == our_events
    _assert_known(
        diff(final_view(ref["message"]), final_view(ours)), KNOWN_MESSAGE.get(api, {}), f"{api}/{case} message"
    )


def _assert_known(differences: list[tuple[str, Any, Any]], known: dict[str, tuple[Any, Any]], where: str) -> None:
    unexplained = [d for d in differences if d[0] not in known]
    assert unexplained == [], f"{where} differs from the reference: {unexplained}"
    for path, ref_value, our_value in differences:
        assert (ref_value, our_value) == known[path], f"{where}: {path}"


# -- varied models and options ----------------------------------------------------------------------------
# (name, context case, model overrides, our options); every API runs every scenario unless `apis` limits it.
Scenario = tuple[str, str, dict[str, Any], dict[str, Any], tuple[str, ...]]
_NOT_GEMINI = ("openai-completions", "openai-responses", "anthropic-messages")
_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh")
SCENARIOS: list[Scenario] = [
    *((f"level-{lv}", "tool_turn", {}, {"reasoning": lv}, ()) for lv in _LEVELS),
    *((f"level-{lv}-max3000", "tool_turn", {}, {"reasoning": lv, "max_tokens": 3000}, ()) for lv in _LEVELS),
    ("non-reasoning-default", "tool_turn", {"reasoning": False}, {}, ()),
    ("non-reasoning-high", "tool_turn", {"reasoning": False}, {"reasoning": "high", "max_tokens": 1000}, ()),
    ("non-reasoning-plain", "plain", {"reasoning": False}, {}, ()),
    ("no-tools-history", "no_tools", {}, {}, ()),
    ("no-tools-non-reasoning", "no_tools", {"reasoning": False}, {}, ()),
    ("images", "images", {}, {}, ()),
    ("images-text-only-model", "images", {"input": ["text"]}, {}, ()),
    ("images-high", "images", {}, {"reasoning": "high"}, ()),
    ("small-window", "tool_turn", {"contextWindow": 4300}, {}, ()),
    ("small-window-high", "tool_turn", {"contextWindow": 6000, "maxTokens": 32000}, {"reasoning": "high"}, ()),
    ("big-model-cap", "plain", {"maxTokens": 64000}, {"reasoning": "medium"}, ()),
    ("long-cache", "tool_turn", {}, {"cache_retention": "long"}, ()),
    ("temperature", "plain", {"reasoning": False}, {"temperature": 0.3}, ()),
    ("temperature-reasoning", "plain", {}, {"temperature": 0.3, "reasoning": "low"}, ()),
    ("budget", "tool_turn", {"maxTokens": 64000}, {"reasoning": "medium", "thinking_budget_tokens": 5000}, ()),
    ("tool-choice", "tool_turn", {}, {"tool_choice": "auto"}, ("openai-completions", "openai-responses")),
    ("map-off-null", "tool_turn", {"thinkingLevelMap": {"off": None}}, {}, ()),
    # Pi throws for a Gemini level mapped outside minimal..high, so Gemini gets its own mapping.
    (
        "map-values",
        "tool_turn",
        {"thinkingLevelMap": {"high": "max", "xhigh": "xhigh"}},
        {"reasoning": "xhigh"},
        _NOT_GEMINI,
    ),
    (
        "map-gemini",
        "tool_turn",
        {"thinkingLevelMap": {"low": "MEDIUM"}},
        {"reasoning": "low"},
        ("google-generative-ai",),
    ),
    (
        "gemini-3-off-null",
        "tool_turn",
        {"id": "gemini-3-pro-preview", "thinkingLevelMap": {"off": None}},
        {},
        ("google-generative-ai",),
    ),
    (
        "gemini-2.5-flash-high",
        "tool_turn",
        {"id": "gemini-2.5-flash"},
        {"reasoning": "high"},
        ("google-generative-ai",),
    ),
    ("gemini-2.5-pro-min", "tool_turn", {"id": "gemini-2.5-pro"}, {"reasoning": "minimal"}, ("google-generative-ai",)),
    ("gemini-3-high", "tool_turn", {"id": "gemini-3-pro-preview"}, {"reasoning": "high"}, ("google-generative-ai",)),
    ("gemini-3-off", "tool_turn", {"id": "gemini-3-pro-preview"}, {}, ("google-generative-ai",)),
    ("gemini-3-images", "images", {"id": "gemini-3-flash-preview"}, {}, ("google-generative-ai",)),
    ("gemini-2-images", "images", {"id": "gemini-2.5-flash"}, {}, ("google-generative-ai",)),
]


def _scenario_params() -> list[Any]:
    return [pytest.param(api, sc, id=f"{api}-{sc[0]}") for sc in SCENARIOS for api in APIS if not sc[4] or api in sc[4]]


@pytest.mark.parametrize(("api", "scenario"), _scenario_params())
def test_varied_models_and_options_match_reference(
    pi, server: ScriptedModelServer, api: str, scenario: Scenario
) -> None:  # type: ignore[no-untyped-def]
    _name, case, overrides, opts, _apis = scenario
    server.reset()
    model = server.model(api, reasoning=True, max_tokens=8192)  # type: ignore[arg-type]
    model.update(overrides)  # type: ignore[typeddict-item]
    ctx = context_for(case, model)  # type: ignore[arg-type]
    ours_opts = StreamOptions(api_key=KEY, session_id="sess-1", **opts)
    reply_case = "plain" if case == "plain" else "tool_turn"
    server.expect(scripted_reply(reply_case), scripted_reply(reply_case))

    ref = pi.op("requests_ops.streamOnce", model, ctx, ref_options(ours_opts))
    our_events, ours = asyncio.run(_ours(model, ctx, ours_opts))  # type: ignore[arg-type]
    server.assert_complete()
    ref_req, our_req = server.requests
    assert ref_req.path.replace("?beta=true", "") == our_req.path
    differences = diff(normalize(reference_body(api, ref_req.body)), normalize(our_req.body))
    caps = small_window_caps(api, _name)
    _assert_known(differences, {**KNOWN_BODY.get(api, {}), **caps}, f"{api} body")
    assert {d[0] for d in differences} >= set(caps), f"{api}: the small-window margin is not ours"
    assert ref["events"] == our_events
    _assert_known(diff(final_view(ref["message"]), final_view(ours)), KNOWN_MESSAGE.get(api, {}), f"{api} message")


def test_text_only_user_content_is_the_only_rewritten_part(pi, server: ScriptedModelServer) -> None:  # type: ignore[no-untyped-def]
    """The rule changes text-only user messages and nothing else: with images the parts stay."""
    for case, expect_rewritten in (("tool_turn", True), ("images", False)):
        server.reset()
        model = server.model("openai-completions", reasoning=False)
        ctx = context_for(case, model)  # type: ignore[arg-type]
        server.expect(scripted_reply("plain"), scripted_reply("plain"))
        ref_opts, our_opts = options_for("plain")
        pi.op("requests_ops.streamOnce", model, ctx, ref_opts)
        asyncio.run(_ours(model, ctx, our_opts))  # type: ignore[arg-type]
        ref_req, our_req = server.requests
        _, rewritten = user_text_as_string(ref_req.body)
        assert (rewritten > 0) == expect_rewritten, case
        users = [m for m in our_req.body["messages"] if m["role"] == "user"]
        assert any(isinstance(m["content"], list) for m in users) != expect_rewritten, case
