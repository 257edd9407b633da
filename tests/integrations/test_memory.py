"""ConversationMemory: the framework-neutral core of picontext.integrations, on real files and
the scripted model server over real HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from picontext.errors import ConfigError, SessionNotFound, StoreUnavailable
from picontext.integrations.memory import CLEAR_ENTRY, POP_ENTRY, ConversationMemory
from picontext.scripted import ScriptedModelServer, reply, server_error, text
from picontext.session.manager import SessionManager

FAST_RETRY = {"retry": {"maxRetries": 1, "baseDelayMs": 1}}


def user(t: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": t}]}


def assistant(t: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": t}]}


def call(call_id: str, name: str = "lookup") -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "toolCall", "id": call_id, "name": name,
                                              "arguments": {"q": call_id}}]}


def result(call_id: str, t: str, name: str = "lookup") -> dict[str, Any]:
    return {"role": "toolResult", "toolCallId": call_id, "toolName": name, "content": [{"type": "text", "text": t}]}


def texts(messages: list[dict[str, Any]]) -> list[str]:
    out = []
    for m in messages:
        content = m["content"]
        out.append(content if isinstance(content, str) else " ".join(
            b.get("text", b.get("name", "")) for b in content))
    return out


def make(server: ScriptedModelServer, tmp_path: Path, session_id: str | None = None, **kw: Any) -> ConversationMemory:
    model = server.model(context_window=kw.pop("window", 200_000), max_tokens=kw.pop("max_tokens", 2000))
    return ConversationMemory(session_id, model=model, store=str(tmp_path / "store"), cwd=str(tmp_path), **kw)


def test_append_fills_pi_fields_and_reopens_by_id(server: ScriptedModelServer, tmp_path: Path) -> None:
    memory = make(server, tmp_path)
    ids = memory.append([user("hello"), call("c1"), result("c1", "42"), assistant("it is 42")])
    assert len(ids) == 4 and len(set(ids)) == 4
    stored = [memory.manager.get_entry(i)["message"] for i in ids]  # type: ignore[index]
    assert stored[1]["stopReason"] == "toolUse" and stored[3]["stopReason"] == "stop"
    assert stored[3]["provider"] == "openai-compatible" and stored[3]["model"] == "scripted-model"
    assert stored[3]["usage"]["totalTokens"] == 0 and "cost" in stored[3]["usage"]
    assert stored[2]["isError"] is False
    again = make(server, tmp_path, memory.session_id)
    assert again.context() == memory.context()
    assert texts(again.context()) == ["hello", "lookup", "42", "it is 42"]
    # The session records its model, so the picontext agent can continue it.
    types = [e["type"] for e in again.manager.get_entries()]
    assert types[:2] == ["model_change", "thinking_level_change"]


def test_bad_message_writes_nothing(server: ScriptedModelServer, tmp_path: Path) -> None:
    memory = make(server, tmp_path)
    memory.append([user("a"), assistant("b")])
    before = memory.manager.entry_count()
    with pytest.raises(ValueError, match="message 1: role 'tool'"):
        memory.append([user("c"), {"role": "tool", "content": "x"}])
    with pytest.raises(ValueError, match="toolCallId"):
        memory.append([{"role": "toolResult", "content": "x"}])
    assert memory.manager.entry_count() == before
    assert texts(memory.context()) == ["a", "b"]


def test_unknown_session_id_raises_at_construction(server: ScriptedModelServer, tmp_path: Path) -> None:
    make(server, tmp_path).append([user("a"), assistant("b")])
    with pytest.raises(SessionNotFound, match="no-such-session") as info:
        make(server, tmp_path, "no-such-session")
    assert "\n" not in str(info.value)


def test_unusable_store_raises_at_construction(server: ScriptedModelServer, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreUnavailable) as info:
        ConversationMemory(model=server.model(), store=str(blocker), cwd=str(tmp_path))
    assert "\n" not in str(info.value) and str(blocker) in str(info.value)


def test_unknown_model_and_summary_model_without_key(server: ScriptedModelServer, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="Unknown provider 'nope'"):
        ConversationMemory(model="nope/x", cwd=str(tmp_path))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="No API key for provider 'openai'") as info:
        make(server, tmp_path, compaction_model="openai/gpt-4.1-mini")
    assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="No API key"):
        ConversationMemory(model="openai/gpt-4.1-mini", cwd=str(tmp_path))
    assert not (tmp_path / "store").exists()  # refused before any session was created


def test_threshold_uses_reported_usage_before_or_after_the_reply(server: ScriptedModelServer, tmp_path: Path) -> None:
    memory = make(server, tmp_path, window=10_000, settings={"compaction": {"reserveTokens": 2_000}})
    assert memory.threshold() == 8_000
    memory.append([user("q1")])
    memory.record_usage({"input": 7_990, "output": 5})  # reported before the reply is stored
    memory.append([assistant("a1")])
    assert memory.context_tokens() == 7_995 and not memory.should_compact()
    memory.append([user("x" * 400)])  # 100 more estimated tokens
    assert memory.context_tokens() == 8_095 and memory.should_compact()
    # Reported after the reply was stored: an in-memory anchor, same rule.
    other = make(server, tmp_path, window=10_000, settings={"compaction": {"reserveTokens": 2_000}})
    other.append([user("q1"), assistant("a1")])
    assert not other.should_compact()
    other.record_usage({"input": 8_100, "output": 5})
    assert other.context_tokens() == 8_105 and other.should_compact()


def _fill(memory: ConversationMemory, turns: int, size: int = 2_000) -> None:
    for i in range(turns):
        memory.append([user(f"question {i} " + "q" * size), call(f"c{i}"), result(f"c{i}", "r" * size),
                       assistant(f"answer {i}")])


async def test_compaction_summarizes_over_http_and_loses_nothing(server: ScriptedModelServer, tmp_path: Path) -> None:
    memory = make(server, tmp_path, window=16_000,
                  settings={"compaction": {"reserveTokens": 4_000, "keepRecentTokens": 3_000}})
    _fill(memory, 12)
    assert memory.should_compact()
    raw_before = memory.manager.entry_count()
    server.expect(reply(text("## Goal\nanswer the questions\n## Progress\n12 answered")))
    events: list[str] = []
    memory.subscribe(lambda e: events.append(e["type"]))
    result_ = await memory.acompact()
    assert result_ is not None and "12 answered" in result_["summary"]
    assert events[0] == "compaction_start" and events[-1] == "compaction_end"
    context = memory.context()
    assert "12 answered" in texts(context)[0] and texts(context)[-1] == "answer 11"
    assert not memory.should_compact()
    # Every message is still in the file: one compaction entry was added, nothing removed.
    assert memory.manager.entry_count() == raw_before + 1
    (summary_request,) = server.requests
    assert "question 0" in json.dumps(summary_request.body)


async def test_failing_summary_model_falls_back_and_is_never_stuck(server: ScriptedModelServer,
                                                                  tmp_path: Path) -> None:
    memory = make(server, tmp_path, window=16_000,
                  settings={"compaction": {"reserveTokens": 4_000, "keepRecentTokens": 3_000}, **FAST_RETRY})
    _fill(memory, 12)
    server.expect(*[server_error(503)] * 12)  # both attempts (and their retries, chunks) fail
    result_ = await memory.acompact()
    assert result_ is not None and result_["details"]["fallback"]["attempts"] == 2
    assert len(server.requests) >= 4 and not server.unexpected
    server.reset()  # the error replies left over
    assert not memory.should_compact()
    assert texts(memory.context())[-1] == "answer 11"


async def test_nothing_to_compact_returns_none_and_keeps_the_session(server: ScriptedModelServer,
                                                                    tmp_path: Path) -> None:
    memory = make(server, tmp_path)
    memory.append([user("a"), assistant("b")])
    before = memory.manager.entry_count()
    assert await memory.acompact(reason="manual") is None
    assert memory.last_error and "\n" not in memory.last_error
    assert memory.manager.entry_count() == before


def test_pop_and_clear_branch_and_survive_a_reopen(server: ScriptedModelServer, tmp_path: Path) -> None:
    memory = make(server, tmp_path)
    memory.append([user("a"), assistant("b"), user("c")])
    entries_before = memory.manager.entry_count()
    popped = memory.pop()
    assert popped is not None and texts([popped]) == ["c"]
    assert texts(memory.context()) == ["a", "b"]
    reopened = make(server, tmp_path, memory.session_id)
    assert texts(reopened.context()) == ["a", "b"]
    assert reopened.manager.entry_count() == entries_before + 1  # the pop marker; nothing deleted
    assert reopened.manager.get_leaf_entry()["customType"] == POP_ENTRY  # type: ignore[index]
    reopened.append([user("d"), assistant("e")])
    assert texts(reopened.context()) == ["a", "b", "d", "e"]
    reopened.clear()
    assert reopened.context() == []
    again = make(server, tmp_path, memory.session_id)
    assert again.context() == []
    messages = [e["message"] for e in again.manager.get_entries() if e["type"] == "message"]
    assert texts(messages) == ["a", "b", "c", "d", "e"]  # every message is still in the file
    assert any(e.get("customType") == CLEAR_ENTRY for e in again.manager.get_entries())
    again.append([user("f"), assistant("g")])
    assert texts(again.context()) == ["f", "g"]
    assert again.pop() is not None and again.pop() is not None and again.pop() is None


def test_written_session_opens_in_the_plain_session_manager(server: ScriptedModelServer, tmp_path: Path) -> None:
    memory = make(server, tmp_path)
    memory.append([user("a"), call("c1"), result("c1", "r"), assistant("b")])
    path = memory.manager.get_session_file()
    assert path is not None and Path(path).exists()
    plain = SessionManager.open(path)
    assert plain.get_session_id() == memory.session_id
    assert texts(plain.build_session_projection().messages) == ["a", "lookup", "r", "b"]


def test_any_store_by_url_and_repository(server: ScriptedModelServer, tmp_path: Path) -> None:
    from picontext.session.repository import open_repository

    first = ConversationMemory(model=server.model(), store="memory:i21-shared", cwd=str(tmp_path))
    first.append([user("kept in memory"), assistant("yes")])
    again = ConversationMemory(first.session_id, model=server.model(), store="memory:i21-shared", cwd=str(tmp_path))
    assert texts(again.context()) == ["kept in memory", "yes"]
    repository = open_repository(str(tmp_path / "repo"))
    mine = ConversationMemory(model=server.model(), store=repository, cwd=str(tmp_path))
    mine.append([user("q"), assistant("a")])
    mine.close()  # the caller's repository stays open
    assert texts(ConversationMemory(mine.session_id[:8], model=server.model(), store=repository,
                                    cwd=str(tmp_path)).context()) == ["q", "a"]  # a unique id prefix


def test_unreachable_database_raises_at_construction(server: ScriptedModelServer, tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable) as info:
        ConversationMemory(model=server.model(), store="postgresql://nobody@127.0.0.1:1/none", cwd=str(tmp_path))
    assert "\n" not in str(info.value)
    with pytest.raises(StoreUnavailable):
        ConversationMemory(model=server.model(), store="ftp://example.com/x", cwd=str(tmp_path))


def test_a_system_message_is_stored_and_replayed(server: ScriptedModelServer, tmp_path: Path) -> None:
    memory = make(server, tmp_path)
    memory.append([{"role": "system", "content": "", "sections": {"system_prompt": "be brief"}}, user("hi")])
    assert memory.messages()[0]["sections"] == {"system_prompt": "be brief"}
    assert memory.context()[0]["role"] == "system"
    with pytest.raises(ValueError, match="sections"):
        memory.append([{"role": "system", "content": "", "sections": ["x"]}])


@pytest.mark.parametrize("prices", [(0.0, 0.0, 0.0, 0.0), (3.0, 15.0, 0.3, 3.75)])
def test_a_stored_reply_is_held_as_its_line_in_the_file(server: ScriptedModelServer, tmp_path: Path,
                                                        prices: tuple[float, float, float, float]) -> None:
    """A cost of 0 (a free or local model, no cache use) is the integer JSON.stringify writes for
    0.0: the entry the session holds serializes to the very line in the file, without the exact
    number encoder that a float 0.0 would send it through."""
    import orjson

    model = server.model(cost=prices)
    memory = ConversationMemory(model=model, store=str(tmp_path / "store"), cwd=str(tmp_path))
    ids = memory.append([user("hi"), assistant("hello")], usage={"input": 1000, "output": 100})
    path = memory.manager.get_session_file()
    assert path is not None
    lines = {json.loads(line)["id"]: line for line in Path(path).read_bytes().splitlines()[1:]}
    entry = memory.manager.get_entry(ids[1])
    assert orjson.dumps(entry) == lines[ids[1]]
    cost = entry["message"]["usage"]["cost"]  # type: ignore[index]
    assert all(type(value) is int for key, value in cost.items() if key in ("cacheRead", "cacheWrite"))


async def test_built_inside_an_event_loop_it_does_not_wait_for_a_session_another_process_holds(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    """Reopened with another model, the memory records a model_change; while another process
    holds the session's lock it is not waited for (the old way stalled the loop, then raised
    after the 30 s lock timeout): the entry goes in first at the memory's next write."""
    import fcntl
    import os

    memory = make(server, tmp_path)
    memory.append([user("hello"), assistant("hi")])
    path = memory.manager.get_session_file()
    assert path is not None
    fd = os.open(path, os.O_RDWR | os.O_APPEND)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        other = ConversationMemory(memory.session_id, model=server.model(id="another-model"),
                                   store=str(tmp_path / "store"), cwd=str(tmp_path))
        assert other.manager.pending_writes() == 1
    finally:
        os.close(fd)
    ids = other.append([user("again")])
    entries = SessionManager.open(path).get_entries()
    assert [e["type"] for e in entries[-2:]] == ["model_change", "message"]
    assert entries[-2]["modelId"] == "another-model" and entries[-1]["id"] == ids[0]
