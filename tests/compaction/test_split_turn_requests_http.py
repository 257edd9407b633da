"""A split turn's two summaries over real HTTP: at once, unless the model's compat says the server
takes one request at a time (`compat.serialRequests`); where the server runs does not matter."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from compaction_fixtures import Prep, assistant, user

from picontext.compaction import prompts
from picontext.compaction.completion import StreamCompletion
from picontext.compaction.summarize import summarize_preparation
from picontext.testing import ScriptedModelServer, text
from picontext.testing.model_server import RecordedRequest


def _is_prefix(req: RecordedRequest) -> bool:
    return "Turn Context" not in json.dumps(req.body) and "first part of a single turn" in json.dumps(req.body)


def _model(server: ScriptedModelServer, compat: dict[str, Any] | None) -> Any:
    model = dict(server.model("openai-completions", context_window=100_000, max_tokens=4096))
    if compat is not None:
        model["compat"] = compat
    return model


def _prep() -> Prep:
    return Prep([user("old request"), assistant("old answer")], [user("the long turn")], True)


async def test_history_and_turn_prefix_are_requested_at_once_from_a_server_on_this_machine(
        server: ScriptedModelServer) -> None:
    """The history summary is held until the prefix request has arrived: only two requests in
    flight together can finish. The server is on 127.0.0.1 and its model has no serialRequests."""
    release = threading.Event()
    server.expect(text("HISTORY").when(lambda r: not _is_prefix(r)).hold_after(1, release),
                  text("PREFIX").when(_is_prefix))
    completion = StreamCompletion(_model(server, None), api_key="k")
    assert not completion.one_at_a_time
    job = asyncio.ensure_future(summarize_preparation(_prep(), completion, reserve_tokens=2000, verify=False))
    try:
        await asyncio.to_thread(server.wait_for_requests, 2, 30)  # both in flight: the first is still held
    finally:
        release.set()
    result = await job
    assert result.summary.startswith("HISTORY" + prompts.SPLIT_TURN_SEPARATOR + "PREFIX")
    first, second = server.requests
    end = server.answered_at(first)
    assert end is not None and second.received < end


async def test_a_serial_server_gets_the_history_summary_then_the_prefix(server: ScriptedModelServer) -> None:
    server.expect(text("HISTORY is written slowly word by word").slow(0.02).when(lambda r: not _is_prefix(r)),
                  text("PREFIX").when(_is_prefix))
    completion = StreamCompletion(_model(server, {"serialRequests": True}), api_key="k")
    assert completion.one_at_a_time
    result = await summarize_preparation(_prep(), completion, reserve_tokens=2000, verify=False)
    assert result.summary.startswith("HISTORY is written slowly word by word" + prompts.SPLIT_TURN_SEPARATOR)
    history, prefix = server.requests
    assert not _is_prefix(history) and _is_prefix(prefix)  # Pi's order
    end = server.answered_at(history)
    assert end is not None and prefix.received >= end  # never both at once
