"""Summaries over the session's cached prompt prefix (`compaction.reusePromptCache`, docs/compaction.md).

Real HTTP against the scripted servers speaking the Anthropic and OpenAI wires: the summary
request must be the session's last request cut at the end of the summarized span (system
prompt, tools and messages unchanged), the cache marker on its last reused block, the cache
usage of the summary call recorded and shown by `picontext stats`, and with the setting off the
request Pi's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from runtime_helpers import file_entries, make

from picontext.compaction import prompts
from picontext.compaction.prepare import prepare_compaction
from picontext.compaction.prompt_cache import SessionRequest, plan_cached_prefix
from picontext.scripted import ScriptedModelServer, reply, text, tokens, tool_call
from picontext.scripted.model_server import RecordedRequest

SETTINGS = {"reserveTokens": 400, "keepRecentTokens": 1100}
STOP = prompts.CACHED_STOP.split(":")[0]  # "Stop here. Do not answer or continue the conversation above ..."


def dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def is_summary(req: RecordedRequest) -> bool:
    return STOP in dump(req.body) or "<conversation>" in dump(req.body)


async def compacted_session(server: ScriptedModelServer, tmp_path: Path, api: str, compaction: dict[str, Any],
                            summary_usage: Any = None) -> tuple[Any, list[dict[str, Any]]]:
    """Two long exchanges, then a turn whose tool output crosses the threshold: one compaction."""
    session, events = make(server, tmp_path, api=api, window=2600, compaction={**SETTINGS, **compaction})
    for i in range(2):
        server.expect(reply(text(f"answer {i}"), usage=tokens(100 + 210 * (i + 1), 5)))
        await session.prompt(f"question {i} " + "q" * 800)
    server.expect(
        reply(tool_call("big", {"size": 4000}), usage=tokens(1290, 10)),
        reply(text("## Goal\nanswer the questions"), usage=summary_usage or tokens(60, 30)),
        text("final answer"),
    )
    await session.prompt("third")
    server.assert_complete()
    return session, events


def summary_and_previous(server: ScriptedModelServer) -> tuple[RecordedRequest, RecordedRequest]:
    index = next(i for i, r in enumerate(server.requests) if is_summary(r))
    return server.requests[index], server.requests[index - 1]


def markers(value: Any, path: str = "") -> list[str]:
    """Where `cache_control` occurs in a request body (JSON paths)."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found += [path] if key == "cache_control" else markers(item, f"{path}.{key}")
    elif isinstance(value, list):
        for n, item in enumerate(value):
            found += markers(item, f"{path}[{n}]")
    return found


def without_markers(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_markers(v) for v in value]
    return value


def stats_output(*args: str) -> str:
    """`picontext stats ARGS` as a real subprocess."""
    return subprocess.run([sys.executable, "-m", "picontext", "stats", *args], capture_output=True, text=True,
                          check=True, env=dict(os.environ)).stdout


def compaction_entry(session: Any) -> dict[str, Any]:
    return next(e for e in file_entries(session) if e["type"] == "compaction")


