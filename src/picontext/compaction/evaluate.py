"""Evaluation of compaction strategies: which facts can still be answered after compacting? (issue 10 §5)

Each seeded session is a small coding task with several user turns. Facts of seven kinds are
planted where they occur in real work, each next to a distractor of the same shape:

| kind | planted in | distractor | in the verified-facts ledger? |
|---|---|---|---|
| request    | the last user turn ("now add it to /refunds") | the first request (/invoices) | yes |
| file       | `edit` / `write` tool calls | files only read | yes |
| error      | a failing test run's output | - | yes |
| constraint | the first user turn ("never modify migrations/") | - | no |
| decision   | a later user turn ("go with the token bucket, not the sliding window") | the rejected option | no |
| number     | tool output (`listen_port = 8437`, `p99 latency 312 ms`) | `metrics_port`, p50 | no |
| name       | tool output (the function in use) | its legacy twin | no |

Then the agent keeps working: rounds of large file reads, each followed by a compaction with the
strategy under test. At the end every fact is *probed*: a question is asked of what the model
would see (the projected context).

* Offline (default), a deterministic reader answers: for each question it looks for the fact's
  cue words in the context and takes the candidate value (the answer or its distractor) that
  follows a cue most closely. A fact whose value survives without its cue, or only beside the
  wrong cue, is not answered.
* Live (`model=` a catalog model, `picontext eval compaction --model provider/id`), that model
  writes the summaries and answers the numbered questions itself (one request per session),
  from the compacted context; an answer line counts when it holds the value and not the
  distractor.

Summarizers of several qualities (offline): `generic` writes the prompt's headings and nothing
from the transcript (the floor); `extractive` follows the prompt: it copies the user's requests,
constraints and decisions, the files changed, error lines and short `key = value` / `def` lines
from tool output into the sections, merges the previous summary and stays within the token
budget (the strongest honest scripted summarizer). A `none` row (no compaction) is the ceiling.
Every row reports facts answered, per kind, and the context size after the last compaction.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from picontext.ai.types import empty_usage
from picontext.compaction.compact import compact_session, estimated_tokens
from picontext.compaction.completion import Completion, CompletionRequest, ScriptedCompletion
from picontext.compaction.serialize import serialize_messages
from picontext.compaction.settings import CompactionSettings
from picontext.compaction.strategies import EVAL_STRATEGIES, SUMMARIZERS
from picontext.errors import CompactionError, NothingToCompact
from picontext.session.manager import SessionManager

__all__ = [
    "EVAL_STRATEGIES",
    "FACT_KINDS",
    "LEDGER_KINDS",
    "SUMMARIZERS",
    "Fact",
    "RowScore",
    "evaluate_compaction",
    "extractive_summary",
    "generic_summary",
    "read_answer",
]

FACT_KINDS: tuple[str, ...] = ("request", "file", "error", "constraint", "decision", "number", "name")
LEDGER_KINDS = frozenset({"request", "file", "error"})


@dataclass(frozen=True, slots=True)
class Fact:
    """One planted fact and its probe: `question`, the expected `answer`, the `cues` that tie
    the answer to the question in a text, and a `distractor` of the same shape (or None)."""

    name: str
    kind: str
    question: str
    answer: str
    cues: tuple[str, ...]
    distractor: str | None = None


# -- the scripted session ----------------------------------------------------------------------------------

_ids = iter(range(1, 1 << 30))


def _assistant(*calls: tuple[str, dict[str, Any]], text: str = "") -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "toolCall", "id": f"call_{next(_ids)}", "name": n, "arguments": a} for n, a in calls]
    return {"role": "assistant", "content": content, "api": "scripted", "provider": "scripted", "model": "scripted",
            "usage": empty_usage(), "stopReason": "toolUse" if calls else "stop", "timestamp": 0}


def _turn(manager: SessionManager, call: tuple[str, dict[str, Any]], output: str, error: bool = False) -> None:
    message = _assistant(call)
    block = message["content"][-1]
    manager.append_message(message)
    manager.append_message({"role": "toolResult", "toolCallId": block["id"], "toolName": block["name"],
                            "content": [{"type": "text", "text": output}], "isError": error, "timestamp": 0})


def _user(manager: SessionManager, text: str) -> None:
    manager.append_message({"role": "user", "content": text, "timestamp": 0})


@dataclass(slots=True)
class _Plan:
    facts: list[Fact]
    plant: Callable[[SessionManager], None]
    late_request: Callable[[SessionManager], None]


def _plan(seed: int) -> _Plan:
    rng = random.Random(seed)
    port = rng.randrange(8100, 8900)
    metrics_port = port + rng.randrange(7, 90)
    base = rng.choice(["reconcile_invoices", "settle_ledger", "apply_credits", "post_refunds"])
    fn, legacy = f"{base}_v{rng.randrange(2, 9)}", f"{base}_legacy"
    p50, p99 = rng.randrange(20, 90), rng.randrange(150, 480)
    chosen, other = rng.sample(["token bucket", "sliding window"], 2)
    protected = rng.choice(["migrations/", "vendor/", "infra/terraform/"])
    module = rng.choice(["limits_backend", "redis_limiter", "throttle_store"])
    error = f"ModuleNotFoundError: No module named '{module}'"
    facts = [
        Fact("latest request", "request", "What is the user's most recent request?", "/refunds",
             ("/refunds",), "/invoices"),
        Fact("modified app/limits.py", "file", "Which files were modified?", "app/limits.py", ("app/limits.py",)),
        Fact("modified docs/RATE_LIMITS.md", "file", "Which files were modified?", "docs/RATE_LIMITS.md",
             ("docs/RATE_LIMITS.md",)),
        Fact("test error", "error", "What error did the test run fail with?", f"No module named '{module}'",
             ("ModuleNotFoundError",)),
        Fact("protected directory", "constraint", "Which directory must never be modified?", protected,
             ("never modify", "never touch", "must not", "do not modify", "never")),
        Fact("chosen algorithm", "decision", "Which rate-limiting algorithm did the user choose?", chosen,
             ("go with", "chose", "chosen", "decided", "decision"), other),
        Fact("listen port", "number", "Which port does the billing API listen on?", str(port),
             ("listen_port", "listens on", "listen port"), str(metrics_port)),
        Fact("p99 latency", "number", "What p99 latency did the benchmark report (ms)?", str(p99),
             ("p99",), str(p50)),
        Fact("function in use", "name", "What is the reconciliation function in use called?", fn,
             ("in use", "def "), legacy),
    ]

    def plant(manager: SessionManager) -> None:
        _user(manager, f"Add rate limiting to the billing API's /invoices endpoint. Never modify anything under "
                       f"{protected}: that code belongs to another team.")
        _turn(manager, ("read", {"path": "config/billing.toml"}),
              f"[server]\nlisten_port = {port}\nworkers = 4\n\n[metrics]\nmetrics_port = {metrics_port}\n")
        _turn(manager, ("bash", {"command": "grep -n 'def ' app/billing.py"}),
              f"12:def {fn}(batch):  # in use\n88:def {legacy}(batch):  # unused since 2023\n")
        _turn(manager, ("bash", {"command": "pytest -q tests/test_limits.py"}), f"E   {error}\n1 failed", error=True)
        _turn(manager, ("edit", {"path": "app/limits.py", "oldText": "pass", "newText": "limiter = Limiter()"}),
              "Successfully replaced text in app/limits.py.")
        manager.append_message(_assistant(text=f"Two options: a {other} or a {chosen}. Which one?"))
        _user(manager, f"Go with the {chosen}, not the {other}. That is decided.")
        _turn(manager, ("write", {"path": "docs/RATE_LIMITS.md", "content": f"# Rate limits\nAlgorithm: {chosen}\n"}),
              "Wrote 2 lines.")
        _turn(manager, ("bash", {"command": "python bench.py"}), f"p50 latency {p50} ms\np99 latency {p99} ms\n")

    def late_request(manager: SessionManager) -> None:
        _user(manager, "Now add the same limiter to the /refunds endpoint as well.")

    return _Plan(facts, plant, late_request)


def _filler(manager: SessionManager, rng: random.Random, chars: int) -> None:
    for _ in range(3):
        path = f"app/module_{rng.randrange(1000)}.py"
        body = "".join(f"def helper_{rng.randrange(10_000)}(x):\n    return x + {rng.randrange(100)}\n"
                       for _ in range(max(1, chars // 3 // 40)))
        _turn(manager, ("read", {"path": path}), f"# {path}\n{body}")
    manager.append_message(_assistant(text="Reviewed three more modules; continuing."))


# -- summarizers of several qualities ----------------------------------------------------------------------


def generic_summary(_request: CompletionRequest) -> str:
    """The floor: the prompt's headings, nothing from the transcript."""
    return ("## Goal\nContinue the current task.\n\n## Constraints & Preferences\n- (none)\n\n## Progress\n"
            "### Done\n- [x] Some work\n\n## Next Steps\n1. Keep going.\n\n## Critical Context\n- (none)")


