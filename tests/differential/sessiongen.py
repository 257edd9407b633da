# ruff: noqa: E501 (long literals: realistic file contents, prompts and tool output)
"""Seeded generator of varied, realistic Pi session files for the differential projection tests.

Pure Python on purpose (no picontext import): the files it writes are the ground truth that
both picontext and the Pi reference read, so it must not share code with the side under test.

`generate(seed)` returns a `GeneratedSession`: the file's bytes plus the leaves worth testing.
A leaf is an entry id (str), None (JS null), `UNDEFINED` (JS undefined: the file's last entry)
or `{"index": i}` (the id of the i-th non-header entry after migration; used for v1 files,
whose ids are minted at random by the migration on each side).

Shapes covered: v3 files with every entry type (all message roles including system messages
with sections/toolsAdded/toolsRemoved, bashExecution with excludeFromContext, custom and
unknown roles), several branches and roots, orphans, branch summaries, compactions (normal,
retain-none, dangling, nested, with and without a systemMessage checkpoint), context edits
(omit, replace, restore, on other branches, after the leaf), settings entries, labels, session
names, unknown entry types; legacy v1 (no ids, firstKeptEntryIndex) and v2 (hookMessage)
files; unicode (U+2028, emoji, lone surrogates); byte-level damage (no trailing newline, torn
last line, garbage, falsy and non-object lines, CRLF, invalid UTF-8); and a few files that are
not valid sessions at all. Parent cycles are never produced: the reference loops forever on them.
"""

from __future__ import annotations

import base64
import json
import random
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

UNDEFINED = "__undefined__"

