"""What keeps an adapter's turn cheap on a long session: each turn converts only the messages it
has not converted before (docs/performance.md, the pydantic-ai and LangChain sections), and the
answer stays the one a whole conversion gives. Conversions are counted, never timed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydantic
import pytest

from picontext.integrations import langchain as lc_adapter
from picontext.integrations import pydantic_ai_messages
from picontext.integrations.langchain import PicontextMiddleware
from picontext.integrations.memory import ConversationMemory
from picontext.integrations.pydantic_ai_messages import ProjectionConverter
from picontext.session.projection import PrefixView

MODEL: dict[str, Any] = {
    "id": "m", "name": "m", "api": "openai-completions", "provider": "local", "baseUrl": "http://127.0.0.1:9/v1",
    "reasoning": False, "input": ["text"], "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
    "contextWindow": 1_000_000, "maxTokens": 1_000,
}


def turn(i: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"question {i}"},
            {"role": "assistant", "content": [{"type": "toolCall", "id": f"c{i}", "name": "look", "arguments": {}}]},
            {"role": "toolResult", "toolCallId": f"c{i}", "toolName": "look", "content": f"result {i}"},
            {"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}]}]


def seeded(tmp_path: Path, turns: int = 50) -> ConversationMemory:
    memory = ConversationMemory(model=MODEL, store=str(tmp_path / "store"), cwd=str(tmp_path), summarizer=object())  # type: ignore[arg-type]
    memory.append([m for i in range(turns) for m in turn(i)])
    return memory


def test_the_projection_view_is_compared_without_looking_at_its_items() -> None:
    class Untouchable(list[Any]):
        def __iter__(self) -> Any:
            raise AssertionError("items were walked")

    items = Untouchable([{}, {}, {}])
    assert PrefixView(items, 3).starts_with(PrefixView(items, 2))
    assert not PrefixView(items, 2).starts_with(PrefixView(items, 3))
    assert PrefixView(items, 3).head(1).starts_with(PrefixView(items, 1))


def test_pydantic_ai_turns_convert_only_the_new_messages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = seeded(tmp_path)
    converted: list[int] = []
    whole = pydantic_ai_messages.from_pi
    monkeypatch.setattr(pydantic_ai_messages, "from_pi", lambda messages: converted.append(len(messages))
                        or whole(messages))
    convert = ProjectionConverter()
    first = convert(memory.message_view())
    assert sum(converted) == 200
    dump = pydantic.TypeAdapter(list[Any]).dump_json
    for i in range(50, 60):
        converted.clear()
        memory.append(turn(i)[:1])  # the prompt, before the request
        request = convert(memory.message_view())
        assert sum(converted) <= 1 + 4  # the prompt, and at most the previous turn's reply
        assert dump(request) == dump(whole(memory.messages()))
        memory.append(turn(i)[1:])
    assert len(first) < len(request)


def test_langchain_turns_convert_only_the_new_messages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    middleware = PicontextMiddleware(model=MODEL, store=str(tmp_path / "store"), cwd=str(tmp_path),
                                     summarizer=object())  # type: ignore[arg-type]
    memory = middleware.memory
    memory.append([m for i in range(50) for m in turn(i)])
    converted: list[Any] = []
    whole = lc_adapter.to_langchain
    monkeypatch.setattr(lc_adapter, "to_langchain", lambda message: converted.append(message) or whole(message))
    first = middleware._langchain_context()
    assert len(converted) == 200
    for i in range(50, 60):
        converted.clear()
        memory.append(turn(i))
        context = middleware._langchain_context()
        assert [m["content"] if isinstance(m["content"], str) else m["content"][0].get("text", "call")
                for m in converted] == [f"question {i}", "call", f"result {i}", f"answer {i}"]
        assert [type(m).__name__ for m in context[-4:]] == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
        assert len(context) == len(first) + 4 * (i - 49)
    # A compaction makes a new projection: only its summary is new, the kept messages are not converted again.
    converted.clear()
    kept = memory.manager.get_branch()[-8]["id"]
    memory.manager.append_compaction("## Goal\nquestions", kept, 10_000)
    context = middleware._langchain_context()
    assert [m["role"] for m in converted] == ["compactionSummary"]
    assert len(context) == 1 + 8


def test_the_system_prompt_is_replayed_only_when_the_projection_changed(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from picontext.integrations import pydantic_ai as pa_adapter
    from picontext.integrations.pydantic_ai import PicontextHistory

    history = PicontextHistory(model=MODEL, store=str(tmp_path / "store"), cwd=str(tmp_path),
                               summarizer=object())  # type: ignore[arg-type]
    memory = history.memory
    memory.append([{"role": "system", "content": "", "sections": {"system_prompt": "Be brief."}},
                   *[m for i in range(20) for m in turn(i)]])
    replays: list[int] = []
    replay = pa_adapter.get_current_system_message
    monkeypatch.setattr(pa_adapter, "get_current_system_message", lambda messages: replays.append(1)
                        or replay(messages))
    assert history._stored_system_prompt() == "Be brief." and len(replays) == 1
    for i in range(20, 25):
        memory.append(turn(i))
        assert history._stored_system_prompt() == "Be brief."
    assert len(replays) == 1  # the projection only grew, by no system message
    memory.append([{"role": "system", "content": "", "sections": {"system_prompt": "Be thorough."}}])
    assert history._stored_system_prompt() == "Be thorough." and len(replays) == 2
    memory.clear()  # a new root: a projection of its own
    assert history._stored_system_prompt() is None and len(replays) == 3


def test_two_memories_on_one_session_lose_and_repeat_nothing(tmp_path: Path) -> None:
    """Each append is one batch under the store's lock; what another writer appended meanwhile is
    taken in first, and the file holds every message once."""
    import json

    first = ConversationMemory(model=MODEL, store=str(tmp_path / "store"), cwd=str(tmp_path), summarizer=object())  # type: ignore[arg-type]
    first.append(turn(0))
    second = ConversationMemory(first.session_id, model=MODEL, store=str(tmp_path / "store"), cwd=str(tmp_path),
                                summarizer=object())  # type: ignore[arg-type]
    for i in range(1, 6):
        (first if i % 2 else second).append(turn(i))
    path = first.manager.get_session_file()
    assert path is not None
    lines = [json.loads(line) for line in Path(path).read_text().splitlines()]
    texts = [e["message"]["content"] for e in lines if e.get("type") == "message" and e["message"]["role"] == "user"]
    assert texts == [f"question {i}" for i in range(6)]
    ids = [e["id"] for e in lines if "id" in e]
    assert len(ids) == len(set(ids))
    reopened = ConversationMemory(first.session_id, model=MODEL, store=str(tmp_path / "store"), cwd=str(tmp_path),
                                  summarizer=object())  # type: ignore[arg-type]
    assert len(reopened.manager.get_entries()) == len(lines) - 1