_BLOCK = re.compile(r"<(conversation|previous-summary)>\n(.*?)\n</\1>", re.DOTALL)
_PART = re.compile(r"^\[(User|Assistant|Assistant tool calls|Assistant thinking|Tool result)\]: ", re.MULTILINE)
_CONSTRAINT = re.compile(r"\b(never|must|always|don't|do not)\b", re.IGNORECASE)
_DECISION = re.compile(r"\b(go with|decided|chose|we will use|use the)\b", re.IGNORECASE)
_KEY_LINE = re.compile(r"^\s*(?:\S+\s*=\s*\S+|\d+:def \w+.*|[\w ]+ \d+(?:\.\d+)? ?\w*)\s*$")
_ERROR_LINE = re.compile(r"\b\w*(?:Error|Exception)\b:")
_CHANGED = re.compile(r"\b(?:edit|write)\(path=\"([^\"]+)\"")


def _parts(conversation: str) -> list[tuple[str, str]]:
    marks = list(_PART.finditer(conversation))
    return [(m.group(1), conversation[m.end(): marks[i + 1].start() if i + 1 < len(marks) else None].strip())
            for i, m in enumerate(marks)]


def extractive_summary(request: CompletionRequest) -> str:
    """The strongest honest scripted summarizer: it follows the prompt (see the module docstring)."""
    text = "\n".join(m["content"] if isinstance(m["content"], str) else
                     "".join(b.get("text", "") for b in m["content"]) for m in request.messages)
    blocks = {name: body for name, body in _BLOCK.findall(text)}
    previous = blocks.get("previous-summary", "")
    sections: dict[str, list[str]] = {s: [] for s in ("User requests", "Constraints & Preferences", "Decisions",
                                                      "Files changed", "Errors", "Key values")}
    current = None
    for line in previous.splitlines():  # merge: keep what the previous summary kept
        if line.startswith("## "):
            current = line[3:].strip()
        elif line.startswith("- ") and current in sections:
            sections[current].append(line[2:])
    for role, body in _parts(blocks.get("conversation", "")):
        if role == "User":
            sections["User requests"].append(" ".join(body.split()))
            for sentence in re.split(r"(?<=[.!?])\s+", body):
                if _CONSTRAINT.search(sentence):
                    sections["Constraints & Preferences"].append(sentence.strip())
                if _DECISION.search(sentence):
                    sections["Decisions"].append(sentence.strip())
        elif role == "Assistant tool calls":
            sections["Files changed"] += _CHANGED.findall(body)
        elif role == "Tool result":
            for line in body.splitlines():
                if _ERROR_LINE.search(line):
                    sections["Errors"].append(line.strip().removeprefix("E").strip())
                elif _KEY_LINE.match(line) and len(line) < 90 and not line.strip().startswith("def helper_"):
                    sections["Key values"].append(line.strip())
    budget = max(200, request.max_tokens * 4)
    return _render(sections, budget)


