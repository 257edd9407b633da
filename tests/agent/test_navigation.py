"""navigate_tree with an optional branch summary (spec 03 §8, scenario S9)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import file_entries, make

from picontext.agent.hooks import Hooks
from picontext.agent.session import SessionBusyError
from picontext.scripted import ScriptedModelServer, text


def user_entry(session: Any, wording: str) -> dict[str, Any]:
    return next(
        e for e in session.manager.get_entries()
        if e["type"] == "message" and e["message"]["role"] == "user"
        and e["message"]["content"][0]["text"] == wording
    )


async def test_s9_navigate_with_summary(server: ScriptedModelServer, tmp_path: Path) -> None:
    seen: list[str] = []
    hooks = Hooks()
    hooks.on("session_before_tree", lambda e: seen.append("before") or None)
    hooks.on("session_tree", lambda e: seen.append(f"tree:{e['fromExtension']}"))
    session, events = make(server, tmp_path, hooks=hooks)
    server.expect(text("A1"), text("B1"))
    await session.prompt("branch A question")
    await session.prompt("branch B question")
    target = user_entry(session, "branch B question")
    events.clear()
    server.expect(text("We asked question B and got B1."))
    result = await session.navigate_tree(target["id"], summarize=True, label="left B")
    assert result.cancelled is False and result.editor_text == "branch B question"
    entry = result.summary_entry
    assert entry is not None and entry["type"] == "branch_summary" and entry["parentId"] == target["parentId"]
    assert "We asked question B" in entry["summary"]
    assert seen == ["before", "tree:False"]
    assert session.manager.get_label(entry["id"]) == "left B"
    assert events == []  # no public event announces a navigation
    roles = [m["role"] for m in session.messages]
    assert roles == ["system", "user", "assistant", "branchSummary"]
    server.expect(text("C1"))
    await session.prompt("branch C question")
    assert "We asked question B" in str(server.requests[-1].body)
    assert file_entries(session)[-1]["message"]["content"][0]["text"] == "C1"


async def test_navigate_without_summary_and_to_the_current_leaf(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, _ = make(server, tmp_path)
    server.expect(text("A1"), text("B1"))
    await session.prompt("one")
    await session.prompt("two")
    leaf = session.manager.get_leaf_id()
    assert (await session.navigate_tree(leaf)).cancelled is False  # nothing happens
    result = await session.navigate_tree(user_entry(session, "two")["id"])
    assert result.summary_entry is None and result.editor_text == "two"
    assert [m["role"] for m in session.messages] == ["system", "user", "assistant"]
    with pytest.raises(Exception, match="not found"):
        await session.navigate_tree("nope")


async def test_hook_cancels_or_supplies_the_summary(server: ScriptedModelServer, tmp_path: Path) -> None:
    answer: dict[str, Any] = {"cancel": True}
    hooks = Hooks()
    hooks.on("session_before_tree", lambda e: answer)
    session, _ = make(server, tmp_path, hooks=hooks)
    server.expect(text("A1"), text("B1"))
    await session.prompt("one")
    await session.prompt("two")
    leaf = session.manager.get_leaf_id()
    target = user_entry(session, "two")["id"]
    assert (await session.navigate_tree(target, summarize=True)).cancelled is True
    assert session.manager.get_leaf_id() == leaf and not session.is_compacting
    answer.clear()
    answer["summary"] = {"summary": "hook summary"}
    result = await session.navigate_tree(target, summarize=True)
    assert result.summary_entry is not None and result.summary_entry["summary"] == "hook summary"
    assert result.summary_entry["fromHook"] is True


async def test_navigation_refused_while_streaming(server: ScriptedModelServer, tmp_path: Path) -> None:
    release = threading.Event()
    session, _ = make(server, tmp_path)
    server.expect(text("A1"), text("slow words here").hold_after(1, release))
    await session.prompt("one")
    target = user_entry(session, "one")["id"]
    started = asyncio.Event()
    session.subscribe(
        lambda e: started.set() if e["type"] == "message_start" and e["message"]["role"] == "assistant" else None
    )
    run = asyncio.ensure_future(session.prompt("two"))
    await started.wait()
    try:
        with pytest.raises(SessionBusyError, match="Wait for the current response to finish"):
            await session.navigate_tree(target)
    finally:
        release.set()
    await run
