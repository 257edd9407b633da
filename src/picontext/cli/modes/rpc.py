"""`picontext rpc`: drive an agent session with JSON lines (spec 03 §9).

Each stdin line is a command `{"type": "<command>", "id"?: ..., ...payload}`; stdout carries the
session's events (the same lines as `picontext -p --mode json`) and one response per command:

    {"id": 7, "type": "response", "command": "compact", "success": true, "data": {...}}
    {"type": "response", "command": "prompt", "success": false, "error": "..."}

Commands run concurrently (an `abort` can interrupt a running `compact`), in the order read.
`prompt` answers as soon as the prompt is accepted (or queued with `streamingBehavior`), before
the reply streams. When stdin ends, the running work is awaited and the process exits 0.

Commands: prompt, steer, follow_up, abort, compact, get_state, get_messages, get_entries,
get_tree, get_session_stats, set_model, set_thinking_level, set_auto_compaction,
navigate_tree (picontext's addition), fork, set_session_name.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from picontext._json import dumps_line
from picontext.agent._validate import validate_arguments
from picontext.agent.events import to_json_event
from picontext.cli.base import THINKING_CHOICES, CliError
from picontext.cli.modes.common import Controller, build_session
from picontext.errors import PicontextError


def _optional(kind: str, **extra: Any) -> dict[str, Any]:
    return {"type": [kind, "null"], **extra}  # JSON null is the same as leaving the field out


_IMAGES = {"type": ["array", "null"], "items": {
    "type": "object", "required": ["type", "data", "mimeType"],
    "properties": {"type": {"enum": ["image"]}, "data": {"type": "string"}, "mimeType": {"type": "string"}}}}
_MESSAGE = {"required": ["message"], "properties": {"message": {"type": "string"}, "images": _IMAGES}}
# Every command's fields, checked before the command runs: a wrong type is a failed response,
# never a message in the session file (a stored non-string breaks every later prompt).
COMMAND_SCHEMAS: dict[str, dict[str, Any]] = {
    "prompt": {"required": ["message"], "properties": {
        "message": {"type": "string"}, "images": _IMAGES,
        "streamingBehavior": {"enum": ["steer", "followUp", None]}}},
    "steer": _MESSAGE,
    "follow_up": _MESSAGE,
    "abort": {},
    "compact": {"properties": {"customInstructions": _optional("string")}},
    "get_state": {},
    "get_messages": {},
    "get_entries": {"properties": {"since": _optional("string")}},
    "get_tree": {},
    "get_session_stats": {},
    "set_model": {"properties": {"model": _optional("string"), "provider": _optional("string"),
                                 "modelId": _optional("string")}},
    "set_thinking_level": {"required": ["level"], "properties": {"level": {"enum": list(THINKING_CHOICES)}}},
    "set_auto_compaction": {"required": ["enabled"], "properties": {"enabled": {"type": "boolean"}}},
    "navigate_tree": {"required": ["targetId"], "properties": {
        "targetId": {"type": "string"}, "summarize": _optional("boolean"),
        "customInstructions": _optional("string"), "label": _optional("string")}},
    "fork": {"properties": {"entryId": _optional("string")}},
    "set_session_name": {"required": ["name"], "properties": {"name": {"type": "string"}}},
}


def validate_command(command: dict[str, Any]) -> str | None:
    """The first problem with `command`'s fields as one line, or None."""
    schema = COMMAND_SCHEMAS.get(command["type"])
    if schema is None:
        return f"Unknown command: {command['type']}"
    problem = validate_arguments({"type": "object", **schema}, command, "")
    if problem:
        return problem.replace("missing required argument", "missing field")
    if command["type"] == "set_model" and not command.get("model") and not (
            command.get("provider") and command.get("modelId")):
        return 'set_model needs "model" ("provider/id") or "provider" and "modelId"'
    return None


def cmd_rpc(args: argparse.Namespace) -> int:
    if getattr(args, "resume", False):
        raise CliError("--resume needs a terminal; in RPC mode use --session FILE or -c")
    session, catalog = build_session(args, os.getcwd())
    server = RpcServer(Controller(session, catalog))
    asyncio.run(server.serve())
    return 0