def _render(sections: dict[str, list[str]], budget: int) -> str:
    for name in sections:
        seen: dict[str, None] = {}
        for item in sections[name]:
            seen.setdefault(item, None)
        sections[name] = list(seen)
    sections["User requests"] = sections["User requests"][-4:]

    def text() -> str:
        return "\n\n".join(f"## {name}\n" + "\n".join(f"- {item}" for item in items)
                           for name, items in sections.items() if items)

    out = text()
    while len(out) > budget:  # over budget: drop the oldest key values, then the oldest requests
        victim = next((n for n in ("Key values", "User requests", "Errors") if len(sections[n]) > 1), None)
        if victim is None:
            return out[:budget]
        sections[victim].pop(0)
        out = text()
    return out


# -- probing -------------------------------------------------------------------------------------------------


def read_answer(context: str, fact: Fact, window: int = 160) -> str | None:
    """The offline reader: the candidate (answer or distractor) that follows a cue most closely
    within `window` characters, or None when no cue is followed by either."""
    lower = context.lower()
    candidates = [c for c in (fact.answer, fact.distractor) if c]
    best: tuple[int, str] | None = None
    for cue in fact.cues:
        start = lower.find(cue.lower())
        while start != -1:
            for candidate in candidates:
                at = lower.find(candidate.lower(), start, start + len(cue) + window)
                if at != -1 and (best is None or at - start < best[0]):
                    best = (at - start, candidate)
            start = lower.find(cue.lower(), start + 1)
    return best[1] if best else None


def _context_text(manager: SessionManager) -> str:
    return serialize_messages(manager.build_session_projection().messages)


def _model_correct(reply: str, fact: Fact) -> bool:
    text = reply.lower()
    return fact.answer.lower() in text and not (fact.distractor and fact.distractor.lower() in text)


