"""Offline evaluation of compaction strategies: do planted facts survive? (issue 3 §8)

Each scripted session starts with one user request that plants facts (the request itself, two
modified files, two quoted error messages), then the agent keeps working on its own: rounds of
file reads with large outputs. After every round the session is compacted with the strategy
under test, using a scripted model that writes *poor* summaries (generic text that mentions
nothing from the transcript). At the end we check which facts the model would still see: the
serialized text of the final context.

No network and no real model: the numbers are reproducible and measure what the machinery
(cut points, file lists, ledger, masking) preserves on its own.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from picontext.ai.types import empty_usage
from picontext.compaction.compact import compact_session, estimated_tokens
from picontext.compaction.completion import ScriptedCompletion
from picontext.compaction.serialize import serialize_messages
from picontext.compaction.settings import CompactionSettings
from picontext.errors import NothingToCompact
from picontext.session.manager import SessionManager

__all__ = ["EVAL_STRATEGIES", "PLANTED_FACTS", "StrategyScore", "evaluate_compaction", "poor_summary"]

EVAL_STRATEGIES: tuple[str, ...] = ("summary-no-ledger", "summary", "mask", "mask-then-summary")
"""`summary-no-ledger` is Pi's behaviour (no verified-facts ledger); the others are ours."""

REQUEST = ("Rename `load_cfg` to `load_config` in app/settings.py, keep `load_cfg` as a deprecated alias, "
           "and add a changelog line to docs/CHANGES.md")
PLANTED_FACTS: dict[str, str] = {
    "last user request": REQUEST,
    "modified file app/settings.py": "app/settings.py",
    "modified file docs/CHANGES.md": "docs/CHANGES.md",
    "error from a failed tool": "ImportError: cannot import name 'load_cfg' from 'app.settings'",
    "error quoted in output": "TypeError: load_config() got an unexpected keyword argument 'path'",
}


def poor_summary(_request: Any) -> str:
    """What a careless summarizer writes: the headings, and nothing from the transcript."""
    return ("## Goal\nContinue the current task.\n\n## Constraints & Preferences\n- (none)\n\n## Progress\n"
            "### Done\n- [x] Some work\n\n## Next Steps\n1. Keep going.\n\n## Critical Context\n- (none)")


@dataclass(slots=True)
class StrategyScore:
    strategy: str
    survived: int = 0
    total: int = 0
    lost: dict[str, int] = field(default_factory=dict)
    compactions: int = 0
    final_tokens: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "survived": self.survived, "total": self.total,
                "lost": self.lost, "compactions": self.compactions, "finalTokens": self.final_tokens}


_ids = iter(range(1, 1 << 30))


def _assistant(*calls: tuple[str, dict[str, Any]], text: str = "") -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "toolCall", "id": f"call_{next(_ids)}", "name": n, "arguments": a} for n, a in calls]
    return {"role": "assistant", "content": content, "api": "scripted", "provider": "scripted", "model": "scripted",
            "usage": empty_usage(), "stopReason": "toolUse" if calls else "stop", "timestamp": 0}


def _result(call: dict[str, Any], text: str, error: bool = False) -> dict[str, Any]:
    block = call["content"][-1]
    return {"role": "toolResult", "toolCallId": block["id"], "toolName": block["name"],
            "content": [{"type": "text", "text": text}], "isError": error, "timestamp": 0}


def _plant(manager: SessionManager) -> None:
    manager.append_message({"role": "user", "content": REQUEST, "timestamp": 0})
    for message in _turn(("edit", {"path": "app/settings.py", "oldText": "def load_cfg", "newText": "def load_config"}),
                         "Successfully replaced text in app/settings.py."):
        manager.append_message(message)
    for message in _turn(("bash", {"command": "pytest -q"}),
                         "E   " + PLANTED_FACTS["error from a failed tool"] + "\n1 failed", error=True):
        manager.append_message(message)
    for message in _turn(("write", {"path": "docs/CHANGES.md", "content": "- load_cfg renamed"}), "Wrote 1 line."):
        manager.append_message(message)
    for message in _turn(("bash", {"command": "python -m app"}),
                         "Traceback (most recent call last):\n  File \"app/__main__.py\", line 3\n"
                         + PLANTED_FACTS["error quoted in output"]):
        manager.append_message(message)


def _turn(call: tuple[str, dict[str, Any]], output: str, error: bool = False) -> list[dict[str, Any]]:
    message = _assistant(call)
    return [message, _result(message, output, error)]


def _filler(manager: SessionManager, rng: random.Random, size: int) -> None:
    for _ in range(3):
        path = f"app/module_{rng.randrange(1000)}.py"
        for message in _turn(("read", {"path": path}), f"# {path}\n" + "def f():\n    return 1\n" * (size // 24)):
            manager.append_message(message)
    manager.append_message(_assistant(text="Reviewed three more modules; continuing."))


def _visible(manager: SessionManager) -> str:
    return " ".join(serialize_messages(manager.build_session_projection().messages).split())


async def _run_one(strategy: str, seed: int, rounds: int, settings: CompactionSettings) -> tuple[list[str], int, int]:
    rng = random.Random(seed)
    manager = SessionManager.in_memory("/eval", entries=None)
    _plant(manager)
    model = ScriptedCompletion(default=poor_summary, context_window=12_000)
    run_strategy = "summary" if strategy == "summary-no-ledger" else strategy
    compactions = 0
    for _ in range(rounds):
        _filler(manager, rng, rng.choice([3000, 6000, 9000]))
        try:
            outcome = await compact_session(manager, strategy=run_strategy, completion=model, settings=settings,
                                            verify=strategy != "summary-no-ledger")
        except NothingToCompact:
            continue
        compactions += outcome.summary is not None or outcome.masked > 0
    visible = _visible(manager)
    lost = [name for name, fact in PLANTED_FACTS.items() if " ".join(fact.split()) not in visible]
    return lost, compactions, estimated_tokens(manager)


async def evaluate_compaction(
    *, rounds: int = 10, sessions: int = 3, strategies: tuple[str, ...] = EVAL_STRATEGIES,
    settings: CompactionSettings | None = None,
) -> list[StrategyScore]:
    """Run every strategy on `sessions` scripted sessions of `rounds` compactions each."""
    settings = settings or CompactionSettings(reserve_tokens=2000, keep_recent_tokens=3000)
    scores = []
    for strategy in strategies:
        score = StrategyScore(strategy)
        for seed in range(sessions):
            lost, compactions, tokens = await _run_one(strategy, seed, rounds, settings)
            score.total += len(PLANTED_FACTS)
            score.survived += len(PLANTED_FACTS) - len(lost)
            score.compactions += compactions
            score.final_tokens.append(tokens)
            for name in lost:
                score.lost[name] = score.lost.get(name, 0) + 1
        scores.append(score)
    return scores
