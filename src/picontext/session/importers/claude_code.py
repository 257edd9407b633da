"""Claude Code transcripts (`~/.claude/projects/<dir>/<session>.jsonl`, versions 1.x and 2.x).

A Claude Code transcript is JSON lines with a `type`. The conversation lines (`user`,
`assistant`, `system`) carry `uuid` and `parentUuid`; they form a tree. This module reads the
file once, line by line, and writes one Pi v3 session (plus one per inline sidechain) as it goes:

* **Assistant messages.** Claude Code writes one line per content block of an API message (same
  `message.id`), and since 2.x tool results can arrive between the lines of one message (tools run
  while the reply streams). The lines of one message become one Pi assistant message; its tool
  results follow it. Only that message is held in memory until it is complete.
* **Tool results** come from `user` lines (`tool_result` blocks): one `toolResult` per block,
  `is_error` kept as `isError`, the structured `toolUseResult` kept as `details`.
* **Tree.** Entry ids are the Claude Code `uuid`s. Claude Code hangs parallel tool results and
  progress lines on the tool_use line they belong to; here every line that continues a message
  (its results, system and hook lines) is chained after the message's last entry, so the branch
  from the leaf holds all of them, while a real branch (a rewind) stays a branch. Lines whose
  parent is not in the file (a resumed session, a subagent's first line) follow the line before.
* **Usage** becomes Pi's usage (cache reads and writes, 1-hour cache writes), with the cost from
  the built-in catalog's prices when the model is in it.
* **Compactions.** A `compact_boundary` line followed by its `isCompactSummary` line becomes a
  Pi `compaction` entry that keeps nothing (Claude Code's compaction replaces everything), with
  the summary text and `tokensBefore` = `compactMetadata.preTokens`.
* **Meta lines** (`isMeta`: caveats, injected context) reached the model but were hidden from the
  user: they become `custom_message` entries with `display: false`. Other `system` lines become
  `custom` entries (`claude-code.system`); titles become `session_info` (`custom-title`, an
  `ai-title` while no custom title was set) or `custom` entries. Progress lines, file-history
  snapshots and queue operations are skipped. docs/import.md lists everything that is not kept.
* **Sidechains.** A subagent's transcript (`agent-*.jsonl`, every line `isSidechain`) is its own
  session, linked to the parent's by the header's `parentSession`; inline sidechain lines of
  1.x files become sessions of their own the same way.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid as uuid_module
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from picontext import _json
from picontext._clock import js_date_ms
from picontext.session import paths
from picontext.session.convert import content_text
from picontext.session.importers.output import ImportBatch, ImportFailed, SessionSink, custom_entry, session_header

__all__ = ["ClaudeCodeImport", "find_sidechains", "import_claude_code", "looks_like_claude_code", "read_first_line"]

SUPPORTED_MAJORS = frozenset({"1", "2"})
CONVERSATION = frozenset({"user", "assistant", "system"})
SKIPPED = frozenset({"progress", "file-history-snapshot", "queue-operation"})
TITLES = frozenset({"summary", "custom-title", "ai-title", "agent-name"})
KNOWN = CONVERSATION | SKIPPED | TITLES
# Fields every conversation line repeats (they become the tree, the header, the entry timestamp,
# or are session-wide); what is left of a system line is kept as its custom entry's data.
_ENVELOPE = frozenset({"parentUuid", "logicalParentUuid", "isSidechain", "userType", "cwd", "sessionId", "version",
                       "gitBranch", "slug", "type", "uuid", "timestamp", "agentId"})
_STOP = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "toolUse", "max_tokens": "length",
         "pause_turn": "stop", "refusal": "stop"}
_IMPORT_ID = "import"


def read_first_line(path: str) -> Any:
    """The first non-blank line of a file, parsed (None when there is none or it is not JSON)."""
    with open(path, "rb") as f:
        for raw in f:
            if raw.strip():
                try:
                    return _json.loads(raw)
                except ValueError:
                    return None
    return None


def looks_like_claude_code(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("type"), str) and (
        value["type"] in KNOWN or isinstance(value.get("sessionId"), str))


def find_sidechains(path: str) -> list[str]:
    """The subagent transcripts of a main session file: `<dir>/<id>/subagents/agent-*.jsonl` (2.1
    layout) and `<dir>/agent-*.jsonl` whose lines name this session (2.0 layout)."""
    directory, name = os.path.split(os.path.abspath(path))
    stem = name.removesuffix(".jsonl")
    if name.startswith("agent-"):
        return []
    found: list[str] = []
    nested = os.path.join(directory, stem, "subagents")
    if os.path.isdir(nested):
        found += sorted(os.path.join(nested, n) for n in os.listdir(nested)
                        if n.startswith("agent-") and n.endswith(".jsonl"))
    for n in sorted(os.listdir(directory)):
        if n.startswith("agent-") and n.endswith(".jsonl"):
            candidate = os.path.join(directory, n)
            try:
                first = read_first_line(candidate)
            except OSError:
                continue
            if isinstance(first, dict) and first.get("sessionId") == stem:
                found.append(candidate)
    return found


# -- content ------------------------------------------------------------------------------------------


def _image(block: dict[str, Any]) -> dict[str, Any]:
    source = block.get("source")
    if isinstance(source, dict) and source.get("type") == "base64" and isinstance(source.get("data"), str):
        return {"type": "image", "data": source["data"], "mimeType": str(source.get("media_type") or "image/png")}
    return block  # a URL or file reference: kept as it was


def _user_blocks(blocks: list[Any]) -> list[Any]:
    out: list[Any] = []
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            out.append({"type": "text", "text": str(block.get("text") or "")})
        elif kind == "image":
            out.append(_image(block))
        else:
            out.append(block)
    return out


def _assistant_block(block: Any, tools: dict[str, str]) -> Any:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text":
        return {"type": "text", "text": str(block.get("text") or "")}
    if kind == "thinking":
        out = {"type": "thinking", "thinking": str(block.get("thinking") or "")}
        if isinstance(block.get("signature"), str) and block["signature"]:
            out["thinkingSignature"] = block["signature"]
        return out
    if kind == "redacted_thinking":
        return {"type": "thinking", "thinking": "", "thinkingSignature": str(block.get("data") or ""), "redacted": True}
    if kind == "tool_use":
        call_id, name = str(block.get("id") or ""), str(block.get("name") or "")
        tools[call_id] = name
        arguments = block.get("input")
        return {"type": "toolCall", "id": call_id, "name": name,
                "arguments": arguments if isinstance(arguments, dict) else {"input": arguments}}
    return block  # server tool blocks and whatever comes next: kept verbatim


def _result_content(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return _user_blocks(content)
    return []


def _number(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) and value == value else 0


_PRICES: dict[str, Any] | None = None


def _price(model: str) -> Any:
    global _PRICES
    if _PRICES is None:
        from picontext.ai.models import builtin_models

        _PRICES = {m["id"]: m for m in builtin_models() if m.get("provider") == "anthropic"}
    return _PRICES.get(model)


def _usage(raw: Any, model: str) -> dict[str, Any]:
    raw = raw if isinstance(raw, dict) else {}
    usage: dict[str, Any] = {
        "input": _number(raw.get("input_tokens")),
        "output": _number(raw.get("output_tokens")),
        "cacheRead": _number(raw.get("cache_read_input_tokens")),
        "cacheWrite": _number(raw.get("cache_creation_input_tokens")),
    }
    usage["totalTokens"] = usage["input"] + usage["output"] + usage["cacheRead"] + usage["cacheWrite"]
    creation = raw.get("cache_creation")
    if isinstance(creation, dict) and _number(creation.get("ephemeral_1h_input_tokens")):
        usage["cacheWrite1h"] = _number(creation.get("ephemeral_1h_input_tokens"))
    usage["cost"] = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
    priced = _price(model)
    if priced is not None:
        from picontext.ai.models import calculate_cost

        calculate_cost(priced, usage)  # type: ignore[arg-type]
    return usage




# -- one output session ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Conversation:
    """One Pi session being assembled from the lines routed to it.

    `anchor` maps every Claude Code uuid seen to the group its line belongs to; `tips` maps a group
    to its last entry. A group is one API message with its results (and the system and hook lines
    that continue it), one user message, one compaction. A line is attached after the tip of its
    parent's group, and continuing lines join that group."""

    owner: ClaudeCodeImport
    session_id: str
    sidechain: bool
    sink: SessionSink | None = None
    anchor: dict[str, str] = field(default_factory=dict)
    tips: dict[str, str] = field(default_factory=dict)
    ids: set[str] = field(default_factory=set)
    tail: str | None = None
    tail_group: str | None = None
    tail_time: str = ""
    tools: dict[str, str] = field(default_factory=dict)
    pending: list[dict[str, Any]] = field(default_factory=list)
    open_entry: dict[str, Any] | None = None
    open_message_id: Any = None
    open_group: str | None = None
    boundary: tuple[dict[str, Any], int] | None = None
    environment: tuple[Any, Any, Any] | None = None
    titled: bool = False
    last_model: str = "unknown"
    waiting: list[tuple[dict[str, Any], int]] = field(default_factory=list)

    # ---- opening

    def open(self, line: dict[str, Any], number: int) -> None:
        """Write the header and the import entry, from the first line that has a cwd and a time."""
        timestamp = line["timestamp"]
        parent = self.owner.parent_path
        if self.sidechain and self.owner.main is not self and self.owner.main.sink is not None:
            parent = self.owner.main.sink.path
        header = session_header(self.session_id, timestamp, str(line["cwd"]), parent)
        self.sink = self.owner.batch.open(header, self.owner.source)
        data: dict[str, Any] = {"format": "claude-code", "source": self.owner.source,
                                "sessionId": line.get("sessionId"), "version": line.get("version"),
                                "gitBranch": line.get("gitBranch")}
        if line.get("agentId") is not None:
            data["agentId"] = line.get("agentId")
            link = self.owner.agent_links.get(str(line.get("agentId")))
            if link:
                data["parentToolCallId"] = link
        if self.sidechain:
            data["sidechain"] = True
        self.environment = (line.get("cwd"), line.get("gitBranch"), line.get("version"))
        self.ids.add(_IMPORT_ID)
        self.sink.add(custom_entry(_IMPORT_ID, None, timestamp, "picontext.import", data))
        self.tail, self.tail_group, self.tail_time = _IMPORT_ID, _IMPORT_ID, timestamp
        self.tips[_IMPORT_ID] = _IMPORT_ID
        waiting, self.waiting = self.waiting, []
        for early, early_number in waiting:
            self.take(early, early_number)

    # ---- ids, parents, writing

    def _new_id(self, wanted: Any) -> str:
        """`wanted` (a line's uuid) if free, else a variant; entries with no line of their own get
        8 hex digits derived from the session and their position, so an import is reproducible."""
        if not (isinstance(wanted, str) and wanted):
            wanted = hashlib.sha256(f"{self.session_id}:{len(self.ids)}".encode()).hexdigest()[:8]
        base = wanted
        candidate, n = base, 1
        while candidate in self.ids:
            n += 1
            candidate = f"{base}~{n}"
        self.ids.add(candidate)
        return candidate

    def _parent(self, cc_parent: Any) -> tuple[str | None, str | None]:
        """(parent entry id, its group): the tip of the parent line's group, else the last entry."""
        if isinstance(cc_parent, str):
            group = self.anchor.get(cc_parent)
            if group is not None:
                return self.tips[group], group
        return self.tail, self.tail_group

    def _time(self, line: dict[str, Any]) -> str:
        timestamp = line.get("timestamp")
        if isinstance(timestamp, str) and timestamp:
            self.tail_time = timestamp
            return timestamp
        return self.tail_time

    def _emit(self, entry: dict[str, Any], group: str | None) -> None:
        key = group if group is not None else entry["id"]
        self.tips[key] = entry["id"]
        self.tail, self.tail_group = entry["id"], key
        if self.open_group is not None and key == self.open_group:
            self.pending.append(entry)
            return
        self.close_message()
        assert self.sink is not None
        self.sink.add(entry)

    def close_message(self) -> None:
        """Write the API message being assembled and what was chained after it."""
        if self.open_entry is None:
            return
        message = self.open_entry["message"]
        if message["stopReason"] is None:
            calls = any(isinstance(b, dict) and b.get("type") == "toolCall" for b in message["content"])
            message["stopReason"] = "toolUse" if calls else "stop"
        assert self.sink is not None
        for entry in self.pending:
            self.sink.add(entry)
        self.pending = []
        self.open_entry, self.open_message_id, self.open_group = None, None, None

    # ---- lines

    def skip(self, line: dict[str, Any]) -> None:
        """A skipped line (progress) still links its children to where it hung."""
        uid = line.get("uuid")
        if isinstance(uid, str):
            parent = line.get("parentUuid")
            group = self.anchor.get(parent) if isinstance(parent, str) else None
            self.anchor[uid] = group if group is not None else (self.tail_group or _IMPORT_ID)

    def take(self, line: dict[str, Any], number: int) -> None:
        if self.sink is None:
            self.waiting.append((line, number))
            return
        kind = line["type"]
        if self.boundary is not None and not (kind == "user" and line.get("isCompactSummary")):
            self._boundary_as_custom()
        self._environment(line)
        if kind == "assistant":
            self._assistant(line, number)
        elif kind == "user":
            self._user(line, number)
        elif kind == "system" and line.get("subtype") == "compact_boundary":
            self.close_message()
            self.boundary = (line, number)
        elif kind in TITLES:
            self._title(line)
        else:
            self._custom(line, "claude-code.system" if kind == "system" else f"claude-code.{kind}")

    def _environment(self, line: dict[str, Any]) -> None:
        """A change of cwd, git branch or Claude Code version is kept as a `custom` entry."""
        if "cwd" not in line:
            return
        now = (line.get("cwd"), line.get("gitBranch"), line.get("version"))
        if self.environment is not None and now != self.environment:
            parent, group = self._parent(line.get("parentUuid"))
            entry = custom_entry(self._new_id(None), parent, self._time(line), "claude-code.environment",
                                 {"cwd": now[0], "gitBranch": now[1], "version": now[2]})
            self._emit(entry, group)
        self.environment = now

    def _assistant(self, line: dict[str, Any], number: int) -> None:
        raw = line.get("message")
        if not isinstance(raw, dict):
            raise ImportFailed(self.owner.source, "an assistant line without a message object", number)
        message_id = raw.get("id")
        blocks: list[Any] = raw["content"] if isinstance(raw.get("content"), list) else []
        uid = line.get("uuid")
        if self.open_entry is not None and message_id is not None and message_id == self.open_message_id:
            merged: dict[str, Any] = self.open_entry["message"]
            known = {b.get("id") for b in merged["content"] if isinstance(b, dict) and b.get("type") == "toolCall"}
            for block in blocks:
                if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("id") in known:
                    continue  # the same block written twice
                merged["content"].append(_assistant_block(block, self.tools))
            self._finish_assistant(merged, raw, line)
            if isinstance(uid, str) and self.open_group is not None:
                self.anchor[uid] = self.open_group
            return
        parent, _group = self._parent(line.get("parentUuid"))
        self.close_message()
        timestamp = self._time(line)
        model = str(raw.get("model") or "unknown")
        synthetic = model == "<synthetic>"
        message: dict[str, Any] = {"role": "assistant", "content": [_assistant_block(b, self.tools) for b in blocks],
                   "api": "anthropic-messages", "provider": "anthropic",
                   "model": self.last_model if synthetic else model}
        if isinstance(message_id, str):
            message["responseId"] = message_id
        message.update(usage=_usage(raw.get("usage"), message["model"]), stopReason=None,
                       timestamp=js_date_ms(timestamp))
        if not synthetic:
            self.last_model = model
        group = self._new_id(uid)
        entry: dict[str, Any] = {"type": "message", "id": group, "parentId": parent, "timestamp": timestamp,
                                 "message": message}
        self._finish_assistant(message, raw, line)
        if isinstance(uid, str):
            self.anchor[uid] = group
        self.open_entry, self.open_message_id, self.open_group = entry, message_id, group
        self.tips[group] = group
        self.tail, self.tail_group = group, group
        self.pending = [entry]
        if message_id is None:
            self.close_message()

    def _finish_assistant(self, message: dict[str, Any], raw: dict[str, Any], line: dict[str, Any]) -> None:
        if isinstance(raw.get("usage"), dict):
            message["usage"] = _usage(raw["usage"], message["model"])
        cost = line.get("costUSD")
        if isinstance(cost, int | float) and not isinstance(cost, bool):  # 1.x lines carry what Claude Code billed
            message["usage"]["cost"] = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": cost}
        stop = raw.get("stop_reason")
        if isinstance(stop, str):
            message["stopReason"] = _STOP.get(stop, "stop")
        if line.get("isApiErrorMessage") or (raw.get("model") == "<synthetic>" and line.get("error")):
            message["stopReason"] = "error"
            message["errorMessage"] = content_text(raw.get("content")) or str(line.get("error") or "API error")

    def _user(self, line: dict[str, Any], number: int) -> None:
        raw = line.get("message")
        if not isinstance(raw, dict):
            raise ImportFailed(self.owner.source, "a user line without a message object", number)
        content = raw.get("content")
        uid = line.get("uuid")
        timestamp = self._time(line)
        ms = js_date_ms(timestamp)
        if line.get("isCompactSummary") and self.boundary is not None:
            self._compaction(line, content, timestamp)
            return
        parent, group = self._parent(line.get("parentUuid"))
        blocks: list[Any] = content if isinstance(content, list) else []
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        for index, block in enumerate(results):
            call_id = str(block.get("tool_use_id") or "")
            message: dict[str, Any] = {"role": "toolResult", "toolCallId": call_id,
                                       "toolName": self.tools.get(call_id, "unknown"),
                                       "content": _result_content(block.get("content"))}
            if index == 0 and line.get("toolUseResult") is not None:
                message["details"] = line["toolUseResult"]
            message.update(isError=block.get("is_error") is True, timestamp=ms)
            result_id = self._new_id(uid if index == 0 else f"{uid}.{index}")
            self._emit({"type": "message", "id": result_id, "parentId": parent, "timestamp": timestamp,
                        "message": message}, group)
            parent, group = result_id, self.tail_group
        rest: Any = content
        if results:
            rest = [b for b in blocks if not (isinstance(b, dict) and b.get("type") == "tool_result")]
            if not rest:
                if isinstance(uid, str):
                    self.anchor[uid] = self.tail_group or _IMPORT_ID
                return
        if isinstance(rest, list):
            rest = _user_blocks(rest)
        elif not isinstance(rest, str):
            rest = []
        entry_id = self._new_id(uid if not results else f"{uid}.text")
        entry: dict[str, Any]
        if line.get("isMeta"):
            entry = {"type": "custom_message", "customType": "claude-code.meta", "content": rest, "display": False,
                     "id": entry_id, "parentId": parent, "timestamp": timestamp}
        else:
            entry = {"type": "message", "id": entry_id, "parentId": parent, "timestamp": timestamp,
                     "message": {"role": "user", "content": rest, "timestamp": ms}}
        self.close_message()
        self._emit(entry, None)
        if isinstance(uid, str):
            self.anchor[uid] = entry_id

    def _compaction(self, line: dict[str, Any], content: Any, timestamp: str) -> None:
        assert self.boundary is not None
        boundary, _line_number = self.boundary
        self.boundary = None
        metadata: dict[str, Any] = boundary["compactMetadata"] if isinstance(boundary.get("compactMetadata"), dict) \
            else {}
        parent, _group = self._parent(boundary.get("logicalParentUuid") or boundary.get("parentUuid"))
        entry_id = self._new_id(boundary.get("uuid"))
        details = {"source": "claude-code", "trigger": metadata.get("trigger"), "summaryUuid": line.get("uuid")}
        entry = {"type": "compaction", "id": entry_id, "parentId": parent, "timestamp": self._time(boundary),
                 "summary": content_text(content), "firstKeptEntryId": entry_id,
                 "tokensBefore": _number(metadata.get("preTokens")), "details": details}
        self._emit(entry, None)
        for uid in (boundary.get("uuid"), line.get("uuid")):
            if isinstance(uid, str):
                self.anchor[uid] = entry_id
        self.tail_time = timestamp

    def _boundary_as_custom(self) -> None:
        """A boundary whose summary line did not follow: kept as what it is, a system line."""
        assert self.boundary is not None
        boundary, _line_number = self.boundary
        self.boundary = None
        self._custom(boundary, "claude-code.system")

    def _custom(self, line: dict[str, Any], custom_type: str) -> None:
        parent, group = self._parent(line.get("parentUuid"))
        data = {k: v for k, v in line.items() if k not in _ENVELOPE}
        data["type"] = line["type"]
        entry = custom_entry(self._new_id(line.get("uuid")), parent, self._time(line), custom_type, data)
        self._emit(entry, group)
        uid = line.get("uuid")
        if isinstance(uid, str):
            self.anchor[uid] = self.tail_group or entry["id"]

    def _title(self, line: dict[str, Any]) -> None:
        kind = line["type"]
        name = line.get({"custom-title": "customTitle", "ai-title": "aiTitle"}.get(kind, ""))
        timestamp = self._time(line)
        if isinstance(name, str) and (kind == "custom-title" or not self.titled):
            self.titled = self.titled or kind == "custom-title"
            entry = {"type": "session_info", "id": self._new_id(None), "parentId": self.tail, "timestamp": timestamp,
                     "name": re.sub(r"[\r\n]+", " ", name).strip()}
            self._emit(entry, self.tail_group)
            return
        data = {k: v for k, v in line.items() if k not in ("sessionId",)}
        self._emit(custom_entry(self._new_id(None), self.tail, timestamp, f"claude-code.{kind}", data),
                   self.tail_group)

    def finish(self) -> None:
        if self.boundary is not None:
            self._boundary_as_custom()
        self.close_message()


