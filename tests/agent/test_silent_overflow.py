"""An overflow the server reports badly: a 200 stream with no event at all (llama.cpp's server).

Near the window, the request is re-issued once without streaming to read the server's own error,
which is then classified and recovered like any overflow: omit, compact, exactly one retry.
"""

from __future__ import annotations

import json
from pathlib import Path

from runtime_helpers import compact_types, file_entries, kinds, make

from picontext.ai.providers import StreamOptions
from picontext.ai.stream import complete
from picontext.scripted import ScriptedModelServer, overflow, reply, silent_stream, text, tokens


def ctx(chars: int) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": "x" * chars, "timestamp": 0}]}


async def test_a_silent_stream_near_the_window_reads_the_servers_error(server: ScriptedModelServer) -> None:
    model = server.model("openai-completions", context_window=1000)
    server.expect(silent_stream(), overflow())
    msg = await complete(model, ctx(3000), StreamOptions(api_key="k"))  # type: ignore[arg-type]
    assert msg["stopReason"] == "error"
    assert msg["errorMessage"].startswith("400 ") and "maximum context length" in msg["errorMessage"]
    streamed, plain = (r.body for r in server.requests)
    assert streamed["stream"] is True and plain["stream"] is False and "stream_options" not in plain
    assert plain["messages"] == streamed["messages"]


async def test_a_silent_stream_far_from_the_window_is_not_reissued(server: ScriptedModelServer) -> None:
    model = server.model("openai-completions", context_window=100_000)
    server.expect(silent_stream())
    msg = await complete(model, ctx(100), StreamOptions(api_key="k"))  # type: ignore[arg-type]
    assert msg["errorMessage"] == "Stream ended without finish_reason"  # transient: the retry loop's job
    assert len(server.requests) == 1


async def test_a_silent_stream_whose_reissue_succeeds_stays_a_stream_error(server: ScriptedModelServer) -> None:
    model = server.model("openai-completions", context_window=1000)
    server.expect(silent_stream(), text("fine unstreamed"))
    msg = await complete(model, ctx(3000), StreamOptions(api_key="k"))  # type: ignore[arg-type]
    assert msg["errorMessage"] == "Stream ended without finish_reason"
    assert len(server.requests) == 2


async def test_the_agent_recovers_from_a_silent_overflow_once(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, events = make(server, tmp_path, window=3000, max_tokens=256, compaction={"keepRecentTokens": 1600})
    for i in range(2):
        server.expect(reply(text(f"answer {i}"), usage=tokens(400 * (i + 1), 5)))
        await session.prompt(f"question {i} " + "q" * 800)
    events.clear()
    server.expect(silent_stream(), overflow(), text("SUMMARY of the questions"), text("recovered"))
    await session.prompt("the long paste " + "7" * 6000)
    seq = compact_types(events)
    assert seq.count("compaction_start") == 1 and "auto_retry_start" not in seq
    start = next(e for e in events if e["type"] == "compaction_start")
    assert start["reason"] == "overflow"
    assert [e["willRetry"] for e in events if e["type"] == "agent_end"] == [False, False]
    assert kinds(file_entries(session))[-5:] == ["user", "assistant", "context_edit", "compaction", "assistant"]
    assert session.messages[-1]["content"][0]["text"] == "recovered"
    assert len(server.requests) == 2 + 4
    assert "SUMMARY of the questions" in json.dumps(server.requests[-1].body)


async def test_a_stream_cut_off_before_any_event_near_the_window_reads_the_error(
    server: ScriptedModelServer,
) -> None:
    model = server.model("openai-completions", context_window=1000)
    server.expect(text("never sent").drop_after(0), overflow())
    msg = await complete(model, ctx(3000), StreamOptions(api_key="k"))  # type: ignore[arg-type]
    assert msg["errorMessage"].startswith("400 ") and "maximum context length" in msg["errorMessage"]


async def test_a_stream_cut_off_after_a_role_only_chunk_is_silence_too(server: ScriptedModelServer) -> None:
    from picontext.scripted import raw_stream

    model = server.model("openai-completions", context_window=1000)
    role_only = '{"choices":[{"index":0,"delta":{"role":"assistant"}}]}'
    server.expect(raw_stream(role_only).drop_after(1), overflow())
    msg = await complete(model, ctx(3000), StreamOptions(api_key="k"))  # type: ignore[arg-type]
    assert msg["errorMessage"].startswith("400 ") and "maximum context length" in msg["errorMessage"]