Leaf = str | None | dict[str, int]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(obj: Any) -> str:
    """One JSONL line the way Pi writes it (lone surrogates escaped, as JSON.stringify does)."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


@dataclass
class GeneratedSession:
    seed: int
    kind: str  # v3 | v2 | v1 | invalid
    data: bytes
    leaves: list[Leaf]
    valid: bool = True
    notes: list[str] = field(default_factory=list)

    def write(self, directory: Path) -> Path:
        path = directory / f"gen-{self.seed:05d}-{self.kind}.jsonl"
        path.write_bytes(self.data)
        return path


# ---------------------------------------------------------------------------------------------
# Text material

_PLAIN = [
    "Can you look at the failing test in tests/test_parser.py?",
    "Sure, let me read the file first.",
    "The parser drops the last token when the input has no trailing newline.",
    "Run the whole suite again, please.",
    "All 42 tests pass now.",
    "Refactor `load_config` so it no longer reads the environment at import time.",
    "I'll split the function into two: one that parses, one that validates.",
    "What does this regex do? ^(?:[a-z0-9-]+\\.)+[a-z]{2,}$",
    "Use pathlib instead of os.path here.",
    "Done. I also removed the unused import of `sys`.",
    "Let's revert that change; it broke the CLI.",
    'Error: "expected \\"value\\", got EOF" at line 3',
    "",
    " ",
    "tabs\tand\nnewlines\r\nand a backslash \\ here",
]
_UNICODE = [
    "naïve café — «quoted» text",
    "日本語のテキストと中文字符",
    "emoji 🎉👩‍💻🏳️‍🌈 and flags 🇫🇷",
    "line\u2028separator and paragraph\u2029separator",
    "right-to-left עברית and العربية",
    "zero\u200bwidth and combining e\u0301",
    "nul \u0000 and bell \u0007 control chars",
    "math 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ∑∫√∞",
    "\ufeffleading BOM inside a string",
]
_SURROGATE = ["truncated emoji \ud83d", "lone low \udc00 surrogate"]

_FILES = ["src/app/config.py", "src/app/parser.py", "tests/test_parser.py", "README.md", "pyproject.toml"]
_TOOLS = [
    {
        "name": "read",
        "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
    {
        "name": "bash",
        "description": "Run a shell command",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
    },
    {
        "name": "edit",
        "description": "Replace text in a file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "oldText": {"type": "string"}, "newText": {"type": "string"}},
        },
    },
    {"name": "write", "description": "Write a file", "parameters": {"type": "object"}},
    {"name": "grep", "description": "Search files", "parameters": {"type": "object"}, "constrainedSampling": True},
]
_PNG = base64.b64encode(bytes(range(0, 60, 3))).decode()


class _Gen:
    """One session under construction: clock, ids, tree position and the entries so far."""

    def __init__(self, rng: random.Random, *, quirky: bool) -> None:
        self.rng = rng
        self.quirky = quirky
        start = datetime(2025, 1, 1, tzinfo=UTC).timestamp() * 1000
        self.ms = int(start + rng.randrange(0, 600 * 86_400_000))
        self.entries: list[dict[str, Any]] = []
        self.leaf: str | None = None
        self.ids: set[str] = set()
        self.tool_calls: list[tuple[str, str]] = []
        self.provider, self.model = rng.choice(
            [("anthropic", "claude-sonnet-4-5"), ("openai", "gpt-5"), ("acme", "m1")]
        )

    # -- primitives ---------------------------------------------------------------------------
    def tick(self) -> int:
        self.ms += self.rng.choice([1, 7, 250, 1200, 4000, 31_000])
        return self.ms

    def iso(self, ms: int | None = None) -> str:
        ms = self.ms if ms is None else ms
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"

    def entry_timestamp(self) -> Any:
        """Mostly toISOString() output; hand-edited files get other Date-parsable or broken shapes."""
        ms = self.tick()
        if not self.quirky or self.rng.random() < 0.8:
            return self.iso(ms)
        iso = self.iso(ms)
        return self.rng.choice(
            [
                iso[:19] + "Z",  # no milliseconds
                iso[:16] + "Z",  # no seconds
                iso[:10],  # date only (UTC in JS)
                iso[:23] + "+02:00",
                iso[:23] + "-05:30",
                "not a date",
                "",
                None,
                ms,  # a number: new Date(ms)
                "__missing__",
            ]
        )

    def new_id(self) -> str:
        while True:
            i = f"{self.rng.getrandbits(32):08x}"
            if i not in self.ids:
                self.ids.add(i)
                return i

    def text(self) -> str:
        r = self.rng.random()
        if r < 0.6:
            return self.rng.choice(_PLAIN[:12])
        if r < 0.93:
            return self.rng.choice(_UNICODE)
        if r < 0.97 or not self.quirky:
            return self.rng.choice(_PLAIN[12:])
        return self.rng.choice(_SURROGATE)

    def usage(self, scale: int = 1000) -> dict[str, Any]:
        i, o = self.rng.randrange(10, 50 * scale), self.rng.randrange(1, 2 * scale)
        cr = self.rng.choice([0, 0, self.rng.randrange(0, 40 * scale)])
        u: dict[str, Any] = {
            "input": i,
            "output": o,
            "cacheRead": cr,
            "cacheWrite": 0,
            "totalTokens": i + o + cr,
            "cost": {
                "input": i * 3e-6,
                "output": o * 1.5e-5,
                "cacheRead": cr * 3e-7,
                "cacheWrite": 0,
                "total": i * 3e-6 + o * 1.5e-5 + cr * 3e-7,
            },
        }
        if self.rng.random() < 0.2:
            u["reasoning"] = self.rng.randrange(0, o + 1)
        return u

    def add(self, etype: str, fields: dict[str, Any], *, parent: Any = "__leaf__", move: bool = True) -> dict[str, Any]:
        eid = self.new_id()
        e: dict[str, Any] = {"type": etype, "id": eid}
        e["parentId"] = self.leaf if parent == "__leaf__" else parent
        ts = self.entry_timestamp()
        if ts != "__missing__":
            e["timestamp"] = ts
        e.update(fields)
        if self.quirky and self.rng.random() < 0.03:
            e["futureField"] = {"kept": True, "n": self.rng.randrange(100)}
        self.entries.append(e)
        if move:
            self.leaf = eid
        return e

    # -- messages -----------------------------------------------------------------------------
    def msg_ts(self) -> int:
        return self.ms + self.rng.choice([0, 0, 1, -3])

    def system_message(self, full: bool) -> dict[str, Any]:
        rng = self.rng
        m: dict[str, Any] = {"role": "system"}
        m["content"] = (
            rng.choice(
                [
                    "",
                    "You are a coding agent.",
                    [{"type": "text", "text": "base prompt"}, {"type": "text", "text": "more"}],
                    None,
                ]
            )
            if full
            else rng.choice(["", "", "update"])
        )
        names = ["intro", "tools", "agentsMd", "skills", "date", "cwd"]
        if full:
            m["sections"] = {n: f"<{n}>{self.text()}</{n}>" for n in rng.sample(names, rng.randrange(1, 5))}
            m["toolsAdded"] = rng.sample(_TOOLS, rng.randrange(0, len(_TOOLS) + 1))
        else:
            m["sections"] = {
                n: rng.choice([None, f"<{n}>{self.text()}</{n}>"]) for n in rng.sample(names, rng.randrange(0, 3))
            }
            if rng.random() < 0.5:
                m["toolsAdded"] = rng.sample(_TOOLS, rng.randrange(0, 2))
            if rng.random() < 0.5:
                m["toolsRemoved"] = [{"name": t["name"]} for t in rng.sample(_TOOLS, rng.randrange(0, 3))]
        if self.quirky and rng.random() < 0.2:
            del m["content"]
        m["timestamp"] = self.msg_ts()
        return m

    def user_message(self) -> dict[str, Any]:
        rng = self.rng
        r = rng.random()
        if r < 0.65:
            content: Any = self.text()
        elif r < 0.9:
            content = [{"type": "text", "text": self.text()}]
            if rng.random() < 0.4:
                content.append({"type": "image", "data": _PNG, "mimeType": "image/png"})
            if rng.random() < 0.2:
                content.append({"type": "text", "text": self.text()})
        else:
            content = rng.choice([[], None, "__missing__"]) if self.quirky else []
        m: dict[str, Any] = {"role": "user"}
        if content != "__missing__":
            m["content"] = content
        m["timestamp"] = self.msg_ts()
        return m

    def assistant_message(self, tool_calls: bool) -> dict[str, Any]:
        rng = self.rng
        content: list[dict[str, Any]] = []
        if rng.random() < 0.5:
            th: dict[str, Any] = {"type": "thinking", "thinking": self.text()}
            if rng.random() < 0.5:
                th["thinkingSignature"] = base64.b64encode(rng.randbytes(24)).decode()
            if rng.random() < 0.1:
                th["redacted"] = True
            content.append(th)
        if rng.random() < 0.85:
            t: dict[str, Any] = {"type": "text", "text": self.text()}
            if rng.random() < 0.1:
                t["textSignature"] = "sig_" + rng.randbytes(6).hex()
            content.append(t)
        self.tool_calls = []
        if tool_calls:
            for _ in range(rng.randrange(1, 4)):
                name = rng.choice(["read", "bash", "edit", "grep"])
                call_id = rng.choice(["toolu_", "call_", "fc_"]) + rng.randbytes(8).hex()
                args: dict[str, Any] = {
                    "read": {"path": rng.choice(_FILES)},
                    "bash": {"command": rng.choice(["pytest -q", "ls -la src", "git diff --stat", "rg -n 'TODO' src"])},
                    "edit": {"path": rng.choice(_FILES), "oldText": "x = 1", "newText": "x = 2"},
                    "grep": {"pattern": "def load_", "path": "src"},
                }[name]
                tc: dict[str, Any] = {"type": "toolCall", "id": call_id, "name": name, "arguments": args}
                if rng.random() < 0.1:
                    tc["thoughtSignature"] = "ts" + rng.randbytes(4).hex()
                content.append(tc)
                self.tool_calls.append((call_id, name))
        if self.quirky and rng.random() < 0.05:
            content.append({"type": "futureBlock", "payload": [1, 2, 3]})
        stop = "toolUse" if tool_calls else rng.choice(["stop", "stop", "stop", "length", "error", "aborted"])
        m: dict[str, Any] = {
            "role": "assistant",
            "content": content,
            "api": {"anthropic": "anthropic-messages", "openai": "openai-responses"}.get(self.provider, "acme-api"),
            "provider": self.provider,
            "model": self.model,
            "usage": self.usage(),
            "stopReason": stop,
            "timestamp": self.msg_ts(),
        }
        if rng.random() < 0.2:
            m["responseId"] = "resp_" + rng.randbytes(6).hex()
        if stop == "error":
            m["errorMessage"] = rng.choice(
                ["overloaded_error", "prompt is too long: 210000 tokens > 200000 maximum", "fetch failed"]
            )
        if rng.random() < 0.05:
            m["diagnostics"] = [{"type": "retry", "timestamp": self.ms, "error": {"message": "529"}}]
        if self.quirky and rng.random() < 0.05:
            m.pop("content")
        return m

    def tool_result(self, call_id: str, name: str) -> dict[str, Any]:
        rng = self.rng
        out = {
            "read": "def load_config(path):\n    with open(path) as f:\n        return f.read()\n",
            "bash": "============ 42 passed in 0.31s ============\n",
            "edit": "Successfully replaced text in " + rng.choice(_FILES),
            "grep": "src/app/config.py:12:def load_config(path):\n",
        }[name]
        content: list[dict[str, Any]] = [{"type": "text", "text": out + rng.choice(["", self.text()])}]
        if rng.random() < 0.05:
            content.append({"type": "image", "data": _PNG, "mimeType": "image/png"})
        m: dict[str, Any] = {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": name,
            "content": content,
            "isError": rng.random() < 0.1,
            "timestamp": self.msg_ts(),
        }
        if rng.random() < 0.3:
            m["details"] = {"diff": "-x = 1\n+x = 2", "firstChangedLine": 3} if name == "edit" else {"truncation": None}
        if rng.random() < 0.05:
            m["usage"] = self.usage(10)
        return m

    def bash_message(self) -> dict[str, Any]:
        rng = self.rng
        m: dict[str, Any] = {
            "role": "bashExecution",
            "command": rng.choice(["ls", "git status", "make test", "cat 😀.txt"]),
            "output": rng.choice(["", "ok\n", self.text()]),
        }
        ec = rng.choice([0, 1, 127, None, "__missing__"])
        if ec != "__missing__":
            m["exitCode"] = ec
        m["cancelled"] = rng.random() < 0.1
        m["truncated"] = rng.random() < 0.1
        if m["truncated"] and rng.random() < 0.7:
            m["fullOutputPath"] = "/tmp/pi-bash-" + rng.randbytes(4).hex() + ".log"
        if rng.random() < 0.3:
            m["excludeFromContext"] = True
        m["timestamp"] = self.msg_ts()
        return m

    def custom_role_message(self, role: str = "custom") -> dict[str, Any]:
        m: dict[str, Any] = {
            "role": role,
            "customType": self.rng.choice(["todo", "git-status", "reminder"]),
            "content": self.rng.choice([self.text(), [{"type": "text", "text": self.text()}]]),
            "display": self.rng.random() < 0.5,
        }
        if self.rng.random() < 0.4:
            m["details"] = {"items": [self.text()]}
        m["timestamp"] = self.msg_ts()
        return m

    def message(self, msg: dict[str, Any], **kw: Any) -> dict[str, Any]:
        return self.add("message", {"message": msg}, **kw)

    # -- higher-level steps -------------------------------------------------------------------
    def turn(self) -> None:
        """A user prompt followed by one to three assistant steps with tool calls and results."""
        self.message(self.user_message())
        for step in range(self.rng.randrange(1, 4)):
            use_tools = step < 2 and self.rng.random() < 0.6
            self.message(self.assistant_message(use_tools))
            for call_id, name in self.tool_calls:
                self.message(self.tool_result(call_id, name))
            if not use_tools:
                break

    def ids_on_path(self) -> list[str]:
        by_id = {e["id"]: e for e in self.entries}
        out: list[str] = []
        cur = by_id.get(self.leaf) if self.leaf else None
        seen: set[str] = set()
        while cur is not None and cur["id"] not in seen:
            seen.add(cur["id"])
            out.append(cur["id"])
            p = cur.get("parentId")
            cur = by_id.get(p) if p else None
        out.reverse()
        return out

    def any_id(self) -> str | None:
        return self.rng.choice(self.entries)["id"] if self.entries else None

    def compaction(self) -> None:
        rng = self.rng
        path = self.ids_on_path()
        r = rng.random()
        own = "__own__"
        if r < 0.45 and path:
            first_kept: Any = rng.choice(path[len(path) // 2 :])  # keep the recent half
        elif r < 0.6 and path:
            first_kept = rng.choice(path)  # possibly before an earlier compaction
        elif r < 0.75:
            first_kept = own
        elif r < 0.85:
            first_kept = "dangling-" + rng.randbytes(3).hex()
        elif r < 0.95 and self.entries:
            first_kept = self.any_id()  # maybe another branch
        else:
            first_kept = "__missing__"
        fields: dict[str, Any] = {
            "summary": rng.choice(
                [
                    "## Goal\nRefactor the config loader.\n\n## Progress\n- [x] split parse/validate\n- [ ] update docs",
                    "User asked about the parser; fixed the EOF bug in parser.py.",
                    "",
                    "Résumé ✓ — 🧠 context\u2028kept",
                ]
            )
        }
        if first_kept != "__missing__":
            fields["firstKeptEntryId"] = first_kept
        fields["tokensBefore"] = rng.randrange(1000, 200_000)
        if rng.random() < 0.5:
            fields["details"] = {"readFiles": rng.sample(_FILES, 2), "modifiedFiles": [_FILES[0]]}
        if rng.random() < 0.3:
            fields["usage"] = self.usage()
        if rng.random() < 0.2:
            fields["fromHook"] = rng.random() < 0.5
        if rng.random() < 0.5:
            sm = self.system_message(True)
            sm.pop("toolsRemoved", None)
            if sm.get("content") is None:
                sm["content"] = ""
            fields["systemMessage"] = sm
        e = self.add("compaction", fields)
        if e.get("firstKeptEntryId") == own:
            e["firstKeptEntryId"] = e["id"]

    def context_edit(self) -> None:
        rng = self.rng
        path = self.ids_on_path()
        by_id = {e["id"]: e for e in self.entries}
        editable = [
            i
            for i in path
            if by_id[i]["type"] == "custom_message"
            or (
                by_id[i]["type"] == "message"
                and isinstance(by_id[i].get("message"), dict)
                and by_id[i]["message"].get("role") in ("user", "assistant", "toolResult")
            )
        ]
        r = rng.random()
        if r < 0.7 and editable:
            target: Any = rng.choice(editable)
        elif r < 0.9 and self.entries:
            target = self.any_id()  # any entry type, any branch (hand-written)
        else:
            target = "ghost-" + rng.randbytes(3).hex()
        role = None
        t = by_id.get(target)
        if t and t["type"] == "message" and isinstance(t.get("message"), dict):
            role = t["message"].get("role")
        r = rng.random()
        if r < 0.35:
            replacement: Any = None
        elif r < 0.7:
            text = rng.choice(["[omitted: large tool output]", "edited ✂️", self.text()])
            # The reference normalizes strings to a text block for assistant/toolResult targets;
            # hand-written files may still carry the string.
            if role in ("assistant", "toolResult") and rng.random() < 0.7:
                replacement = {"content": [{"type": "text", "text": text}]}
            else:
                replacement = {"content": text}
        elif r < 0.95:
            replacement = {
                "content": [
                    {"type": "text", "text": self.text()},
                    {"type": "image", "data": _PNG, "mimeType": "image/png"},
                ][: rng.randrange(0, 3)]
            }
        else:
            replacement = (
                {"content": "kept", "reason": "extra key"}
                if not self.quirky
                else rng.choice([{}, {"content": None}, {"content": "x", "by": "hand"}])
            )
        self.add("context_edit", {"targetId": target, "replacement": replacement})

    def misc_entry(self) -> None:
        rng = self.rng
        kind = rng.choice(
            [
                "model_change",
                "thinking_level_change",
                "usage",
                "custom",
                "label",
                "session_info",
                "custom_message",
                "unknown",
                "system",
                "bash",
                "custom_role",
                "unknown_role",
            ]
        )
        if kind == "model_change":
            self.provider, self.model = rng.choice(
                [("anthropic", "claude-opus-4-5"), ("openai", "gpt-5-mini"), ("acme", "m2")]
            )
            f: dict[str, Any] = {"provider": self.provider, "modelId": self.model}
            if self.quirky and rng.random() < 0.1:
                del f["provider"]
            self.add("model_change", f)
        elif kind == "thinking_level_change":
            lvl = rng.choice(["off", "minimal", "low", "medium", "high", "xhigh"])
            self.add("thinking_level_change", {} if self.quirky and rng.random() < 0.1 else {"thinkingLevel": lvl})
        elif kind == "usage":
            f = {
                "kind": rng.choice(["cache_warm", "summary", "weird-kind"]),
                "provider": self.provider,
                "model": self.model,
                "usage": self.usage(),
            }
            if rng.random() < 0.5:
                f["note"] = self.text() or "n"
            self.add("usage", f)
        elif kind == "custom":
            f = {"customType": rng.choice(["plan-mode", "todo-state"])}
            if rng.random() < 0.7:
                f["data"] = {"enabled": rng.random() < 0.5, "items": [self.text()]}
            e = self.add("custom", {})
            e.pop("type")
            rest = {k: e.pop(k) for k in list(e)}
            e.update({"type": "custom", **f, **rest})  # Pi writes custom entries type-first, fields before id
        elif kind == "label":
            f = {"targetId": self.any_id() or "nothing"}
            r = rng.random()
            if r < 0.7:
                f["label"] = rng.choice(["checkpoint", "before refactor 🔖", "v2"])
            elif r < 0.85:
                f["label"] = ""
            self.add("label", f)
        elif kind == "session_info":
            self.add("session_info", {"name": rng.choice(["Refactor config", "  spaced  ", "", "名前"])})
        elif kind == "custom_message":
            f = {"customType": rng.choice(["git-status", "reminder"])}
            r = rng.random()
            if r < 0.5:
                f["content"] = self.text()
            elif r < 0.9 or not self.quirky:
                f["content"] = [{"type": "text", "text": self.text()}] + (
                    [{"type": "image", "data": _PNG, "mimeType": "image/jpeg"}] if rng.random() < 0.3 else []
                )
            f["display"] = rng.random() < 0.6
            if rng.random() < 0.4:
                f["details"] = {"branch": "main", "dirty": rng.random() < 0.5}
            self.add("custom_message", f)
        elif kind == "unknown":
            self.add(rng.choice(["future_entry", "bookmark", "x-ext"]), {"payload": {"a": [1, "b"]}})
        elif kind == "system":
            self.message(self.system_message(rng.random() < 0.3))
        elif kind == "bash":
            self.message(self.bash_message())
        elif kind == "custom_role":
            self.message(self.custom_role_message())
        else:
            self.message(
                {
                    "role": rng.choice(["branchSummary", "futureRole", "compactionSummary"]),
                    "summary": "s",
                    "content": "c",
                    "timestamp": self.msg_ts(),
                }
            )

    def navigate(self) -> None:
        rng = self.rng
        r = rng.random()
        if r < 0.55 and self.entries:
            self.leaf = self.any_id()  # /tree: jump anywhere, the next append branches
        elif r < 0.8:
            previous = self.leaf
            target = self.any_id() if rng.random() < 0.85 else None
            self.leaf = target
            f: dict[str, Any] = {"fromId": previous if previous is not None else "root"}
            if self.quirky and rng.random() < 0.1:
                del f["fromId"]
            r2 = rng.random()
            if r2 < 0.75:
                f["summary"] = rng.choice(
                    ["Tried approach A; it failed because of the circular import.", "Branch ✓ with 🙂\u2028done"]
                )
            elif r2 < 0.95:
                f["summary"] = ""
            if rng.random() < 0.3:
                f["details"] = {"readFiles": [_FILES[1]]}
            if rng.random() < 0.2:
                f["fromHook"] = True
            self.add("branch_summary", f)
        elif r < 0.9:
            self.leaf = None  # resetLeaf: a new root
        else:
            # orphan: the parent is not in the file (hand-edited or truncated-at-start files)
            self.message(self.user_message(), parent=rng.choice(["deadbeef", "missing-parent"]))


def _fix_cycles(entries: list[Any]) -> None:
    """Give fresh ids to duplicated ids until following parentId links always terminates."""
    while True:
        by_id: dict[Any, Any] = {}
        for e in entries:
            if isinstance(e, dict) and isinstance(e.get("id"), str):
                by_id[e["id"]] = e
        bad = None
        for e in entries:
            if not isinstance(e, dict):
                continue
            seen: set[int] = set()
            cur = e
            while cur is not None:
                if id(cur) in seen:
                    bad = cur
                    break
                seen.add(id(cur))
                p = cur.get("parentId")
                cur = by_id.get(p) if isinstance(p, str) and p else None
            if bad is not None:
                break
        if bad is None:
            return
        bad["parentId"] = None


def _v3_entries(rng: random.Random, *, quirky: bool, size: int) -> _Gen:
    g = _Gen(rng, quirky=quirky)
    if rng.random() < 0.8:
        g.add("model_change", {"provider": g.provider, "modelId": g.model})
        g.add("thinking_level_change", {"thinkingLevel": rng.choice(["off", "medium", "high"])})
    if rng.random() < 0.7:
        g.message(g.system_message(True))
    while len(g.entries) < size:
        r = rng.random()
        if r < 0.45:
            g.turn()
        elif r < 0.57:
            g.compaction()
        elif r < 0.7:
            g.context_edit()
        elif r < 0.88:
            g.misc_entry()
        else:
            g.navigate()
    if quirky and rng.random() < 0.3 and len(g.entries) > 3:
        # a duplicated id (hand-merged files); cycles are repaired below
        src = rng.choice(g.entries)
        g.message(g.user_message())["id"] = src["id"]
    if quirky and rng.random() < 0.2:
        g.message(g.user_message())["parentId"] = ""  # falsy parent: a root
    if quirky and rng.random() < 0.2:
        e = g.message(g.user_message())
        del e["parentId"]
    _fix_cycles(g.entries)
    return g


def _header(rng: random.Random, g: _Gen, version: Any) -> dict[str, Any]:
    h: dict[str, Any] = {"type": "session"}
    if version != "__missing__":
        h["version"] = version
    h["id"] = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    h["timestamp"] = g.iso(g.ms - 5000)
    h["cwd"] = rng.choice(["/home/u/proj", "/home/u/my proj/ünï", "C:\\Users\\x"])
    if rng.random() < 0.1:
        h["parentSession"] = "/home/u/.pi/agent/sessions/--home-u-proj--/old.jsonl"
    return h


def _pick_leaves(rng: random.Random, entries: list[Any], n: int = 7) -> list[Leaf]:
    leaves: list[Leaf] = [UNDEFINED, None]
    by_type: dict[str, list[str]] = {}
    for e in entries:
        if isinstance(e, dict) and isinstance(e.get("id"), str):
            by_type.setdefault(str(e.get("type")), []).append(e["id"])
    types = list(by_type)
    rng.shuffle(types)
    for t in types[:n]:
        leaves.append(rng.choice(by_type[t]))
    ids = [i for v in by_type.values() for i in v]
    for _ in range(2):
        if ids:
            leaves.append(rng.choice(ids))
    leaves.append(rng.choice(["no-such-entry", "", "ROOT"]))
    out: list[Leaf] = []
    for leaf in leaves:
        if leaf not in out:
            out.append(leaf)
    return out


# ---------------------------------------------------------------------------------------------
# Serialization with damage


def _serialize(
    rng: random.Random, header: Any, entries: list[Any], *, damage: bool, allow_primitives: bool
) -> tuple[bytes, list[str]]:
    notes: list[str] = []
    lines: list[bytes] = [dumps(header).encode()]
    for e in entries:
        if damage and rng.random() < 0.04:
            junk = rng.choice(
                [
                    b"",
                    b"   ",
                    b"\t",
                    b"{not json",
                    b"}",
                    b'{"type":"message","id":"nan","x":NaN}',
                    b'{"type":"message","v":Infinity}',
                    b'{"a":"raw\ttab"}',
                    '\ufeff{"bom":1}'.encode(),
                    "\u2028{}".encode(),
                    b"null",
                    b"false",
                    b"0",
                    b'""',
                    b"// comment",
                ]
            )
            notes.append(f"junk {junk[:20]!r}")
            lines.append(junk)
        if allow_primitives and damage and rng.random() < 0.02:
            lines.append(rng.choice([b"5", b"[1]", b"true", b'"x"', b'{"foo":1}']))
            notes.append("primitive line")
        if damage and rng.random() < 0.01:
            lines.append(
                dumps(
                    {
                        "type": "session",
                        "version": 3,
                        "id": "second-header",
                        "timestamp": "2025-01-01T00:00:00.000Z",
                        "cwd": "/x",
                    }
                ).encode()
            )
            notes.append("second header")
        line = dumps(e).encode()
        if damage and rng.random() < 0.01:
            # invalid UTF-8 inside a string value: Node's decoder turns it into U+FFFD
            pos = line.find(b'"timestamp":"')  # the entry's own ISO timestamp comes first
            if pos > 0:
                pos += len(b'"timestamp":"')
                line = line[:pos] + rng.choice([b"\xff", b"\xe2\x82", b"\xc3"]) + line[pos:]
                notes.append("invalid utf-8")
        lines.append(line)
    sep = b"\r\n" if damage and rng.random() < 0.08 else b"\n"
    if sep == b"\r\n":
        notes.append("crlf")
    data = sep.join(lines)
    if damage:
        r = rng.random()
        if r < 0.15:
            notes.append("no trailing newline")
        elif r < 0.3:
            tail = dumps(
                {
                    "type": "message",
                    "id": "torn0000",
                    "parentId": None,
                    "timestamp": "x",
                    "message": {"role": "user", "content": "héllo 🎉 wörld"},
                }
            ).encode()
            cut = rng.randrange(1, len(tail) - 1)
            data += sep + tail[:cut]
            notes.append(f"torn last line at byte {cut}")
        elif r < 0.38 and allow_primitives:
            data += sep + rng.choice([b"null", b"false", b"0", b'""', b"  ", b"5", b'{"foo":1}', b"[1]", b"true"]) + sep
            notes.append("trailing odd value")
        else:
            data += sep
    else:
        data += b"\n"
    return data, notes


def _gen_v3(seed: int, rng: random.Random, *, version: Any = 3) -> GeneratedSession:
    quirky = rng.random() < 0.35
    size = rng.choice([3, 8, 15, 25, 40, 60, 90])
    g = _v3_entries(rng, quirky=quirky, size=size)
    if version == 3 and quirky and rng.random() < 0.1:
        version = rng.choice([4, 3.5, "3"])  # newer or odd versions load as is (no migration)
    header = _header(rng, g, version)
    damage = rng.random() < 0.5
    data, notes = _serialize(rng, header, g.entries, damage=damage, allow_primitives=True)
    if quirky:
        notes.append("quirky")
    return GeneratedSession(seed, "v3", data, _pick_leaves(rng, g.entries), notes=notes)


def _gen_v2(seed: int, rng: random.Random) -> GeneratedSession:
    quirky = rng.random() < 0.3
    g = _v3_entries(rng, quirky=quirky, size=rng.choice([5, 12, 30, 50]))
    for e in g.entries:
        if e["type"] == "message" and rng.random() < 0.15:
            e["message"] = g.custom_role_message("hookMessage")
        elif e["type"] == "custom_message" and rng.random() < 0.5:
            e["message"] = g.custom_role_message("hookMessage")
            e["type"] = "message"
            for k in ("customType", "content", "display", "details"):
                e.pop(k, None)
    version: Any = 2 if not quirky or rng.random() < 0.6 else rng.choice(["2", 2.5, 2.0])
    header = _header(rng, g, version)
    data, notes = _serialize(rng, header, g.entries, damage=rng.random() < 0.4, allow_primitives=True)
    return GeneratedSession(seed, "v2", data, _pick_leaves(rng, g.entries), notes=notes)


def _gen_v1(seed: int, rng: random.Random) -> GeneratedSession:
    """Legacy linear file: no ids, compactions point at a parsed-line index (header = 0)."""
    g = _Gen(rng, quirky=False)
    entries: list[dict[str, Any]] = []
    size = rng.choice([3, 10, 25, 60])

    def add(etype: str, fields: dict[str, Any]) -> None:
        entries.append({"type": etype, "timestamp": g.iso(g.tick()), **fields})

    while len(entries) < size:
        r = rng.random()
        if r < 0.55:
            add("message", {"message": g.user_message()})
            for _ in range(rng.randrange(1, 3)):
                tools = rng.random() < 0.5
                add("message", {"message": g.assistant_message(tools)})
                for call_id, name in g.tool_calls:
                    add("message", {"message": g.tool_result(call_id, name)})
        elif r < 0.65:
            add("message", {"message": g.bash_message()})
        elif r < 0.75:
            add(
                "model_change",
                {"provider": "anthropic", "modelId": rng.choice(["claude-opus-4-5", "claude-sonnet-4-5"])},
            )
        elif r < 0.85:
            add("thinking_level_change", {"thinkingLevel": rng.choice(["off", "low", "high"])})
        else:
            n = len(entries)
            back = rng.randrange(1, n + 1) if n else 1
            idx: Any = rng.choice([back, back, 0, n + 1, n + 5, "2"])
            f: dict[str, Any] = {
                "summary": rng.choice(["Summary of earlier work.", "Σύνοψη 📝"]),
                "firstKeptEntryIndex": idx,
                "tokensBefore": rng.randrange(1000, 150_000),
            }
            add("compaction", f)
    header = _header(rng, g, "__missing__")
    header.update({"provider": "anthropic", "modelId": "claude-sonnet-4-5", "thinkingLevel": "off"})
    v = rng.random()
    if v < 0.1:
        header["version"] = 1
    elif v < 0.15:
        header["version"] = None
    data, notes = _serialize(rng, header, entries, damage=rng.random() < 0.4, allow_primitives=False)
    leaves: list[Leaf] = [UNDEFINED, None, "no-such-entry"]
    for i in sorted(rng.sample(range(len(entries)), min(5, len(entries)))):
        leaves.append({"index": i})
    return GeneratedSession(seed, "v1", data, leaves, notes=notes)


def _gen_invalid(seed: int, rng: random.Random) -> GeneratedSession:
    g = _Gen(rng, quirky=False)
    header = _header(rng, g, 3)
    user = {
        "type": "message",
        "id": "aaaa0001",
        "parentId": None,
        "timestamp": g.iso(),
        "message": {"role": "user", "content": "hi", "timestamp": g.ms},
    }
    kind = rng.choice(["bom", "header-late", "garbage", "no-id", "empty", "blank", "numeric-id", "not-object"])
    data = {
        "bom": b"\xef\xbb\xbf" + (dumps(header) + "\n" + dumps(user) + "\n").encode(),
        "header-late": (dumps(user) + "\n" + dumps(header) + "\n").encode(),
        "garbage": b"{oops\nnot json at all\n",
        "no-id": (dumps({k: v for k, v in header.items() if k != "id"}) + "\n" + dumps(user) + "\n").encode(),
        "empty": b"",
        "blank": b"\n  \n\t\n",
        "numeric-id": (dumps({**header, "id": 12345}) + "\n" + dumps(user) + "\n").encode(),
        "not-object": b"[1,2]\n" + (dumps(header) + "\n").encode(),
    }[kind]
    return GeneratedSession(seed, "invalid", data, [UNDEFINED], valid=False, notes=[kind])


def generate(seed: int) -> GeneratedSession:
    """Deterministic: the same seed always gives the same bytes and leaves."""
    rng = random.Random(seed)
    r = rng.random()
    if r < 0.68:
        return _gen_v3(seed, rng)
    if r < 0.8:
        return _gen_v2(seed, rng)
    if r < 0.96:
        return _gen_v1(seed, rng)
    return _gen_invalid(seed, rng)


if __name__ == "__main__":  # pragma: no cover - manual inspection helper
    import sys

    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    for s in range(int(sys.argv[2]) if len(sys.argv) > 2 else 10):
        gs = generate(s)
        print(gs.write(out), gs.kind, len(gs.leaves), ",".join(gs.notes))
