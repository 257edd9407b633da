"""SWE-agent trajectories (`<instance>.traj`: one JSON object) as Pi sessions.

A trajectory holds `history` (every message the model was shown, demonstrations included),
`trajectory` (one step per action: thought, action, observation, state, execution time, the raw
response) and `info` (exit status, submission, model statistics). The Pi session is built from
the history, the steps filling in what the history does not say:

* the system prompt is a `system` message; the first non-demonstration user message is the task;
* each step is one assistant message: its thought as text, its action as a tool call. Classic
  trajectories (actions parsed from text) call a `bash` tool with the action as `command`, which
  is what SWE-agent ran; function-calling trajectories keep their own tool calls (names, ids and
  arguments);
* each observation, as the model was shown it, is the tool result; the step's state, execution
  time, extra info and raw response (when it is more than the thought) are its `details`;
* demonstrations (`is_demo`) are not part of the conversation: they are kept as `custom` entries
  (`swe-agent.demonstration`), and `info` as a last `custom` entry (`swe-agent.info`).

Trajectories carry no times: every entry gets the file's modification time. docs/import.md
lists what is not kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid as uuid_module
from dataclasses import dataclass, field
from typing import Any

from picontext._clock import iso_from_ms
from picontext.session.convert import content_text
from picontext.session.importers.output import ImportBatch, ImportFailed, SessionSink, custom_entry, session_header

__all__ = ["import_swe_agent", "looks_like_swe_agent"]

SUPPORTED_MAJORS = frozenset({"0", "1"})
_NAMESPACE = uuid_module.UUID("4b1e7c52-9d0e-4c61-a0a5-2f8a1f3a9e10")  # picontext's SWE-agent import ids


def looks_like_swe_agent(value: Any) -> bool:
    return isinstance(value, dict) and (isinstance(value.get("history"), list)
                                        or isinstance(value.get("trajectory"), list))




def _zero_usage() -> dict[str, Any]:
    return {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return {"arguments": raw}  # not JSON: kept as the model wrote it
        return parsed if isinstance(parsed, dict) else {"arguments": parsed}
    return {}


@dataclass(slots=True)
class _Builder:
    sink: SessionSink
    timestamp: str
    ms: int
    model: str
    count: int = 0
    tail: str | None = None

    def _id(self) -> str:
        self.count += 1
        return f"s{self.count:04d}"

    def add(self, entry: dict[str, Any]) -> str:
        entry["id"] = entry.get("id") or self._id()
        self.sink.add(entry)
        self.tail = entry["id"]
        return str(entry["id"])

    def message(self, message: dict[str, Any]) -> str:
        return self.add({"type": "message", "id": self._id(), "parentId": self.tail, "timestamp": self.timestamp,
                         "message": message})

    def custom(self, custom_type: str, data: Any) -> str:
        return self.add(custom_entry(self._id(), self.tail, self.timestamp, custom_type, data))


@dataclass(slots=True)
class _Step:
    calls: list[dict[str, Any]]
    details: dict[str, Any]
    answered: set[str] = field(default_factory=set)


def _cwd(steps: list[Any]) -> str:
    for step in steps:
        state = step.get("state") if isinstance(step, dict) else None
        if isinstance(state, str):
            try:
                state = json.loads(state)
            except ValueError:
                state = None
        if isinstance(state, dict) and isinstance(state.get("working_dir"), str) and state["working_dir"]:
            return state["working_dir"]
    return "/"


def _model_name(data: dict[str, Any]) -> str:
    config = data.get("replay_config")
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            config = None
    agent = config.get("agent") if isinstance(config, dict) else None
    model = agent.get("model") if isinstance(agent, dict) else None
    name = model.get("name") if isinstance(model, dict) else None
    return name if isinstance(name, str) and name else "unknown"


def _step_details(step: Any, thought: str) -> dict[str, Any]:
    if not isinstance(step, dict):
        return {}
    details: dict[str, Any] = {}
    for key, name in (("state", "state"), ("execution_time", "executionTime"), ("extra_info", "extraInfo")):
        if step.get(key) not in (None, {}, ""):
            details[name] = step[key]
    response = step.get("response")
    if isinstance(response, str) and response.strip() != thought.strip():
        details["response"] = response
    return details


def _load(source: str) -> tuple[dict[str, Any], bytes]:
    try:
        with open(source, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise ImportFailed(source, f"cannot read: {exc.strerror}") from None
    if not raw.strip():
        raise ImportFailed(source, "empty file (nothing to import)")
    try:
        data = json.loads(raw)
    except UnicodeDecodeError:
        raise ImportFailed(source, "not UTF-8 text (not a SWE-agent trajectory)") from None
    except json.JSONDecodeError as exc:
        why = "truncated (the JSON ends early)" if exc.pos >= len(raw.rstrip()) else f"not valid JSON ({exc.msg})"
        raise ImportFailed(source, why, exc.lineno) from None
    if not looks_like_swe_agent(data):
        raise ImportFailed(source, "not a SWE-agent trajectory (no \"history\" or \"trajectory\" list)", 1)
    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    version = info.get("swe_agent_version")
    if version is not None and (not isinstance(version, str) or version.split(".", 1)[0] not in SUPPORTED_MAJORS):
        raise ImportFailed(source, f"SWE-agent version {version} is not supported (this importer reads 0.x and "
                                   "1.x trajectories)")
    return data, raw


def import_swe_agent(source: str, batch: ImportBatch) -> list[SessionSink]:
    """Read `source` into `batch`; the session is written when the batch commits."""
    data, raw = _load(source)
    history = [m for m in data.get("history") or [] if isinstance(m, dict)]
    steps = [s for s in data.get("trajectory") or [] if isinstance(s, dict)]
    for index, item in enumerate(history):
        if not isinstance(item.get("role"), str):
            raise ImportFailed(source, f"history[{index}] has no role (not a SWE-agent trajectory)")
    ms = int(os.stat(source).st_mtime * 1000)
    timestamp = iso_from_ms(ms)
    session_id = str(uuid_module.uuid5(_NAMESPACE, hashlib.sha256(raw).hexdigest()))
    sink = batch.open(session_header(session_id, timestamp, _cwd(steps)), source)
    out = _Builder(sink, timestamp, ms, _model_name(data))
    out.add(custom_entry("import", None, timestamp, "picontext.import", {
        "format": "swe-agent", "source": source, "environment": data.get("environment"),
        "replayConfig": data.get("replay_config")}))
    out.tail = "import"
    if not history:  # a trajectory without history: the steps alone
        history = _history_from_steps(steps)
    _convert(out, history, steps)
    if isinstance(data.get("info"), dict):
        out.custom("swe-agent.info", data["info"])
    return [sink]


def _history_from_steps(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    for step in steps:
        history.append({"role": "assistant", "content": step.get("response") or step.get("thought") or "",
                        "thought": step.get("thought") or "", "action": step.get("action") or ""})
        history.append({"role": "user", "content": step.get("observation") or ""})
    return history


def _convert(out: _Builder, history: list[dict[str, Any]], steps: list[dict[str, Any]]) -> None:
    step_index = 0
    open_step: _Step | None = None
    for item in history:
        role, content = item["role"], item.get("content")
        if item.get("is_demo"):
            out.custom("swe-agent.demonstration", {k: v for k, v in item.items() if k != "is_demo"})
            continue
        if role == "system":
            out.message({"role": "system", "content": content_text(content, ""), "timestamp": out.ms})
        elif role == "assistant":
            step = steps[step_index] if step_index < len(steps) else None
            step_index += 1
            open_step = _assistant(out, item, step, step_index)
        elif role == "tool" or (role == "user" and open_step is not None and not open_step.answered
                                and open_step.calls):
            ids: list[Any] = item["tool_call_ids"] if isinstance(item.get("tool_call_ids"), list) else []
            _result(out, open_step, content, [str(i) for i in ids])
        else:
            open_step = None
            out.message({"role": "user", "content": content_text(content, ""), "timestamp": out.ms})
    if open_step is not None and not open_step.answered and open_step.calls and step_index - 1 < len(steps):
        # The last action (usually `submit`) has no next prompt: its observation is in the step.
        last = steps[step_index - 1]
        if isinstance(last.get("observation"), str):
            _result(out, open_step, last["observation"], [])


def _assistant(out: _Builder, item: dict[str, Any], step: dict[str, Any] | None, number: int) -> _Step:
    thought = item["thought"] if isinstance(item.get("thought"), str) else content_text(item.get("content"), "")
    content: list[dict[str, Any]] = []
    for block in item.get("thinking_blocks") or []:
        if isinstance(block, dict) and isinstance(block.get("thinking"), str):
            content.append({"type": "thinking", "thinking": block["thinking"],
                            **({"thinkingSignature": block["signature"]} if isinstance(block.get("signature"), str)
                               else {})})
    if thought:
        content.append({"type": "text", "text": thought})
    calls: list[dict[str, Any]] = []
    tool_calls = item.get("tool_calls")
    if isinstance(tool_calls, list) and tool_calls:
        for index, call in enumerate(tool_calls):
            function = call.get("function") if isinstance(call, dict) else None
            function = function if isinstance(function, dict) else {}
            call_id = call.get("id") if isinstance(call, dict) and isinstance(call.get("id"), str) else \
                f"swe-{number}-{index}"
            calls.append({"type": "toolCall", "id": call_id, "name": str(function.get("name") or "tool"),
                          "arguments": _arguments(function.get("arguments"))})
    else:
        action = item.get("action")
        if not isinstance(action, str) and step is not None:
            action = step.get("action")
        if isinstance(action, str) and action.strip():
            calls.append({"type": "toolCall", "id": f"swe-{number}", "name": "bash",
                          "arguments": {"command": action.rstrip("\n")}})
    content += calls
    if item.get("agent") not in (None, "main", "primary"):
        content.insert(0, {"type": "text", "text": f"[agent {item['agent']}]"})
    out.message({"role": "assistant", "content": content, "api": "swe-agent", "provider": "swe-agent",
                 "model": out.model, "usage": _zero_usage(), "stopReason": "toolUse" if calls else "stop",
                 "timestamp": out.ms})
    same_step = step is not None and (not calls or calls[0]["name"] != "bash"
                                      or str(step.get("action") or "").rstrip("\n") == calls[0]["arguments"]["command"])
    return _Step(calls, _step_details(step, thought) if same_step else {})


def _result(out: _Builder, step: _Step | None, content: Any, ids: list[str]) -> None:
    assert step is not None
    pending = [c for c in step.calls if c["id"] not in step.answered]
    targets = [c for c in step.calls if c["id"] in ids] or pending[:1] or step.calls[:1]
    text = content_text(content, "")
    for index, call in enumerate(targets):
        message: dict[str, Any] = {"role": "toolResult", "toolCallId": call["id"], "toolName": call["name"],
                                   "content": [{"type": "text", "text": text if index == 0 else ""}]}
        if step.details and not step.answered:
            message["details"] = step.details
        message.update(isError=False, timestamp=out.ms)
        out.message(message)
        step.answered.add(call["id"])

