"""Steps with a predicate go to the request they are meant for, whatever the arrival order."""

from __future__ import annotations

import asyncio

from picontext.ai.providers import StreamOptions
from picontext.ai.stream import complete
from picontext.scripted import ScriptedModelServer, http_error, text


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

    from picontext.scripted import overflow, reply, tool_call

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


def _post_and_leave(server: ScriptedModelServer, keep_open: bool = False) -> object:
    """A client that writes a whole request and walks away, as a cancelled sibling request does."""
    import json
    import socket

    body = json.dumps({"model": "m", "stream": False, "messages": []}).encode()
    conn = socket.create_connection(server._httpd.server_address[:2])  # type: ignore[union-attr]
    conn.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                 b"content-length: %d\r\n\r\n%s" % (len(body), body))
    if keep_open:
        return conn
    conn.close()
    return None


def test_wait_idle_counts_requests_their_client_gave_up_on(server: ScriptedModelServer) -> None:
    """The flake it ends: a request sent, its client cancelled, the server reading it after the
    test's reset on a loaded machine. After `wait_idle` every request sent is recorded."""
    for sent in range(1, 21):
        server.expect(http_error(503, "busy"))
        _post_and_leave(server)
        assert server.wait_idle()
        assert len(server.requests) == sent and not server.pending_steps


def test_wait_idle_does_not_wait_for_idle_kept_alive_connections(server: ScriptedModelServer) -> None:
    server.expect(text("one"))
    conn = _post_and_leave(server, keep_open=True)  # answered, then left open (a client's pool)
    try:
        assert server.wait_idle()
        assert len(server.requests) == 1
    finally:
        conn.close()  # type: ignore[attr-defined]


def test_wait_idle_gives_up_on_a_stream_held_open() -> None:
    import threading

    release = threading.Event()
    with ScriptedModelServer(text("held").hold_after(1, release)) as held_server:
        model = held_server.model("openai-completions")

        async def ask() -> None:
            await complete(model, _ctx("hi"), StreamOptions(api_key="k"))

        async def run() -> None:
            task = asyncio.create_task(ask())
            await asyncio.to_thread(held_server.wait_for_requests, 1)
            assert not await asyncio.to_thread(held_server.wait_idle, 0.3)  # still answering
            release.set()
            await task
            assert await asyncio.to_thread(held_server.wait_idle)

        asyncio.run(run())


def test_reset_and_assert_complete_wait_for_requests_already_sent() -> None:
    import pytest

    from picontext.scripted import UnexpectedModelRequest

    with ScriptedModelServer() as fresh:
        for _ in range(10):
            fresh.expect(http_error(503, "busy"))
            _post_and_leave(fresh)
            fresh.reset()  # the request lands before the reset, not after it
            assert fresh.wait_idle() and fresh.requests == [] and fresh.unexpected == []
        _post_and_leave(fresh)  # no step for it: the teardown check must see it
        with pytest.raises(UnexpectedModelRequest):
            fresh.assert_complete()
