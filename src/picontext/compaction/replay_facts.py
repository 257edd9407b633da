"""Facts of a real transcript, computed mechanically, and whether a compacted context still holds them.

`picontext eval replay` (replay.py) asks, at each cut of a real session, what a compaction kept.
The verified-facts ledger (verify.py, file_ops.py) already decides some facts a summary must carry
(modified files, the last user request, quoted errors); measuring with that same code would make
the ledger perfect by construction. So nothing here imports it: these rules are written apart,
read more agents' tools (Pi, Claude Code, SWE-agent) and count more kinds:

* `task`: the first user message with at least two key terms; kept when the context holds 60 %
  of its key terms.
* `request`: the last such user message (when it is not the task); kept the same way.
* `read` / `modified`: files read, or written or edited, by a call that did not fail (the 10
  newest of each); kept when the context holds the path, the path relative to the cwd, or its
  last two parts.
* `error`: the newest error line of a tool result, with `resolved` (a later call of the same
  tool on the same target succeeded); kept when the context holds 60 % of its key terms.
* `next`: the target of the next tool call after the cut (the file it reads or changes, else its
  command or first argument); kept as a path, else by its key terms.

Key terms are the distinctive words of a text (links left out): identifiers (with `_ . / -`,
digits or inner capitals), paths, numbers of three digits and more, words of six letters and
more that are not common English; at most eight, the most distinctive first. User messages that
a harness wrote (Claude Code's `<command-name>`, `<task-notification>`, ... blocks, interrupt
notes, compaction prefaces) are not requests. A text with fewer than two is too vague to be a fact (a "yes" or "go on").

The context is read as plain text: user, assistant (text and tool calls with their arguments),
tool results, custom messages, compaction and branch summaries; system messages (the prompt
every strategy keeps alike) and thinking are left out.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from picontext.session.convert import content_text

__all__ = ["COVERAGE", "Fact", "context_text", "fact_kept", "key_terms", "next_call", "transcript_facts"]

COVERAGE = 0.6
MAX_FILES = 10
MAX_TERMS = 8

# Tools that read or change a file, by name, with the argument that names it (Pi, Claude Code, SWE-agent).
_READS = {"read": "path", "Read": "file_path", "NotebookRead": "notebook_path", "open": "path", "view": "path"}
_WRITES = {"write": "path", "edit": "path", "Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path",
           "NotebookEdit": "notebook_path", "create": "filename"}
_EDITOR = "str_replace_editor"  # SWE-agent / OpenHands: {command: view|create|str_replace|insert|undo_edit, path}
_SHELLS = frozenset({"bash", "Bash", "shell", "run", "execute_bash"})
_SHELL_READS = frozenset({"cat", "head", "tail", "less", "open", "nl"})
_SHELL_WRITES = frozenset({"create", "touch"})
_OPEN_FILE_EDITS = frozenset({"edit", "insert", "append"})  # SWE-agent commands on the open file
_BOOKKEEPING = frozenset({"TodoWrite", "TodoRead", "think", "Think", "ExitPlanMode"})
_FILE_HEADER = re.compile(r"^\[File: (\S+) \(\d+ lines total\)\]", re.MULTILINE)

_ERROR_PATTERNS = (
    re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b(?::\s*\S.*)?$"),
    re.compile(r"^(?:- )?[EFW]\d{3}\s+\w+(?:Error|Exception)\b.*$"),
    re.compile(r"^E\s+\w+(?:Error|Exception)\b.*$"),
    re.compile(r"^(?:error|fatal|panic)(?:\[\w+\])?:\s*\S.*$", re.IGNORECASE),
    re.compile(r"^(?:FAILED|FAIL|ERROR)\b.*$"),
    re.compile(r"^npm ERR!.*$"),
    re.compile(r".*(?:command not found|No such file or directory|Permission denied)$"),
)
_LISTING = re.compile(r"^\s*\d+\s*(?:[:|\u2192]|\s{2})")  # a numbered line of a file listing
_CODE_START = ("raise ", "except ", "class ", "def ", "#", "//", "\"", "'", "return ", "assert ")

_WORD = re.compile(r"[A-Za-z_][\w.\-/]*\w|\d{3,}")
_URL = re.compile(r"\b[a-z][a-z+.-]*://\S+")  # links are not how a summary names things
_STOPWORDS = frozenset("""
about above after again against because before being below between could should would their there these
those through during further having itself myself other ourselves themselves under until while which where
whether within without please thanks thank really actually something anything everything nothing maybe
think still right could should first second another always never might other using based going
import return lambda print string number object values result default static public private
""".split())


@dataclass(frozen=True, slots=True)
class Fact:
    """One fact of the transcript and how to find it in a text: any of `probes` (paths), or
    `COVERAGE` of `terms` (texts)."""

    kind: str
    label: str
    value: str
    probes: tuple[str, ...] = ()
    terms: tuple[str, ...] = ()
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "label": self.label, "value": self.value[:300], **self.detail}


def key_terms(text: str, limit: int = MAX_TERMS) -> tuple[str, ...]:
    """The distinctive words of `text`, the most distinctive first (see the module docstring)."""
    strong: list[str] = []
    plain: list[str] = []
    seen: set[str] = set()
    for match in _WORD.finditer(_URL.sub(" ", text)):
        word = match.group(0).strip(".-/")
        low = word.lower()
        if len(word) < 4 or len(word) > 80 or low in seen or low in _STOPWORDS:
            continue
        if any(c in word for c in "_./-") or any(c.isdigit() for c in word) or (
                any(c.isupper() for c in word[1:]) and any(c.islower() for c in word)):
            strong.append(low)
        elif len(word) >= 6 and word.isalpha():
            plain.append(low)
        else:
            continue
        seen.add(low)
    plain.sort(key=len, reverse=True)  # longer words are rarer
    return tuple((strong + plain)[:limit])


def _path_probes(path: str, cwd: str) -> tuple[str, ...]:
    probes = [path]
    if cwd and cwd != "/" and path.startswith(cwd.rstrip("/") + "/"):
        probes.append(path[len(cwd.rstrip("/")) + 1:])
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2:
        probes.append("/".join(parts[-2:]))
    return tuple(dict.fromkeys(p.lower() for p in probes if p))


def fact_kept(fact: Fact, text: str) -> bool:
    """Whether `text` (already lower-cased) holds `fact`."""
    if fact.probes:
        return any(p in text for p in fact.probes)
    if not fact.terms:
        return fact.value.lower() in text
    found = sum(1 for t in fact.terms if t in text)
    return found >= math.ceil(COVERAGE * len(fact.terms))


# -- reading messages ----------------------------------------------------------------------------------




def _arguments_text(arguments: Any) -> str:
    if isinstance(arguments, dict):
        return " ".join(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in arguments.values())
    return ""


def context_text(messages: Iterable[Any]) -> str:
    """The plain text of a context (see the module docstring), lower-cased for matching."""
    parts: list[str] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role in ("user", "toolResult", "custom"):
            parts.append(content_text(message.get("content")))
        elif role == "assistant" and isinstance(message.get("content"), list):
            for block in message["content"]:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text":
                    parts.append(str(block.get("text") or ""))
                elif block.get("type") == "toolCall":
                    parts.append(f"{block.get('name')} {_arguments_text(block.get('arguments'))}")
        elif role in ("compactionSummary", "branchSummary"):
            parts.append(str(message.get("summary") or ""))
        elif role == "bashExecution":
            parts.append(f"{message.get('command') or ''}\n{message.get('output') or ''}")
    return "\n".join(parts).lower()


_WRAPPER = re.compile(r"^<[a-z][a-z0-9-]*>")


def _is_wrapper(text: str) -> bool:
    """What a harness wrote in the user's place: Claude Code's command, task-notification and
    reminder blocks (a message that opens with a `<tag>`), interrupt notes, compaction prefaces."""
    head = text.lstrip()
    return _WRAPPER.match(head) is not None or head.startswith(
        ("[Request interrupted", "Caveat:", "This session is being continued"))


def _error_line(text: str) -> str | None:
    lines = [line.rstrip() for line in text.splitlines()]
    for index, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)"):
            for tail in lines[index + 1:]:  # the exception line closes the traceback
                stripped = tail.strip()
                if stripped and not tail.startswith((" ", "\t")) and any(p.match(stripped) for p in _ERROR_PATTERNS):
                    return stripped[:200]
    found = None
    for line in lines:
        stripped = line.strip()
        if not stripped or _LISTING.match(line) or stripped.startswith(_CODE_START) or len(stripped) > 300:
            continue
        if any(p.match(stripped) for p in _ERROR_PATTERNS):
            found = stripped[:200]
    return found


def _result_error(message: dict[str, Any]) -> str | None:
    text = content_text(message.get("content"))
    line = _error_line(text)
    if line is None and message.get("isError") is True and text.strip():
        line = text.strip().splitlines()[0][:200]
    return line


@dataclass(slots=True)
class _Call:
    name: str
    arguments: dict[str, Any]
    reads: list[str]
    writes: list[str]
    target: str


def _first_string(arguments: dict[str, Any]) -> str:
    for value in arguments.values():
        if isinstance(value, str) and value.strip():
            return value
    return ""


def _shell_words(command: str) -> list[str]:
    return command.strip().splitlines()[0].split() if command.strip() else []


def _classify(name: str, arguments: dict[str, Any], open_file: str | None) -> _Call:
    reads: list[str] = []
    writes: list[str] = []
    if name in _READS and isinstance(arguments.get(_READS[name]), str):
        reads.append(arguments[_READS[name]])
    if name in _WRITES and isinstance(arguments.get(_WRITES[name]), str):
        writes.append(arguments[_WRITES[name]])
    if name == _EDITOR and isinstance(arguments.get("path"), str):
        (reads if arguments.get("command") == "view" else writes).append(arguments["path"])
    if name in _OPEN_FILE_EDITS and not writes and open_file:
        writes.append(open_file)
    command: str = arguments["command"] if isinstance(arguments.get("command"), str) else ""
    if name in _SHELLS and command:
        words = _shell_words(command)
        if words:
            paths = [w for w in words[1:] if not w.startswith("-") and ("/" in w or "." in w)]
            if words[0] in _SHELL_READS:
                reads += paths[:1]
            elif words[0] in _SHELL_WRITES:
                writes += paths[:1]
            elif words[0] in _OPEN_FILE_EDITS and open_file:
                writes.append(open_file)
    path_arg = next((arguments[k] for k in ("path", "file_path", "notebook_path", "filename")
                     if isinstance(arguments.get(k), str) and arguments[k]), None)
    target = path_arg or next(iter(writes + reads), None) or (
        command.strip().splitlines()[0][:160] if command.strip() else _first_string(arguments)[:160])
    return _Call(name, arguments, reads, writes, target)


def _calls(message: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [(str(b.get("id")), str(b.get("name") or ""), b["arguments"] if isinstance(b.get("arguments"), dict)
             else {}) for b in content if isinstance(b, dict) and b.get("type") == "toolCall"]


def _path_key(path: str, cwd: str) -> str:
    return os.path.normpath(os.path.join(cwd or "/", path)) if not path.startswith("/") else os.path.normpath(path)


def next_call(messages: Sequence[Any], open_file: str | None = None) -> tuple[str, str] | None:
    """(tool name, target) of the first real tool call in `messages` (bookkeeping tools skipped);
    `open_file`: the file an editor command without a path works on (SWE-agent's `edit`)."""
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "assistant":
            for _id, name, arguments in _calls(message):
                if name in _BOOKKEEPING:
                    continue
                call = _classify(name, arguments, open_file)
                return name, call.target
    return None


def _text_fact(kind: str, label: str, text: str, **detail: Any) -> Fact | None:
    terms = key_terms(text)
    if len(terms) < 2:
        return None
    return Fact(kind, label, text, terms=terms, detail=detail)


def transcript_facts(before: Sequence[Any], after: Sequence[Any], cwd: str) -> list[Fact]:
    """The facts of the transcript `before` a cut (raw session messages, in order), with the next
    call taken from `after` it."""
    users: list[str] = []
    reads: dict[str, str] = {}
    writes: dict[str, str] = {}
    pending: dict[str, _Call] = {}
    outcomes: list[tuple[tuple[str, str], str | None]] = []  # ((tool, target), error line or None)
    open_file: str | None = None
    for message in before:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "user":
            text = content_text(message.get("content"))
            if text.strip() and not _is_wrapper(text):
                users.append(text)
        elif role == "assistant":
            for call_id, name, arguments in _calls(message):
                pending[call_id] = _classify(name, arguments, open_file)
        elif role == "toolResult":
            call = pending.pop(str(message.get("toolCallId")), None)
            if call is None:
                continue
            error = _result_error(message)
            outcomes.append(((call.name, call.target), error))
            shown = _FILE_HEADER.search(content_text(message.get("content")))
            if shown:
                open_file = shown.group(1)
            if error is None:
                for path in call.reads:
                    reads.pop(_path_key(path, cwd), None)
                    reads[_path_key(path, cwd)] = path
                for path in call.writes:
                    writes.pop(_path_key(path, cwd), None)
                    writes[_path_key(path, cwd)] = path
    facts: list[Fact] = []
    task = next((u for u in users if len(key_terms(u)) >= 2), None)
    if task is not None:
        fact = _text_fact("task", "the task", task)
        if fact:
            facts.append(fact)
    request = next((u for u in reversed(users) if len(key_terms(u)) >= 2), None)
    if request is not None and request is not task:
        fact = _text_fact("request", "the last user request", request)
        if fact:
            facts.append(fact)
    only_read = [(k, p) for k, p in reads.items() if k not in writes]
    for resolved_path, path in only_read[-MAX_FILES:]:
        facts.append(Fact("read", f"read {path}", path, probes=_path_probes(resolved_path, cwd)))
    for resolved_path, path in list(writes.items())[-MAX_FILES:]:
        facts.append(Fact("modified", f"modified {path}", path, probes=_path_probes(resolved_path, cwd)))
    last_error = next(((i, target, e) for i, (target, e) in reversed(list(enumerate(outcomes))) if e), None)
    if last_error is not None:
        index, key, line = last_error
        resolved = any(t == key and e is None for t, e in outcomes[index + 1:])
        fact = _text_fact("error", "the latest error", line, resolved=resolved, tool=key[0])
        if fact:
            facts.append(fact)
    upcoming = next_call(after, open_file)
    if upcoming is not None:
        name, target = upcoming
        if target.startswith("/") or ("/" in target and " " not in target):
            facts.append(Fact("next", f"next call: {name} {target}", target,
                              probes=_path_probes(_path_key(target, cwd), cwd), detail={"tool": name}))
        else:
            fact = _text_fact("next", f"next call: {name} {target[:60]}", target, tool=name)
            if fact:
                facts.append(fact)
    return facts
