"""Steps with a predicate go to the request they are meant for, whatever the arrival order."""

from __future__ import annotations

import asyncio

from picontext.ai.providers import StreamOptions
from picontext.ai.stream import complete
from picontext.testing import ScriptedModelServer, http_error, text


def _ctx(prompt: str) -> dict:
    return {"messages": [{"role": "user", "content": prompt, "timestamp": 1}]}


async def test_concurrent_requests_get_their_own_replies(server: ScriptedModelServer) -> None:
    server.expect(text("about apples").when_body_contains("apples?"), text("anything else"))
    model = server.model("openai-completions")
    other, apples = await asyncio.gather(
        complete(model, _ctx("what about pears?"), StreamOptions(api_key="k")),
        complete(model, _ctx("what about apples?"), StreamOptions(api_key="k")),
    )
    assert apples["content"][0]["text"] == "about apples"
    assert other["content"][0]["text"] == "anything else"


async def test_a_predicate_that_matches_nothing_leaves_the_step_unused(server: ScriptedModelServer) -> None:
    server.expect(http_error(500, "boom").when(lambda req: False), text("plain"))
    reply = await complete(server.model("openai-completions"), _ctx("hi"), StreamOptions(api_key="k"))
    assert reply["content"][0]["text"] == "plain"
    assert len(server.pending_steps) == 1
    server.reset()  # the fixture's assert_complete would (rightly) flag the unused step


def test_unused_steps_are_named_in_a_few_words() -> None:
    import threading

    import pytest

    from picontext.testing import overflow, reply, tool_call

    with ScriptedModelServer() as server:
        server.expect(text("x" * 5000), overflow(), reply(text("hi"), tool_call("read", {"path": "a"})),
                      text("held").hold_after(1, threading.Event()), *[text(f"more {i}") for i in range(5)])
        with pytest.raises(AssertionError) as failed:
            server.assert_complete()
    message = str(failed.value)
    assert len(message) < 400 and "\n" not in message  # a repr of these steps runs to kilobytes
    assert message.startswith("ScriptedModelServer: 9 scripted step(s) never requested (0 requests arrived): ")
    assert "http 400 (overflow)" in message and "reply[text 'hi', tool_call read]" in message
    assert "reply[text 'held'] held" in message and message.endswith("; and 4 more")
