"""The numbers the viewer shows come from the session and compaction code, unchanged.

The plot's incremental walk must give, for every request, exactly what the estimator gives when
run from scratch on the context of that request; each compaction's summarized entries must be
what folding the whole prefix before and after it leaves out; together they are what
`picontext dropped` calls compacted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from viewer_sessions import EXAMPLE, sessiongen, write_big

from picontext.cli.loading import load_session
from picontext.compaction.tokens import calculate_context_tokens, get_assistant_usage
from picontext.session.projection import LAST, build_session_path, field_of, fold_path
from picontext.viewer.model import build_view
from picontext.viewer.timeline import build_timeline, estimate_before


def _path(file: Path) -> list[Any]:
    s = load_session(str(file))
    return build_session_path(s.entries, LAST, s.by_id)


def _check_timeline(path: list[Any]) -> int:
    timeline = build_timeline(path, lambda provider, model: None)
    requests = [i for i, e in enumerate(path) if field_of(field_of(e, "message"), "role") == "assistant"
                and field_of(e, "type") == "message"]
    assert [r.position for r in timeline.requests] == requests
    for r in timeline.requests:
        assert r.estimate == estimate_before(path, r.position), r.position
        usage = get_assistant_usage(path[r.position]["message"])
        assert r.reported == (calculate_context_tokens(usage) if usage is not None else None)
    for c in timeline.compactions:
        assert c.tokens_after == estimate_before(path, c.position + 1)
        assert c.tokens_before == path[c.position].get("tokensBefore")
    return len(timeline.requests)


def test_timeline_equals_the_estimator_on_the_example() -> None:
    path = _path(EXAMPLE)
    assert _check_timeline(path) == 69


def test_timeline_equals_the_estimator_on_a_generated_session_with_compactions(tmp_path: Path) -> None:
    path = _path(write_big(tmp_path / "big.jsonl", 3000, compact_every=700))
    assert sum(1 for e in path if e.get("type") == "compaction") >= 3
    assert _check_timeline(path) > 500


VALID_SEEDS = [seed for seed in range(60) if sessiongen().generate(seed).valid]


@pytest.mark.parametrize("seed", VALID_SEEDS[::2])
def test_timeline_equals_the_estimator_on_seeded_sessions(seed: int, tmp_path: Path) -> None:
    file = sessiongen().generate(seed).write(tmp_path)
    _check_timeline(_path(file))


def _summarized_from_scratch(path: list[Any]) -> dict[int, set[int]]:
    out = {}
    for pos, entry in enumerate(path):
        if field_of(entry, "type") == "compaction":
            after = {id(e) for e in fold_path(path[: pos + 1])}
            out[pos] = {id(e) for e in fold_path(path[:pos]) if id(e) not in after
                        and field_of(e, "type") in ("message", "custom_message")
                        and field_of(field_of(e, "message"), "role") != "system"}
    return out


@pytest.mark.parametrize("seed", VALID_SEEDS[1::2])
def test_summarized_entries_equal_folding_the_whole_prefix(seed: int, tmp_path: Path) -> None:
    s = load_session(str(sessiongen().generate(seed).write(tmp_path)))
    meta, _ = build_view(s.file_entries)
    manager_entries = s.manager.get_entries()
    path = s.manager.get_branch()
    expected = _summarized_from_scratch(path)
    got = {path.index(manager_entries[c["index"]]): {id(manager_entries[i]) for i in c["summarized"]}
           for c in meta["compactions"]}
    assert got == expected


def test_seeded_sessions_exercise_compactions_and_edits(tmp_path: Path) -> None:
    """The seeded cases above are only worth something if their branches hold what they test."""
    kinds: set[str] = set()
    for seed in VALID_SEEDS:
        path = _path(sessiongen().generate(seed).write(tmp_path))
        kinds.update(str(e.get("type")) for e in path if isinstance(e, dict))
    assert {"compaction", "context_edit", "branch_summary"} <= kinds


def test_example_compaction_summarized_what_dropped_prints(tmp_path: Path) -> None:
    s = load_session(str(EXAMPLE))
    meta, lines = build_view(s.file_entries)
    out = subprocess.run([sys.executable, "-m", "picontext", "dropped", str(EXAMPLE), "--json"],
                         capture_output=True, text=True, check=True).stdout
    compacted = {d["id"] for d in json.loads(out) if d["why"] == "compacted"}
    assert len(compacted) > 40
    [compaction] = meta["compactions"]
    assert {meta["ids"][i] for i in compaction["summarized"]} == compacted
    assert meta["ids"][compaction["index"]] == "5b6fdd57" and compaction["firstKept"] == "7bdf01a6"
    assert meta["ids"][compaction["firstKeptIndex"]] == "7bdf01a6"
    assert compaction["tokensBefore"] == 22625
    # every entry's line is the entry itself
    assert [json.loads(line) for line in lines] == s.manager.get_entries()


def test_models_table_adds_up_to_stats(tmp_path: Path) -> None:
    big = write_big(tmp_path / "b.jsonl", 1200, compact_every=500)
    for file in (EXAMPLE, big):
        meta, _ = build_view(load_session(str(file)).file_entries)
        stats = json.loads(subprocess.run([sys.executable, "-m", "picontext", "stats", str(file), "--json"],
                                          capture_output=True, text=True, check=True).stdout)["total"]
        for key in ("input", "output", "cacheRead", "cacheWrite"):
            assert sum(m.get(key, 0) for m in meta["models"]) == stats.get(key, 0), key
        assert sum(m.get("cost", 0) for m in meta["models"]) == pytest.approx(stats.get("cost", 0))