def _write(obj: dict[str, Any]) -> None:
    sys.stdout.buffer.write(dumps_line(obj))
    sys.stdout.flush()


def _lines_from_stdin(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[bytes | None]) -> None:
    """A daemon thread: stdin lines into the queue, None at the end (works for pipes, ttys, files)."""
    try:
        for line in sys.stdin.buffer:
            loop.call_soon_threadsafe(queue.put_nowait, line)
    finally:
        loop.call_soon_threadsafe(queue.put_nowait, None)


def _tree_json(nodes: list[Any]) -> list[dict[str, Any]]:
    out = []
    for node in nodes:
        item: dict[str, Any] = {"entry": node.entry, "children": _tree_json(node.children)}
        if node.label is not None:
            item["label"] = node.label
        out.append(item)
    return out


class RpcServer:
    def __init__(self, controller: Controller, write: Callable[[dict[str, Any]], None] = _write) -> None:
        self.c = controller
        self.write = write
        self._run: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        controller.subscribe(lambda event: self.write(to_json_event(event)))  # type: ignore[arg-type]
        self.handlers: dict[str, Callable[[dict[str, Any]], Awaitable[Any]]] = {
            "prompt": self.prompt, "steer": self.steer, "follow_up": self.follow_up, "abort": self.abort,
            "compact": self.compact, "get_state": self.get_state, "get_messages": self.get_messages,
            "get_entries": self.get_entries, "get_tree": self.get_tree, "get_session_stats": self.get_session_stats,
            "set_model": self.set_model, "set_thinking_level": self.set_thinking_level,
            "set_auto_compaction": self.set_auto_compaction, "navigate_tree": self.navigate_tree,
            "fork": self.fork, "set_session_name": self.set_session_name,
        }

    @property
    def streaming(self) -> bool:
        return self.c.session.is_streaming or (self._run is not None and not self._run.done())

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        threading.Thread(target=_lines_from_stdin, args=(loop, queue), daemon=True).start()
        while (line := await queue.get()) is not None:
            if line.strip():
                task = asyncio.create_task(self.handle_line(line))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                await asyncio.sleep(0)  # let it start before the next line: commands begin in order
        while self._tasks or (self._run is not None and not self._run.done()):
            await asyncio.gather(*self._tasks, *([self._run] if self._run else []), return_exceptions=True)

    async def handle_line(self, line: bytes) -> None:
        try:
            command = orjson.loads(line)
            if not isinstance(command, dict) or not isinstance(command.get("type"), str):
                raise ValueError('a command is a JSON object with a "type"')
        except ValueError as exc:
            self.write({"type": "response", "command": "parse", "success": False, "error": f"Invalid command: {exc}"})
            return
        await self.handle(command)

    async def handle(self, command: dict[str, Any]) -> None:
        name = command["type"]
        response: dict[str, Any] = {"type": "response", "command": name}
        if "id" in command:
            response = {"id": command["id"], **response}
        handler = self.handlers.get(name)
        try:
            problem = validate_command(command)
            if handler is None or problem:
                raise CliError(problem or f"Unknown command: {name}")
            data = await handler(command)
        except (CliError, PicontextError, ValueError, KeyError, TypeError, RuntimeError) as exc:
            message = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            self.write({**response, "success": False, "error": message})
            return
        except Exception as exc:  # every command gets a response, whatever went wrong
            self.write({**response, "success": False, "error": f"{type(exc).__name__}: {exc}"})
            return
        self.write({**response, "success": True, **({"data": data} if data is not None else {})})

    # -- commands -------------------------------------------------------------------------------

    async def prompt(self, command: dict[str, Any]) -> None:
        text = command["message"]
        if not isinstance(text, str):
            raise ValueError("message must be a string")
        behavior = command.get("streamingBehavior")
        if self.streaming:
            if behavior == "steer":
                return await self.c.session.steer(text)
            if behavior == "followUp":
                return await self.c.session.follow_up(text)
            raise CliError("Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') "
                           "to queue the message.")
        if self.c.is_compacting:
            raise CliError("Wait for the current compaction to finish before sending a prompt")
        self._run = asyncio.create_task(self._prompt(text, command.get("images") or ()))
        return None

    async def _prompt(self, text: str, images: Any) -> None:
        await asyncio.sleep(0)  # the response line goes out first
        try:
            await self.c.session.prompt(text, images=images)
        except Exception as exc:  # a failure after acceptance: reported as an error line, the server goes on
            self.write({"type": "error", "command": "prompt", "error": str(exc)})

    async def steer(self, command: dict[str, Any]) -> None:
        await self.c.session.steer(command["message"])

    async def follow_up(self, command: dict[str, Any]) -> None:
        await self.c.session.follow_up(command["message"])

    async def abort(self, command: dict[str, Any]) -> None:
        for name in ("abort_compaction", "abort_branch_summary"):
            method = getattr(self.c.session, name, None)
            if method is not None:
                method()
        await self.c.session.abort()
        if self._run is not None:
            await asyncio.gather(self._run, return_exceptions=True)

    async def compact(self, command: dict[str, Any]) -> Any:
        return await self.c.compact(command.get("customInstructions"))

    async def get_state(self, command: dict[str, Any]) -> Any:
        state = self.c.state()
        state["isStreaming"] = self.streaming
        return state

    async def get_messages(self, command: dict[str, Any]) -> Any:
        return {"messages": self.c.session.messages}

    async def get_entries(self, command: dict[str, Any]) -> Any:
        entries = self.c.manager.get_entries()
        since = command.get("since")
        if since is not None:
            ids = [e.get("id") if isinstance(e, dict) else None for e in entries]
            if since not in ids:
                raise CliError(f"Entry {since} not found")
            entries = entries[ids.index(since) + 1:]
        return {"entries": entries, "leafId": self.c.manager.get_leaf_id()}

    async def get_tree(self, command: dict[str, Any]) -> Any:
        return {"tree": _tree_json(self.c.manager.get_tree()), "leafId": self.c.manager.get_leaf_id()}

    async def get_session_stats(self, command: dict[str, Any]) -> Any:
        from picontext.cli.modes.interactive import session_info

        info = session_info(self.c)
        tokens, window, percent = self.c.context_usage()
        stats = {"sessionFile": info["file"], "sessionId": info["id"], "entries": info["entries"],
                 "messages": info["messages"], "compactions": info["compactions"], "tokens": info["tokens"],
                 "cost": info["cost"]}
        if window:
            stats["contextUsage"] = {"tokens": tokens, "contextWindow": window, "percent": percent}
        return stats

    async def set_model(self, command: dict[str, Any]) -> Any:
        ref = command.get("model") or f"{command['provider']}/{command['modelId']}"
        model = await self.c.set_model(ref)
        return {"provider": model["provider"], "id": model["id"], "contextWindow": model.get("contextWindow")}

    async def set_thinking_level(self, command: dict[str, Any]) -> None:
        await self.c.session.aset_thinking_level(command["level"])

    async def set_auto_compaction(self, command: dict[str, Any]) -> None:
        self.c.set_auto_compaction(command["enabled"])

    async def navigate_tree(self, command: dict[str, Any]) -> Any:
        if self.streaming:
            raise CliError("Wait for the current response to finish before navigating the session tree.")
        return await self.c.navigate_tree(command["targetId"], summarize=bool(command.get("summarize")),
                                          instructions=command.get("customInstructions"), label=command.get("label"))

    async def fork(self, command: dict[str, Any]) -> Any:
        if self.streaming:
            raise CliError("Wait for the current response to finish before forking")
        return {"sessionFile": self.c.fork(command.get("entryId"))}

    async def set_session_name(self, command: dict[str, Any]) -> None:
        name = command["name"]
        if not isinstance(name, str) or not name.strip():
            raise ValueError("name must be a non-empty string")
        await self.c.session.aset_session_name(name.strip())
