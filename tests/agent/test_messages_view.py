"""`AgentSession.messages` is the projection handed out as a read-only view, not a copy per
read (issue 20 item 9: no per-request copies of the context)."""

from __future__ import annotations

from pathlib import Path

import pytest
from runtime_helpers import make

from picontext.testing import ScriptedModelServer, text


async def test_messages_is_a_read_only_view_of_the_projection(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, _ = make(server, tmp_path)
    server.expect(text("first answer"))
    await session.prompt("first question")
    messages = session.messages
    assert messages == session.manager.build_session_context()["messages"]
    with pytest.raises(AttributeError):
        messages.append({"role": "user", "content": "smuggled", "timestamp": 1})  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        messages[0] = {"role": "user", "content": "smuggled", "timestamp": 1}  # type: ignore[index]


async def test_a_view_stays_what_it_was_and_the_next_read_sees_the_new_exchange(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    session, _ = make(server, tmp_path)
    server.expect(text("first answer"))
    await session.prompt("first question")
    before = session.messages
    roles_before = [m["role"] for m in before]
    server.expect(text("second answer"))
    await session.prompt("second question")
    assert [m["role"] for m in before] == roles_before  # a view taken earlier does not change
    after = session.messages
    assert [m["role"] for m in after] == [*roles_before, "user", "assistant"]
    assert after[-1]["content"][0]["text"] == "second answer"
    own = list(after)  # a list of one's own, for a caller that changes it
    own.append({"role": "user", "content": "mine", "timestamp": 1})
    assert len(session.messages) == len(after)
