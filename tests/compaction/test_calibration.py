"""Token calibration: the per-model ratio of reported to chars/4 tokens, bounded, used for the trailing part."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from picontext.compaction.calibration import (
    MAX_RATIO,
    MIN_RATIO,
    accuracy,
    calibrated_projected_tokens,
    learn_ratio,
    samples,
    summarize_accuracy,
)
from picontext.compaction.tokens import estimate_projected_context_tokens
from picontext.session.manager import SessionManager


def user(chars: int) -> dict[str, Any]:
    return {"role": "user", "content": "7" * chars, "timestamp": 1}


def assistant(chars: int, reported: int, model: str = "m") -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": "8" * chars}], "provider": "p", "model": model,
            "usage": {"input": reported - 10, "output": 10, "cacheRead": 0, "cacheWrite": 0, "totalTokens": reported},
            "stopReason": "stop", "timestamp": 2}


def conversation(ratio: float, turns: int, model: str = "m", start: int = 1000) -> list[dict[str, Any]]:
    """Each turn adds 400 + 400 chars (200 estimated tokens) that the provider counts as `ratio` x 200."""
    messages: list[dict[str, Any]] = [user(400), assistant(400, start, model)]
    reported = start
    for _ in range(turns):
        reported += round(200 * ratio)
        messages += [user(400), assistant(400, reported, model)]
    return messages


def test_ratio_is_learned_from_consecutive_reports() -> None:
    messages = conversation(1.5, 6)
    history = samples(messages)
    assert len(history) == 6 and all(s.estimated == 200 and s.reported_delta == 300 for s in history)
    assert learn_ratio(history, "p/m") == 1.5
    assert learn_ratio(history, "p/other") == 1.0  # no sample of that model: Pi's estimate


def test_ratio_is_bounded_and_small_samples_are_ignored() -> None:
    assert learn_ratio(samples(conversation(40.0, 3)), "p/m") == MAX_RATIO
    assert learn_ratio(samples(conversation(0.01, 3)), "p/m") == MIN_RATIO
    tiny = [user(4), assistant(4, 1000), user(4), assistant(4, 1500)]  # 2 estimated tokens: noise
    assert learn_ratio(samples(tiny), "p/m") == 1.0


def test_a_model_change_starts_no_sample_across_models() -> None:
    messages = conversation(2.0, 3, "a") + conversation(0.5, 3, "b", start=5000)
    history = samples(messages)
    assert {s.model for s in history} == {"p/a", "p/b"} and len(history) == 6
    assert learn_ratio(history, "p/a") == 2.0 and learn_ratio(history, "p/b") == 0.5


def test_accuracy_never_uses_a_sample_to_predict_itself() -> None:
    rows = accuracy(conversation(1.5, 5))
    assert rows[0]["calibrated"] == rows[0]["estimate"] == 1200 and rows[0]["reported"] == 1300
    assert all(r["calibratedError"] == 0.0 for r in rows[1:])
    assert all(r["error"] < 0 for r in rows)
    summary = summarize_accuracy(rows)
    assert summary["samples"] == 5 and summary["calibratedWithin"] == 5


def test_calibrated_projection_scales_only_the_trailing_part(tmp_path: Path) -> None:
    manager = SessionManager.in_memory(str(tmp_path))
    for message in [*conversation(2.0, 4), user(4000)]:
        manager.append_message(message)
    projection = manager.build_session_projection()
    plain = estimate_projected_context_tokens(projection, manager.get_branch())
    calibrated = calibrated_projected_tokens(projection, manager.get_branch(), "p/m")
    assert plain["usageTokens"] == calibrated["usageTokens"] == 2600
    assert (plain["trailingTokens"], calibrated["trailingTokens"]) == (1000, 2000)
    assert calibrated["tokens"] == 4600
    assert calibrated_projected_tokens(projection, manager.get_branch(), "p/unknown") == plain


def test_tokens_cli_shows_estimate_vs_reported(tmp_path: Path) -> None:
    manager = SessionManager.create(str(tmp_path), str(tmp_path))
    for message in conversation(1.5, 4):
        manager.append_message(message)
    path = manager.get_session_file()
    assert path is not None
    cmd = [sys.executable, "-m", "picontext", "tokens", path]
    data = json.loads(subprocess.run([*cmd, "--accuracy", "--json"], capture_output=True, text=True, check=True,
                                     timeout=60).stdout)
    assert [r["reported"] for r in data["rows"]] == [1300, 1600, 1900, 2200]
    assert [r["estimate"] for r in data["rows"]] == [1200, 1500, 1800, 2100]
    assert data["summary"]["samples"] == 4 and data["summary"]["medianTrailingError"] > 0.3
    text = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60).stdout
    assert "estimate vs reported over 4 usage reports" in text and "calibrated within ±15% on 4/4" in text


# -- dense and word ratios, the system part (docs/compaction.md "Triggers that agree with reality") --

def turn(words: int, dense: int, reported: int) -> list[dict[str, Any]]:
    """A tool-less turn: a user message of `words` word characters and `dense` digits, then a reply."""
    text = ("word " * (words // 5 + 1))[:words] + "1" * dense
    return [{"role": "user", "content": text, "timestamp": 1},
            {"role": "assistant", "content": [], "provider": "p", "model": "m", "stopReason": "stop",
             "usage": {"input": reported, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": reported},
             "timestamp": 2}]


def mixed(dense_ratio: float, word_ratio: float) -> list[dict[str, Any]]:
    """Turns of varying dense share whose reports follow the two ratios exactly."""
    messages: list[dict[str, Any]] = []
    reported = 500
    messages += turn(400, 0, reported)
    for words, dense in ((800, 0), (0, 400), (400, 400), (800, 80), (120, 600)):
        reported += round(dense_ratio * dense / 4 + word_ratio * words / 4)
        messages += turn(words, dense, reported)
    return messages


def test_dense_and_word_ratios_are_fitted_when_the_samples_vary() -> None:
    from picontext.compaction.calibration import learn_ratios

    ratios = learn_ratios(samples(mixed(4.0, 0.6)), "p/m")
    assert abs(ratios.dense - 4.0) < 0.05 and abs(ratios.words - 0.6) < 0.05
    # A table after prose: the fitted ratios predict it, one ratio would not.
    assert ratios.apply(100, 100) == 400 and learn_ratio(samples(mixed(4.0, 0.6)), "p/m") < 2.5
    # Beyond the bounds the class ratios are clamped, not dropped.
    clamped = learn_ratios(samples(mixed(12.0, 0.6)), "p/m")
    assert clamped.dense == 6.0


def test_one_ratio_when_the_dense_share_does_not_vary() -> None:
    from picontext.compaction.calibration import Ratios, learn_ratios

    messages = turn(400, 40, 500)
    reported = 500
    for _ in range(4):  # every turn the same mix: the two columns are proportional
        reported += 300
        messages += turn(800, 80, reported)
    ratios = learn_ratios(samples(messages), "p/m")
    single = learn_ratio(samples(messages), "p/m")
    assert ratios == Ratios(single, single)


def test_pairs_whose_reports_shrank_are_not_samples() -> None:
    messages = [*conversation(1.5, 3), user(400), assistant(400, 200)]  # a compaction in between
    assert samples(messages)[-1].reported_delta < 0
    assert learn_ratio(samples(messages), "p/m") == 1.5


def test_without_a_valid_report_the_system_part_has_its_own_ratio(tmp_path: Path) -> None:
    from picontext.compaction.calibration import learn_fixed_ratio, learn_ratios

    manager = SessionManager.create(str(tmp_path), str(tmp_path / "s"))
    manager.append_message({"role": "system", "content": "s" * 4000, "timestamp": 0})  # 1000 estimated
    for message in mixed(1.0, 1.0):
        manager.append_message(message)
    first_reply = manager.get_branch()[2]["message"]
    assert first_reply["usage"]["input"] == 500  # the system message and 400 characters of words
    projection, branch = manager.build_session_projection(), manager.branch_view()
    ratios = learn_ratios(samples(projection.messages), "p/m")
    fixed = learn_fixed_ratio(branch, ratios, "p/m")
    assert fixed is not None and abs(fixed - (500 - ratios.apply(100, 0)) / 1000) < 1e-9  # 0.4
    # With a valid report the system part is inside it: the estimate does not use `fixed`.
    anchored = calibrated_projected_tokens(projection, branch, "p/m")
    assert anchored["lastUsageIndex"] is not None
    kept = next(e for e in reversed(manager.get_branch()) if e["type"] == "message"
                and e["message"]["role"] == "user")
    manager.append_compaction("summary " * 50, kept["id"], 9999)
    projection, branch = manager.build_session_projection(), manager.branch_view()
    pi = estimate_projected_context_tokens(projection, branch)
    calibrated = calibrated_projected_tokens(projection, branch, "p/m")
    assert pi["lastUsageIndex"] is None and calibrated["lastUsageIndex"] is None
    assert calibrated["tokens"] == pi["tokens"] - 1000 + 400  # the rest at ratio 1, the system part at 0.4


def test_tokens_accuracy_lists_the_dense_and_word_ratios(tmp_path: Path) -> None:
    manager = SessionManager.create(str(tmp_path), str(tmp_path))
    for message in mixed(4.0, 0.6):
        manager.append_message(message)
    path = manager.get_session_file()
    assert path is not None
    cmd = [sys.executable, "-m", "picontext", "tokens", path, "--accuracy"]
    data = json.loads(subprocess.run([*cmd, "--json"], capture_output=True, text=True, check=True, timeout=60).stdout)
    last = data["rows"][-1]
    assert abs(last["denseRatio"] - 4.0) < 0.05 and abs(last["wordRatio"] - 0.6) < 0.05
    assert last["calibratedError"] == 0.0 and abs(last["error"]) > 0.15
    text = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60,
                          env={**os.environ, "COLUMNS": "200"}).stdout
    assert "dense/words" in text and f"{last['denseRatio']:.2f}/{last['wordRatio']:.2f}" in text
