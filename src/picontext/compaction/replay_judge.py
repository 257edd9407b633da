"""The replay's judge: probe questions answered from a compacted context, graded 0-5.

Factory's evaluation of context compression asks four kinds of probe questions after a
compaction; their harness is not public, so these are ours, built from the transcript's facts
(replay_facts.py):

* recall: the original task; the user's latest request; the latest error and whether it was
  resolved. Reference: the mechanical facts.
* artifact: which files were modified, which only read. Reference: the mechanical file lists.
* continuation: the next tool call (tool and main argument). Reference: the call the session
  really made next.
* decision: the decisions taken so far, and why. Reference: the last user and assistant text
  before the cut.

The judge model answers all questions in one request whose conversation is the compacted
context, then grades the answers against the references in a second request (one line per
question, `N. score`). Next-action agreement is mechanical: whether the answer to the
continuation question names the real next tool, and its target.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from picontext.compaction.completion import Completion, CompletionOptions
from picontext.compaction.replay_facts import Fact, fact_kept
from picontext.compaction.tokens import estimate_tokens
from picontext.session.convert import convert_to_llm

__all__ = ["KINDS", "judge_context", "probes"]

KINDS = ("recall", "artifact", "continuation", "decision")
ANSWER_TOKENS = 600
GRADE_TOKENS = 120
EXCERPT_CHARS = 4000

ANSWER_SYSTEM = ("You are taking over a coding agent's work from the conversation so far. Answer the numbered "
                 "questions from that conversation only, one short paragraph each, each starting with its number "
                 "(`1. ...`). Call no tools.")
GRADE_SYSTEM = ("You grade answers about a coding session against reference answers. For each numbered question, "
                "score the answer from 0 (wrong, missing or invented) to 5 (complete and correct as the reference "
                "says). Reply with exactly one line per question: `N. score`.")


def _of(facts: Sequence[Fact], kind: str) -> list[Fact]:
    return [f for f in facts if f.kind == kind]


def probes(facts: Sequence[Fact], excerpt: str) -> list[tuple[str, str, str]]:
    """(kind, question, reference answer) for a cut."""
    task = _of(facts, "task")
    request = _of(facts, "request") or task
    error = _of(facts, "error")
    modified = [f.value for f in _of(facts, "modified")]
    read = [f.value for f in _of(facts, "read")]
    upcoming = _of(facts, "next")
    error_ref = "No tool call failed." if not error else (
        f"{error[0].value} ({'resolved later' if error[0].detail.get('resolved') else 'not resolved'})")
    return [
        ("recall", "What was the original task?", task[0].value[:1500] if task else "(no task statement)"),
        ("recall", "What is the user's most recent request?", request[0].value[:1500] if request else "(none)"),
        ("recall", "What was the most recent error, and was it resolved?", error_ref),
        ("artifact", "Which files have been modified so far, and which were only read?",
         f"Modified: {', '.join(modified) or 'none'}. Read: {', '.join(read) or 'none'}."),
        ("continuation", "What is the next tool call you would make? Give the tool name and its main argument "
                         "(a path or a command).",
         f"{upcoming[0].detail.get('tool')} {upcoming[0].value}" if upcoming else "(the session ends here)"),
        ("decision", "What decisions have been taken about how to do the task, and why?",
         f"Judge against the end of the conversation before the cut:\n{excerpt}"),
    ]


def _reply_text(reply: dict[str, Any]) -> str:
    content = reply.get("content")
    if not isinstance(content, list):
        return ""
    return "\n".join(str(b.get("text") or "") for b in content if isinstance(b, dict) and b.get("type") == "text")


def _numbered(text: str) -> dict[int, str]:
    """`N. answer` paragraphs of a reply, by number."""
    out: dict[int, str] = {}
    current: int | None = None
    for line in text.splitlines():
        match = re.match(r"^\s*\**(\d+)\**[.):]\s*(.*)$", line)
        if match:
            current = int(match.group(1))
            out[current] = match.group(2)
        elif current is not None:
            out[current] += "\n" + line
    return out


def _cost(reply: dict[str, Any]) -> float:
    usage: dict[str, Any] = reply["usage"] if isinstance(reply.get("usage"), dict) else {}
    return float((usage.get("cost") or {}).get("total") or 0)


def _agreement(answer: str, upcoming: Fact | None) -> dict[str, Any] | None:
    if upcoming is None:
        return None
    tool = str(upcoming.detail.get("tool") or "")
    named = bool(tool) and re.search(rf"(?<![\w-]){re.escape(tool)}(?![\w-])", answer, re.IGNORECASE) is not None
    return {"tool": named, "target": fact_kept(upcoming, answer.lower()), "real": f"{tool} {upcoming.value}"[:200]}


async def judge_context(completion: Completion, messages: Sequence[Any], facts: Sequence[Fact],
                        excerpt: str) -> dict[str, Any]:
    """Ask the probes of `facts` about the context `messages` (a projection's messages) and grade them."""
    questions = probes(facts, excerpt[-EXCERPT_CHARS:])
    context = [m for m in convert_to_llm(messages) if m.get("role") != "system"]
    ask = "\n".join(f"{i}. {q}" for i, (_kind, q, _ref) in enumerate(questions, 1))
    window = int(getattr(completion, "context_window", 0) or 0)
    needed = sum(estimate_tokens(m) for m in context) + math.ceil(len(ask) / 4) + ANSWER_TOKENS
    if window and needed > window:
        return {"error": f"the context (~{needed:,} tokens with the questions) does not fit the judge's window "
                         f"of {window:,}"}
    options = CompletionOptions()
    reply = await completion(ANSWER_SYSTEM, [*context, {"role": "user", "content": ask, "timestamp": 0}],
                             ANSWER_TOKENS, options)
    if reply.get("stopReason") in ("error", "aborted"):
        return {"error": f"answering failed: {reply.get('errorMessage') or reply.get('stopReason')}"}
    answers = _numbered(_reply_text(reply))
    sheet = "\n\n".join(f"{i}. ({kind}) {q}\nReference: {ref}\nAnswer: {answers.get(i, '(no answer)').strip()}"
                        for i, (kind, q, ref) in enumerate(questions, 1))
    graded = await completion(GRADE_SYSTEM, [{"role": "user", "content": sheet, "timestamp": 0}], GRADE_TOKENS,
                              options)
    cost = _cost(reply) + _cost(graded)
    if graded.get("stopReason") in ("error", "aborted"):
        return {"error": f"grading failed: {graded.get('errorMessage') or graded.get('stopReason')}", "cost": cost}
    scores: dict[int, int] = {}
    for number, text in _numbered(_reply_text(graded)).items():
        found = re.search(r"\d+(?:\.\d+)?", text)
        if found and 1 <= number <= len(questions):
            scores[number] = max(0, min(5, round(float(found.group(0)))))
    by_kind: dict[str, list[int]] = {}
    for number, (kind, _q, _ref) in enumerate(questions, 1):
        if number in scores:
            by_kind.setdefault(kind, []).append(scores[number])
    upcoming = next((f for f in facts if f.kind == "next"), None)
    return {
        "scores": {kind: round(sum(v) / len(v), 2) for kind, v in by_kind.items()},
        "mean": round(sum(scores.values()) / len(scores), 2) if scores else None,
        "graded": len(scores), "questions": len(questions),
        "nextAction": _agreement(answers.get(1 + [k for k, _q, _r in questions].index("continuation"), ""), upcoming),
        "cost": cost,
    }
