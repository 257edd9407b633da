"""The verified-summary ledger (issue 3 §5a): facts a summary must not lose, checked without a model.

After the model writes a summary, `verify_summary` compares it with what was summarized:

* every modified file (the cumulative list of the preparation),
* the last user request, verbatim (its beginning when it is longer than the summary budget),
* each error message quoted in the span (failed tool results, `...Error: ...` lines),

and puts whatever the summary text does not contain into a machine-built `<verified-facts>`
block. The block is plain text, so Pi and any other reader still see it as part of the summary.

Facts are carried across compactions: the previous compaction's `details.verifiedFacts` (or,
for files written by other tools, the `<verified-facts>` block of the previous summary) seeds
the next check, so a planted fact survives any number of poor summaries. The newest user
request replaces the older one; errors keep the newest `MAX_ERRORS`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from picontext.session.convert import convert_to_llm

__all__ = [
    "MAX_ERRORS",
    "MAX_ERROR_CHARS",
    "VerifiedFacts",
    "extract_facts",
    "format_ledger",
    "parse_ledger",
    "strip_machine_blocks",
    "verify_summary",
]

MAX_ERRORS = 20
MAX_ERROR_CHARS = 300
LEDGER_OPEN = "<verified-facts>"
LEDGER_CLOSE = "</verified-facts>"
_LEDGER_NOTE = "Checked by picontext against the transcript; the notes above did not state these."

# A line that quotes an error: `TypeError: x is undefined`, `error[E0308]: mismatched types`,
# `FAILED tests/test_a.py::test_x - AssertionError`, `fatal: not a git repository`, `panic: ...`.
_ERROR_LINE = re.compile(
    r"(?:\b[A-Z][A-Za-z0-9_.]*(?:Error|Exception)\b(?:\[[^\]]*\])?:\s*\S"
    r"|^\s*(?:error|fatal|panic|FAILED|FAIL|ERROR|Error)(?:\[[^\]]*\])?[:!\s]\s*\S)"
)
_MACHINE_BLOCK = re.compile(
    r"\n*<(verified-facts|read-files|modified-files)>\n.*?\n</\1>", re.DOTALL
)


@dataclass(slots=True)
class VerifiedFacts:
    """What must survive: the last user request, modified files, quoted error messages."""

    last_user_request: str | None = None
    modified_files: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"lastUserRequest": self.last_user_request, "errors": list(self.errors)}

    @classmethod
    def from_json(cls, value: Any) -> VerifiedFacts:
        if not isinstance(value, dict):
            return cls()
        request = value.get("lastUserRequest")
        errors = value.get("errors")
        return cls(
            last_user_request=request if isinstance(request, str) and request else None,
            errors=[e for e in errors if isinstance(e, str)] if isinstance(errors, list) else [],
        )


def _user_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
                       and isinstance(b.get("text"), str))
    return ""


def _error_lines(text: str) -> Iterable[str]:
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and len(stripped) <= MAX_ERROR_CHARS and _ERROR_LINE.search(stripped):
            yield stripped


def _add_error(errors: list[str], error: str) -> None:
    if error in errors:
        errors.remove(error)
    errors.append(error)


def extract_facts(messages: Sequence[Any], seed: VerifiedFacts | None = None) -> VerifiedFacts:
    """Facts of `messages` (session messages, any role) on top of `seed` (the earlier ones)."""
    facts = VerifiedFacts(
        seed.last_user_request if seed else None, list(seed.modified_files) if seed else [],
        list(seed.errors) if seed else [],
    )
    raw_users = {id(m) for m in messages if isinstance(m, dict) and m.get("role") == "user"}
    for message in convert_to_llm(messages):
        role = message.get("role")
        if role == "toolResult":
            text = _user_text(message)
            lines = list(_error_lines(text))
            if message.get("isError") and not lines and text.strip():
                lines = [text.strip().splitlines()[0][:MAX_ERROR_CHARS]]
            for line in lines:
                _add_error(facts.errors, line)
        elif role == "user" and id(message) in raw_users:  # typed by the user, not a converted wrapper
            text = _user_text(message)
            if text.strip():
                facts.last_user_request = text
    del facts.errors[:-MAX_ERRORS]
    return facts


def strip_machine_blocks(text: str) -> str:
    """`text` without ledger and file-list blocks (they are rebuilt, never trusted from a model)."""
    return _MACHINE_BLOCK.sub("", text)


def _normalize(text: str) -> str:
    return " ".join(text.split())


def format_ledger(missing: VerifiedFacts, *, max_request_chars: int | None = None) -> str:
    """The `<verified-facts>` block for the facts in `missing`, or "" when nothing is missing.

    A last user request longer than `max_request_chars` is quoted by its beginning, and the
    heading says how much of it is shown: a pasted log must not make the summary as large as
    the context it replaces (the full text stays in `details.verifiedFacts`).
    """
    lines: list[str] = []
    request = missing.last_user_request
    if request:
        if max_request_chars is not None and len(request) > max_request_chars:
            lines.append(f"Last user request (verbatim, its first {max_request_chars:,} of {len(request):,} "
                         "characters):")
            request = request[:max_request_chars]
        else:
            lines.append("Last user request (verbatim):")
        lines.extend("> " + line for line in request.split("\n"))
    if missing.modified_files:
        lines.append("Modified files:")
        lines.extend("- " + path for path in missing.modified_files)
    if missing.errors:
        lines.append("Error messages:")
        lines.extend("- " + error for error in missing.errors)
    if not lines:
        return ""
    return "\n\n" + "\n".join([LEDGER_OPEN, _LEDGER_NOTE, *lines, LEDGER_CLOSE])


def parse_ledger(summary: str | None) -> VerifiedFacts:
    """The facts of the last `<verified-facts>` block of a summary (empty when there is none)."""
    facts = VerifiedFacts()
    if not summary:
        return facts
    start = summary.rfind(LEDGER_OPEN)
    end = summary.find(LEDGER_CLOSE, start)
    if start < 0 or end < 0:
        return facts
    section = None
    request: list[str] = []
    for line in summary[start + len(LEDGER_OPEN): end].strip("\n").split("\n"):
        if line.endswith(":") and not line.startswith(("- ", "> ")):
            section = line
        elif section and section.startswith("Last user request") and line.startswith("> "):
            request.append(line[2:])
        elif section == "Modified files:" and line.startswith("- "):
            facts.modified_files.append(line[2:])
        elif section == "Error messages:" and line.startswith("- "):
            facts.errors.append(line[2:])
    facts.last_user_request = "\n".join(request) if request else None
    return facts


def verify_summary(text: str, facts: VerifiedFacts, *, max_request_chars: int | None = None
                   ) -> tuple[str, VerifiedFacts]:
    """`text` plus a ledger of the facts it misses; also returns those missing facts.

    A fact counts as stated when it occurs in `text` (whitespace-normalised), outside any
    machine-built block. `max_request_chars` bounds the quoted request (`format_ledger`).
    """
    body = _normalize(strip_machine_blocks(text))
    missing = VerifiedFacts()
    request = facts.last_user_request
    if request and _normalize(request) not in body:
        missing.last_user_request = request
    missing.modified_files = [p for p in facts.modified_files if p not in body]
    missing.errors = [e for e in facts.errors if _normalize(e) not in body]
    return text + format_ledger(missing, max_request_chars=max_request_chars), missing
