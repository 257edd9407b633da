"""Shared helpers for the agent runtime tests (real HTTP via ScriptedModelServer, real files)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from picontext.agent.session import AgentSession
from picontext.agent.types import AgentToolResult
from picontext.ai.providers import StreamOptions
from picontext.ai.retry import RetryPolicy
from picontext.compaction.settings import Settings
from picontext.session.manager import SessionManager
from picontext.testing import ScriptedModelServer


class BigTool:
    """`big{size}`: returns `size` characters of text (a large tool result)."""

    name: ClassVar[str] = "big"
    label: ClassVar[str] = "big"
    description: ClassVar[str] = "big output"
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {"size": {"type": "integer"}}}

    async def execute(self, call_id: str, args: dict[str, Any], signal: Any, on_update: Any) -> AgentToolResult:
        size = int(args.get("size") or 4000)
        return AgentToolResult.text(("lorem ipsum " * (size // 12 + 1))[:size])


def make(
    server: ScriptedModelServer,
    tmp_path: Path,
    *,
    api: str = "openai-completions",
    window: int = 200_000,
    max_tokens: int = 8192,
    compaction: dict[str, Any] | None = None,
    retry: RetryPolicy | None = None,
    manager: SessionManager | None = None,
    **kw: Any,
) -> tuple[AgentSession, list[dict[str, Any]]]:
    manager = manager or SessionManager.create(str(tmp_path), str(tmp_path / "sessions"))
    settings = Settings({"compaction": compaction}) if compaction else Settings()
    kw.setdefault("tools", [BigTool()])
    session = AgentSession(
        manager,
        model=server.model(api, context_window=window, max_tokens=max_tokens),  # type: ignore[arg-type]
        system_prompt="Test agent.",
        stream_options=StreamOptions(api_key="k"),
        settings=settings,
        retry=retry or RetryPolicy(base_delay_ms=1),
        **kw,
    )
    events: list[dict[str, Any]] = []
    session.subscribe(events.append)
    return session, events


def file_entries(session: AgentSession) -> list[dict[str, Any]]:
    path = session.manager.get_session_file()
    assert path is not None
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def kinds(entries: list[dict[str, Any]]) -> list[str]:
    return [e["message"]["role"] if e["type"] == "message" else e["type"] for e in entries]


def types(events: list[dict[str, Any]], *only: str) -> list[str]:
    return [e["type"] for e in events if not only or e["type"] in only]


def compact_types(events: list[dict[str, Any]]) -> list[str]:
    """Event types without streaming noise (message_update, tool updates)."""
    return [e["type"] for e in events if e["type"] not in ("message_update", "tool_execution_update")]


def request_roles(server: ScriptedModelServer, index: int) -> list[str]:
    return [m["role"] for m in server.requests[index].body["messages"]]


def request_text(server: ScriptedModelServer, index: int) -> str:
    return json.dumps(server.requests[index].body)


async def wait_for_requests(server: ScriptedModelServer, count: int, seconds: float = 10.0) -> None:
    """Wait until the server has received `count` requests (a held stream is in flight)."""
    import asyncio

    await asyncio.to_thread(server.wait_for_requests, count, seconds)
