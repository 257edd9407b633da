"""`picontext rpc` refuses commands with wrong field types, answers each of them, and never
stores an invalid message (a stored non-string broke every later prompt, in every process)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from picontext.scripted import ScriptedModelServer, reply, text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cli"))
from test_cli_rpc import Rpc, configure

BAD_COMMANDS: list[dict[str, Any]] = [
    {"type": "steer", "message": 5},
    {"type": "follow_up", "message": {"text": "x"}},
    {"type": "steer"},
    {"type": "prompt", "message": ["a"]},
    {"type": "prompt", "message": "x", "images": [{"type": "image", "data": 1, "mimeType": "image/png"}]},
    {"type": "prompt", "message": "x", "streamingBehavior": 3},
    {"type": "set_model", "model": 5},
    {"type": "set_model", "provider": ["scripted"], "modelId": "m1"},
    {"type": "set_model"},
    {"type": "set_thinking_level", "level": ["high"]},
    {"type": "set_auto_compaction", "enabled": "no"},
    {"type": "navigate_tree", "targetId": {"id": 1}},
    {"type": "fork", "entryId": 7},
    {"type": "set_session_name", "name": 1},
    {"type": "compact", "customInstructions": 2},
    {"type": "get_entries", "since": []},
]


@pytest.fixture
def home() -> Path:
    import os

    return Path(os.environ["PICONTEXT_DIR"])


def test_invalid_fields_get_an_error_response_and_are_never_stored(server: ScriptedModelServer, home: Path,
                                                                   tmp_path: Path) -> None:
    configure(home, server.url + "/v1")
    server.expect(reply(text("fine")))
    session = tmp_path / "s.jsonl"
    rpc = Rpc(home, tmp_path, "--model", "scripted/m1", "--session", str(session))
    for n, command in enumerate(BAD_COMMANDS):
        rpc.send(id=n, **command)
        response = rpc.response(n)
        assert response["success"] is False, (command, response)
        assert response["command"] == command["type"] and response["error"]
    rpc.send(id="ok", type="prompt", message="hi")
    assert rpc.response("ok")["success"] is True
    rpc.until(lambda x: x["type"] == "agent_settled")
    rpc.send(id="state", type="get_state")
    state = rpc.response("state")["data"]
    assert state["thinkingLevel"] != ["high"] and state["model"]["id"] == "m1"
    assert rpc.close() == 0
    users = [json.loads(line)["message"] for line in session.read_text().splitlines()
             if json.loads(line).get("type") == "message" and json.loads(line)["message"]["role"] == "user"]
    assert [[block["text"] for block in m["content"]] for m in users] == [["hi"]]