async def _ask_model(completion: Completion, manager: SessionManager, facts: Sequence[Fact]) -> list[bool]:
    """Live probes: the numbered questions in one request, the compacted context as the
    conversation (one request, so a slow model is asked once per session)."""
    from picontext.compaction.completion import CompletionOptions
    from picontext.session.convert import convert_to_llm

    system = "Answer the user's numbered questions from the conversation so far: one line each, '1. answer'."
    context = [m for m in convert_to_llm(manager.build_session_projection().messages) if m.get("role") != "system"]
    questions = "\n".join(f"{i}. {fact.question}" for i, fact in enumerate(facts, 1))
    reply = await completion(system, [*context, {"role": "user", "content": questions, "timestamp": 0}],
                             12 * len(facts), CompletionOptions())
    if reply.get("stopReason") == "error":
        return [False] * len(facts)
    text = "".join(b.get("text", "") for b in reply.get("content") or [] if b.get("type") == "text")
    lines = {int(m.group(1)): m.group(2) for m in re.finditer(r"^\s*(\d+)[.)]\s*(.*)$", text, re.MULTILINE)}
    return [_model_correct(lines.get(i, ""), fact) for i, fact in enumerate(facts, 1)]


# -- the evaluation ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class RowScore:
    """One strategy x summarizer: facts answered (per kind), compactions, tokens after."""

    strategy: str
    summarizer: str
    answered: int = 0
    total: int = 0
    by_kind: dict[str, list[int]] = field(default_factory=dict)
    """kind -> [answered, total]"""
    lost: dict[str, int] = field(default_factory=dict)
    compactions: int = 0
    tokens_after: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.strategy if self.strategy in ("none", "mask") else f"{self.strategy} / {self.summarizer}"

    def to_json(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "summarizer": self.summarizer, "answered": self.answered,
                "total": self.total, "byKind": {k: {"answered": v[0], "total": v[1]} for k, v in self.by_kind.items()},
                "lost": self.lost, "compactions": self.compactions, "tokensAfter": self.tokens_after,
                "failures": self.failures}


def _settings_for(window: int) -> CompactionSettings:
    return CompactionSettings(reserve_tokens=max(256, window // 6), keep_recent_tokens=max(256, window // 4))


async def _run_one(
    strategy: str, summarizer: Completion | None, seed: int, rounds: int, window: int,
    settings: CompactionSettings, live: Completion | None,
) -> tuple[list[bool], list[Fact], int, int, str | None]:
    plan = _plan(seed)
    rng = random.Random(seed * 7919 + 1)
    manager = SessionManager.in_memory("/eval", entries=None)
    plan.plant(manager)
    compactions = 0
    failure = None
    for round_number in range(rounds):
        if round_number == rounds // 2:
            plan.late_request(manager)
        _filler(manager, rng, window)
        if strategy == "none":
            continue
        run_strategy = "summary" if strategy == "summary-no-ledger" else strategy
        try:
            outcome = await compact_session(manager, strategy=run_strategy, completion=summarizer, settings=settings,
                                            verify=strategy != "summary-no-ledger")
        except NothingToCompact:
            continue
        except CompactionError as exc:  # a live model's unusable summary: counted, not fatal
            failure = str(exc).splitlines()[0]
            continue
        compactions += outcome.summary is not None or outcome.masked > 0
    if rounds == 0:
        plan.late_request(manager)
    if live is not None:
        answers = await _ask_model(live, manager, plan.facts)
    else:
        text = _context_text(manager)
        answers = [read_answer(text, fact) == fact.answer for fact in plan.facts]
    return answers, plan.facts, compactions, estimated_tokens(manager), failure


async def evaluate_compaction(
    *,
    rounds: int = 6,
    sessions: int = 3,
    strategies: Sequence[str] = EVAL_STRATEGIES,
    summarizers: Sequence[str] = SUMMARIZERS,
    model: Completion | None = None,
    window: int = 12_000,
) -> list[RowScore]:
    """Every strategy with every summarizer on `sessions` seeded sessions of `rounds` rounds.

    With `model` (live), that model summarizes and answers the probes; `summarizers` is ignored
    and `window` is the model's context window.
    """
    if model is not None:
        window = model.context_window or window
    settings = _settings_for(window)
    rows: list[RowScore] = []
    for strategy in strategies:
        kinds = ["live"] if model is not None else list(summarizers)
        if strategy in ("none", "mask"):
            kinds = kinds[:1]
        for kind in kinds:
            row = RowScore(strategy, kind)
            for seed in range(sessions):
                summarizer = model if model is not None else ScriptedCompletion(
                    default=extractive_summary if kind == "extractive" else generic_summary, context_window=window)
                answers, facts, compactions, tokens, failure = await _run_one(
                    strategy, summarizer, seed, rounds, window, settings, model)
                row.compactions += compactions
                row.tokens_after.append(tokens)
                if failure:
                    row.failures.append(failure)
                for ok, fact in zip(answers, facts, strict=True):
                    row.total += 1
                    row.answered += ok
                    tally = row.by_kind.setdefault(fact.kind, [0, 0])
                    tally[0] += ok
                    tally[1] += 1
                    if not ok:
                        row.lost[fact.name] = row.lost.get(fact.name, 0) + 1
            rows.append(row)
    return rows