async def test_anthropic_summary_reuses_the_sessions_prefix_up_to_the_marker(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    session, _ = await compacted_session(server, tmp_path, "anthropic-messages", {"reusePromptCache": True})
    summary, previous = summary_and_previous(server)
    body, last = summary.body, previous.body
    # Same system prompt and tools, byte for byte, with the markers the session's request had.
    assert dump(body["system"]) == dump(last["system"]) and dump(body["tools"]) == dump(last["tools"])
    assert body["model"] == last["model"]
    *prefix, instruction = body["messages"]
    assert len(prefix) >= 2 and dump(prefix[:-1]) == dump(last["messages"][: len(prefix) - 1])
    # The last reused block carries the marker; without it, it is the session's block unchanged.
    assert dump(without_markers(prefix[-1])) == dump(without_markers(last["messages"][len(prefix) - 1]))
    assert prefix[-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    # Three breakpoints (Anthropic allows four): system, last tool, last reused block; none on the instruction.
    n = len(prefix) - 1
    assert sorted(markers(body)) == sorted([".system[0]", f".tools[{len(body['tools']) - 1}]",
                                           f".messages[{n}].content[{len(prefix[-1]['content']) - 1}]"])
    assert instruction["role"] == "user" and "cache_control" not in dump(instruction)
    assert instruction["content"][0]["text"] == prompts.cached_history_request(False, None)
    details = compaction_entry(session)["details"]
    assert details["promptCache"] == {"reused": True, "prefixMessages": len(prefix) + 1}  # + the system message


async def test_cache_usage_of_the_summary_call_is_recorded_and_shown_by_stats(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    session, _ = await compacted_session(server, tmp_path, "anthropic-messages", {"reusePromptCache": True},
                                         summary_usage=tokens(40, 30, cache_read=1500, cache_write=25))
    entry = compaction_entry(session)
    usage = entry["usage"]
    assert (usage["input"], usage["output"], usage["cacheRead"], usage["cacheWrite"]) == (40, 30, 1500, 25)
    # scripted price per million: input 3, output 15, cache read 0.3, cache write 3.75
    assert abs(usage["cost"]["cacheRead"] - 1500 * 0.3 / 1e6) < 1e-12
    assert abs(usage["cost"]["cacheWrite"] - 25 * 3.75 / 1e6) < 1e-12
    path = session.manager.get_session_file()
    stats = json.loads(await asyncio.to_thread(stats_output, "--json", path))
    row = stats["compactions"][0]
    assert (row["id"], row["cacheRead"], row["cacheWrite"]) == (entry["id"], 1500, 25)
    table = await asyncio.to_thread(stats_output, path)
    line = next(ln for ln in table.splitlines() if ln.startswith(entry["id"][:16]))
    assert line.split()[1:5] == ["40", "30", "1,500", "25"]


async def test_setting_off_sends_pis_request_unchanged(server: ScriptedModelServer, tmp_path: Path) -> None:
    bodies = []
    for n, compaction in enumerate(({}, {"reusePromptCache": False})):
        server.requests.clear()
        session, _ = await compacted_session(server, tmp_path / str(n), "anthropic-messages", compaction)
        summary, _previous = summary_and_previous(server)
        bodies.append(summary.body)
        assert "promptCache" not in compaction_entry(session)["details"]
    assert dump(bodies[0]) == dump(bodies[1])
    body = bodies[0]
    assert body["system"] == [{"type": "text", "text": prompts.SYSTEM_PROMPT}] and "tools" not in body
    assert markers(body) == [] and len(body["messages"]) == 1
    assert body["messages"][0]["content"][0]["text"].startswith("<conversation>\n[User]: question 0")


async def test_openai_responses_summary_keeps_the_sessions_input_prefix_and_cache_key(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    session, _ = await compacted_session(server, tmp_path, "openai-responses", {"reusePromptCache": True},
                                         summary_usage=tokens(100, 30, cache_read=1200))
    summary, previous = summary_and_previous(server)
    body, last = summary.body, previous.body
    assert body["prompt_cache_key"] == last["prompt_cache_key"] == session.manager.get_session_id()
    assert dump(body["tools"]) == dump(last["tools"]) and body.get("instructions") == last.get("instructions")
    *prefix, instruction = body["input"]
    assert dump(prefix) == dump(last["input"][: len(prefix)])
    assert STOP in dump(instruction) and markers(body) == []
    assert compaction_entry(session)["usage"]["cacheRead"] == 1200


async def test_another_summary_model_keeps_todays_request_and_says_why(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    session, _ = await make_with_other_summarizer(server, tmp_path)
    summary, _previous = summary_and_previous(server)
    assert summary.body["system"][0]["text"] == prompts.SYSTEM_PROMPT
    note = compaction_entry(session)["details"]["promptCache"]
    assert note["reused"] is False and "compaction.model" in note["reason"]


async def make_with_other_summarizer(server: ScriptedModelServer, tmp_path: Path) -> tuple[Any, Any]:
    home = Path(os.environ["PICONTEXT_DIR"])
    (home / "models.json").write_text(json.dumps({"providers": {"scripted": {
        "baseUrl": server.url, "api": "anthropic-messages", "apiKey": "k",
        "models": [{"id": "small", "contextWindow": 200000, "maxTokens": 4096}]}}}))
    return await compacted_session(server, tmp_path, "anthropic-messages",
                                   {"reusePromptCache": True, "model": "scripted/small"})


async def test_a_tool_call_over_the_prefix_falls_back_to_todays_request(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    session, _ = make(server, tmp_path, api="anthropic-messages", window=2600,
                      compaction={**SETTINGS, "reusePromptCache": True})
    for i in range(2):
        server.expect(reply(text(f"answer {i}"), usage=tokens(100 + 210 * (i + 1), 5)))
        await session.prompt(f"question {i} " + "q" * 800)
    server.expect(
        reply(tool_call("big", {"size": 4000}), usage=tokens(1290, 10)),
        reply(tool_call("big", {"size": 10}), usage=tokens(5, 7, cache_read=1000)),  # the model ignored "Stop"
        reply(text("## Goal\nplain"), usage=tokens(300, 20)),
        text("final answer"),
    )
    await session.prompt("third")
    server.assert_complete()
    cached, plain = [r for r in server.requests if is_summary(r)]
    assert STOP in dump(cached.body) and plain.body["system"][0]["text"] == prompts.SYSTEM_PROMPT
    entry = compaction_entry(session)
    assert entry["summary"].startswith("## Goal\nplain")
    assert entry["details"]["promptCache"]["reused"] is False
    assert "attempted to call a tool" in entry["details"]["promptCache"]["reason"]
    assert (entry["usage"]["input"], entry["usage"]["output"], entry["usage"]["cacheRead"]) == (305, 27, 1000)


async def test_prefix_older_than_the_cache_lifetime_is_not_reused(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    session, _ = make(server, tmp_path, api="anthropic-messages", window=200_000,
                      compaction={"keepRecentTokens": 300, "reusePromptCache": True})
    for i in range(3):
        server.expect(reply(text(f"answer {i}"), usage=tokens(100 + 210 * (i + 1), 5)))
        await session.prompt(f"question {i} " + "q" * 800)
    request = session.last_request
    assert isinstance(request, SessionRequest)
    prep = prepare_compaction(session.manager.get_branch(), session.compaction.settings())
    assert prep is not None
    fresh = plan_cached_prefix(prep, request, window=200_000, max_tokens=320, now_ms=request.sent_at)
    assert not isinstance(fresh, str) and fresh.turn_end is None
    stale = plan_cached_prefix(prep, request, window=200_000, max_tokens=320, now_ms=request.sent_at + 400_000)
    assert isinstance(stale, str) and "longer than the provider keeps it (5 min)" in stale
    long = dataclasses.replace(request, options=dataclasses.replace(request.options, cache_retention="long"))
    assert not isinstance(plan_cached_prefix(prep, long, window=200_000, max_tokens=320,
                                             now_ms=request.sent_at + 400_000), str)
    small = plan_cached_prefix(prep, request, window=1500, max_tokens=320, now_ms=request.sent_at)
    assert isinstance(small, str) and "do not fit" in small
    none = plan_cached_prefix(prep, None, window=200_000, max_tokens=320)
    assert isinstance(none, str) and "no request" in none


async def test_split_turn_requests_are_both_cut_from_the_sessions_request(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    session, _ = make(server, tmp_path, api="anthropic-messages", window=2600,
                      compaction={**SETTINGS, "reusePromptCache": True})
    for i in range(2):
        server.expect(reply(text(f"answer {i}"), usage=tokens(100 + 210 * (i + 1), 5)))
        await session.prompt(f"question {i} " + "q" * 800)
    history_reply = reply(text("## Goal\nhistory note"), usage=tokens(50, 20)).when_body_contains("## Goal\\n<What")
    prefix_reply = reply(text("## Original Request\nturn note"), usage=tokens(40, 10)).when_body_contains(
        "## Original Request\\n<What")
    server.expect(reply(tool_call("big", {"size": 4800}), usage=tokens(1500, 10)), history_reply, prefix_reply,
                  text("final answer"))
    await session.prompt("third " + "t" * 800)
    server.assert_complete()
    turn_request = next(r for r in server.requests if "third " in dump(r.body) and not is_summary(r))
    summaries = [r for r in server.requests if is_summary(r)]
    assert len(summaries) == 2
    cuts = {}
    for req in summaries:
        *prefix, instruction = req.body["messages"]
        kind = "turn" if "## Original Request" in dump(instruction) else "history"
        cuts[kind] = len(prefix)
        assert dump(prefix[:-1]) == dump(turn_request.body["messages"][: len(prefix) - 1])
        reused = turn_request.body["messages"][len(prefix) - 1]
        assert dump(without_markers(prefix[-1])) == dump(without_markers(reused))
        assert dump(req.body["system"]) == dump(turn_request.body["system"])
    # history: up to the start of the turn; turn prefix: up to the cut, which includes the turn's request
    assert cuts["turn"] > cuts["history"] and "third " in dump(
        next(r for r in summaries if "## Original Request" in dump(r.body["messages"][-1])).body["messages"][-2])
    entry = compaction_entry(session)
    assert entry["summary"].startswith("## Goal\nhistory note" + prompts.SPLIT_TURN_SEPARATOR + "## Original Request")
    assert entry["details"]["promptCache"]["reused"] is True and "turnPrefixMessages" in entry["details"]["promptCache"]


async def test_no_reuse_without_a_cache_or_when_the_messages_differ(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    session, _ = make(server, tmp_path, api="anthropic-messages", window=200_000,
                      compaction={"keepRecentTokens": 300, "reusePromptCache": True})
    for i in range(3):
        server.expect(reply(text(f"answer {i}"), usage=tokens(100 + 210 * (i + 1), 5)))
        await session.prompt(f"question {i} " + "q" * 800)
    request = session.last_request
    assert isinstance(request, SessionRequest)
    prep = prepare_compaction(session.manager.get_branch(), session.compaction.settings())
    assert prep is not None

    def plan(req: SessionRequest) -> Any:
        return plan_cached_prefix(prep, req, window=200_000, max_tokens=320, now_ms=request.sent_at)

    assert not isinstance(plan(request), str)
    gemini = dataclasses.replace(request, model={**request.model, "api": "google-generative-ai"})
    assert plan(gemini) == "the google-generative-ai API has no prompt cache to read"
    uncached = dataclasses.replace(request, options=dataclasses.replace(request.options, cache_retention="none"))
    assert plan(uncached) == "the session sends its requests without prompt caching"
    messages = [dict(m) for m in request.context["messages"]]
    messages[1] = {**messages[1], "content": "rewritten by a context hook"}
    rewritten = dataclasses.replace(request, context={**request.context, "messages": messages})
    assert plan(rewritten) == "the session's last request does not start with the messages up to the cut"


async def test_the_thinking_configuration_is_the_sessions(server: ScriptedModelServer, tmp_path: Path) -> None:
    """Anthropic keeps message cache entries only for the same thinking parameters."""
    from runtime_helpers import BigTool

    from picontext.agent.session import AgentSession
    from picontext.ai.providers import StreamOptions
    from picontext.ai.retry import RetryPolicy
    from picontext.compaction.settings import Settings
    from picontext.session.manager import SessionManager

    session = AgentSession(
        SessionManager.create(str(tmp_path), str(tmp_path / "sessions")),
        model=server.model("anthropic-messages", context_window=20_000, max_tokens=8192, reasoning=True),
        system_prompt="Test agent.", stream_options=StreamOptions(api_key="k"), tools=[BigTool()],
        settings=Settings({"compaction": {"reserveTokens": 17_400, "keepRecentTokens": 1100,
                                          "reusePromptCache": True}}),
        thinking_level="low", retry=RetryPolicy(base_delay_ms=1),
    )
    for i in range(2):
        server.expect(reply(text(f"answer {i}"), usage=tokens(100 + 210 * (i + 1), 5)))
        await session.prompt(f"question {i} " + "q" * 800)
    server.expect(reply(tool_call("big", {"size": 4000}), usage=tokens(2000, 10)),
                  reply(text("## Goal\nthought through"), usage=tokens(60, 30)), text("final answer"))
    await session.prompt("third")
    server.assert_complete()
    summary, previous = summary_and_previous(server)
    assert STOP in dump(summary.body["messages"][-1])
    assert summary.body["thinking"]["type"] == "enabled"
    assert summary.body["thinking"] == previous.body["thinking"]


async def test_a_background_summary_reuses_the_prefix_too(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, events = await compacted_session(server, tmp_path, "anthropic-messages",
                                              {"reusePromptCache": True, "backgroundTokens": 1500})
    assert any(e["type"] == "compaction_background_start" for e in events)
    summary, _previous = summary_and_previous(server)
    assert STOP in dump(summary.body["messages"][-1])
    assert compaction_entry(session)["details"]["promptCache"]["reused"] is True