# -- the whole file ------------------------------------------------------------------------------------


@dataclass(slots=True)
class ClaudeCodeImport:
    """Reading one transcript file into `batch`. `parent_path`: the parent session's Pi file when
    this file is a subagent's; `agent_links`: subagent id -> the parent's Task tool call id."""

    source: str
    batch: ImportBatch
    parent_path: str | None = None
    agent_links: dict[str, str] = field(default_factory=dict)
    main: _Conversation = field(init=False)
    sides: list[_Conversation] = field(default_factory=list)
    _kind_known: bool = False
    _seen: bool = False
    _early: list[tuple[dict[str, Any], int]] = field(default_factory=list)
    written: list[SessionSink] = field(default_factory=list)

    def conversations(self) -> Iterator[_Conversation]:
        if self._kind_known:
            yield self.main
        yield from self.sides

    def feed(self, number: int, raw: bytes) -> None:
        if not raw.strip():
            return
        try:
            line = _json.loads(raw)
        except ValueError:
            if not raw.endswith(b"\n"):
                why = "truncated line (the transcript ends in the middle of a line)"
            elif not self._seen:
                why = "not a Claude Code transcript (not one JSON object per line)"
            else:
                why = "not valid JSON"
            raise ImportFailed(self.source, why, number) from None
        if not isinstance(line, dict) or not isinstance(line.get("type"), str):
            raise ImportFailed(self.source, "not a Claude Code transcript line (no \"type\")", number)
        kind = line["type"]
        if not self._seen:
            if kind == "session" and "id" in line:
                raise ImportFailed(self.source, "is a Pi session already: open it directly (nothing to import)", number)
            if not looks_like_claude_code(line):
                raise ImportFailed(self.source, f"not a Claude Code transcript (a line of type {kind!r})", number)
            self._seen = True
        version = line.get("version")
        if version is not None and (not isinstance(version, str) or version.split(".", 1)[0] not in SUPPORTED_MAJORS):
            raise ImportFailed(self.source, f"Claude Code version {version} is not supported (this importer reads "
                                            "versions 1.x and 2.x)", number)
        if kind in SKIPPED:
            data = line.get("data")
            if kind == "progress" and isinstance(data, dict) and data.get("type") == "agent_progress" \
                    and data.get("agentId") and line.get("parentToolUseID"):
                self.agent_links[str(data["agentId"])] = str(line["parentToolUseID"])
            if self._kind_known:
                self._route(line).skip(line)
            return
        if not self._kind_known:
            if kind not in CONVERSATION and "uuid" not in line:
                self._early.append((line, number))  # titles before the first message
                return
            self._start(line)
        conversation = self._route(line)
        if conversation.sink is None and isinstance(line.get("cwd"), str) and isinstance(line.get("timestamp"), str):
            conversation.open(line, number)
        conversation.take(line, number)

    def _start(self, line: dict[str, Any]) -> None:
        session_id = line.get("sessionId") if isinstance(line.get("sessionId"), str) else None
        if session_id is None:
            raise ImportFailed(self.source, "the first message line has no sessionId")
        sidechain = line.get("isSidechain") is True
        if sidechain:
            agent = line.get("agentId")
            suffix = f"agent-{agent}" if isinstance(agent, str) and agent else \
                os.path.basename(self.source).removesuffix(".jsonl")
            session_id = f"{session_id}-{suffix}"
        if not paths.is_valid_session_id(session_id):
            session_id = str(uuid_module.uuid5(uuid_module.NAMESPACE_URL, session_id))
        self.main = _Conversation(self, session_id, sidechain)
        self._kind_known = True
        self.main.waiting.extend(self._early)
        self._early = []

    def _route(self, line: dict[str, Any]) -> _Conversation:
        """Inline sidechain lines (1.x) go to a session of their own, found by their parent."""
        if line.get("isSidechain") is None or (line.get("isSidechain") is True) == self.main.sidechain:
            return self.main
        parent = line.get("parentUuid")
        for side in self.sides:
            if isinstance(parent, str) and parent in side.anchor:
                return side
        root = line.get("uuid") if isinstance(line.get("uuid"), str) else str(len(self.sides) + 1)
        side = _Conversation(self, f"{self.main.session_id}-side-{str(root)[:8]}", True)
        self.sides.append(side)
        return side

    def finish(self) -> list[SessionSink]:
        if not self._kind_known:
            raise ImportFailed(self.source, "no conversation in this file (nothing to import)")
        sinks = []
        for conversation in self.conversations():
            if conversation.sink is None:
                if conversation is self.main:
                    raise ImportFailed(self.source, "no line with a working directory and a time (nothing to import)")
                continue
            conversation.finish()
            sinks.append(conversation.sink)
        self.written = sinks
        return sinks


def import_claude_code(source: str, batch: ImportBatch, *, parent_path: str | None = None,
                       agent_links: dict[str, str] | None = None) -> ClaudeCodeImport:
    """Read `source` into `batch` (streaming); the sessions are written when the batch commits."""
    reader = ClaudeCodeImport(source, batch, parent_path, agent_links if agent_links is not None else {})
    try:
        with open(source, "rb") as f:
            for number, raw in enumerate(f, 1):
                reader.feed(number, raw)
    except OSError as exc:
        raise ImportFailed(source, f"cannot read: {exc.strerror}") from None
    reader.finish()
    return reader
