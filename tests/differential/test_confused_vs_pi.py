"""Type-confused sessions: where Pi's buildSessionContext accepts one, `context --json` says the same.

The sessions come from the hardening generator (tests/hardening/confused_sessions.py: any field of
any entry type replaced by a list, an object, a number, null, a bool or removed). Where the
reference throws (or would never end: a parent cycle), the file is not one Pi can show and only
the hardening promise holds (exit 0, or one line and exit 2); where it refuses the file,
picontext refuses it in one line.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hardening"))
from confused_sessions import BASE, MUTATIONS, confuse, write
from hostile_files import entry, run_cli, user
from pi_reference import PiReference, ReferenceError
from test_projection_vs_pi import UNDEFINED, first_difference, normalise

from picontext._json import js_joined

HEADER = {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}


def walks_in_a_circle(entries: list[Any]) -> bool:
    """Whether the reference's walk from the last entry up its parents would never end."""
    by_id = {e.get("id"): e for e in entries[1:] if isinstance(e, dict) and isinstance(e.get("id"), str)}
    current, seen = entries[-1] if len(entries) > 1 else None, set()
    while isinstance(current, dict):
        if id(current) in seen:
            return True
        seen.add(id(current))
        parent = current.get("parentId")
        current = by_id.get(parent) if isinstance(parent, str) and parent else None
    return False


# ECMAScript's Date Time String Format (the one form every engine must read alike).
ISO_FORMAT = re.compile(r"([+-]\d{6}|\d{4})(-\d{2}(-\d{2})?)?(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})?)?")
SYNTHETIC_ROLES = ("custom", "branchSummary", "compactionSummary")


def engine_defined_time(entry: Any) -> bool:
    """An entry timestamp that is text (or an array, whose text it is) but not ISO-8601:
    ECMAScript leaves `new Date(text)` of it to the engine's heuristics (V8 reads "0" as the year
    2000, "13" as NaN); picontext makes it NaN (`js_date_ms`)."""
    stamp = entry.get("timestamp") if isinstance(entry, dict) else None
    if not isinstance(stamp, str | list):
        return False
    return ISO_FORMAT.fullmatch(stamp if isinstance(stamp, str) else js_joined(stamp)) is None


def excuse_engine_dates(ref: Any, ours: Any) -> None:
    """Where such a timestamp became a synthetic message's time, V8's guess is not compared:
    the reference's number stands in for picontext's NaN, and nothing else is excused."""
    for theirs, mine in zip(ref.get("messages") or [], ours.get("messages") or [], strict=False):
        if (isinstance(theirs, dict) and isinstance(mine, dict) and theirs.get("role") in SYNTHETIC_ROLES
                and mine.get("role") == theirs.get("role") and mine.get("timestamp") is None
                and isinstance(theirs.get("timestamp"), int | float)):
            mine["timestamp"] = theirs["timestamp"]


def check_against_pi(pi: PiReference, path: Path) -> str:
    """Compare one file; returns what happened (for the counts)."""
    entries = [json.loads(line) for line in path.read_bytes().splitlines()]
    try:
        # A parent cycle: the reference's path walk never ends (node dies of it), picontext's stops.
        ref = None if walks_in_a_circle(entries) else pi.op("session.contextOfFile", str(path), UNDEFINED)
    except ReferenceError:
        ref = None
    result = run_cli("context", "--json", str(path))
    assert result.code in (0, 2), result.err
    if ref is None:
        return "reference throws"
    if ref == {"invalid": True}:
        assert result.code == 2 and len(result.err.strip().splitlines()) == 1, result.err
        return "both refuse"
    assert result.code == 0, f"the reference accepts {path.name}; picontext: {result.err}"
    ours = json.loads(result.out)
    if any(engine_defined_time(e) for e in entries[1:]):
        excuse_engine_dates(ref, ours)
    difference = first_difference(normalise(ref), normalise(ours))
    assert difference is None, difference
    return "equal"


def test_the_unconfused_session_matches_pi(pi: PiReference, tmp_path: Path) -> None:
    assert check_against_pi(pi, write(tmp_path / "base.jsonl", BASE)) == "equal"


def test_an_edit_of_a_message_whose_role_is_a_list_matches_pi(pi: PiReference, tmp_path: Path) -> None:
    """The issue's case: Pi accepts it (a list is not an editable role: the message stays)."""
    for role in (["user"], {"r": 1}, 7, None):
        first = entry("a", None, type="message", message={**user("hi"), "role": role})
        edit = entry("b", "a", type="context_edit", targetId="a", replacement={"content": "x"})
        path = write(tmp_path / "role.jsonl", [HEADER, first, edit, entry("c", "b", type="message", message=user("q"))])
        assert check_against_pi(pi, path) == "equal", role


def _at(eid: str, *path: Any) -> tuple[Any, ...]:
    return (next(n for n, e in enumerate(BASE) if e.get("id") == eid), *path)


@pytest.mark.parametrize("mutation", [
    (_at("e25", "id"), None),  # the leaf Pi opens at is a null id: an empty context
    (_at("e16", "summary"), []),  # a branch summary of [] is truthy for JavaScript: it is in the context
    ((0, "version"), [None]),  # Number([null]) is 0: a v1 file, migrated
    ((0, "version"), ["3"]),
    (_at("e11", "timestamp"), ["2026-01-02T03:04:05.000Z"]),  # an array's date is its text's: ToPrimitive
    (_at("e11", "timestamp"), [0]),  # "0": V8's own guess (the year 2000), not compared
], ids=["null-leaf-id", "list-summary", "version-[null]", "version-['3']", "timestamp-[iso]", "timestamp-[0]"])
def test_differences_the_comparison_found(pi: PiReference, tmp_path: Path, mutation: tuple[Any, Any]) -> None:
    assert check_against_pi(pi, write(tmp_path / "found.jsonl", confuse([mutation]))) == "equal"


OUTCOMES: dict[str, int] = {}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(mutations=MUTATIONS)
def test_type_confused_context_matches_pi(pi: PiReference, tmp_path: Path, mutations: list[Any]) -> None:
    outcome = check_against_pi(pi, write(tmp_path / "confused.jsonl", confuse(mutations)))
    OUTCOMES[outcome] = OUTCOMES.get(outcome, 0) + 1


def test_most_confused_sessions_were_compared() -> None:
    """The comparison above is not vacuous: Pi accepted most of the generated files."""
    if not OUTCOMES:  # run alone (-k): nothing to count
        return
    print(f"confused sessions vs Pi: {OUTCOMES}")
    assert OUTCOMES.get("equal", 0) >= sum(OUTCOMES.values()) // 2, OUTCOMES


def test_header_versions_are_numbers_as_javascript_reads_them() -> None:
    """`version` decides the migration (`version < 2`, `< 3`): Number() of any JSON value."""
    import math
    import subprocess

    from picontext.session.migrations import js_number

    values = [None, True, False, 0, 3, 2.5, -1, 1e300, "", " 3 ", "3", "0x1f", "0b11", "0o7", "1e1", ".5", "5.",
              "+Infinity", "-Infinity", "inf", "nan", "1_000", "3a", "\u20283\u2029", "\x1c3", "\ufeff2", [], [None],
              [3], ["3"], [[2]], [True], [1, 2], [{}], {}, {"a": 1}, ["0x10"], [" "], [None, None]]
    script = "const vs = JSON.parse(require('fs').readFileSync(0, 'utf8')); console.log(JSON.stringify(vs.map(v => " \
             "{ const n = Number(v); return Number.isNaN(n) ? 'NaN' : n === Infinity ? 'Inf' : n === -Infinity ? " \
             "'-Inf' : n; })))"
    node = subprocess.run(["node", "-e", script], input=json.dumps(values), capture_output=True, text=True, check=True)
    expected = json.loads(node.stdout)
    got = ["NaN" if math.isnan(n) else "Inf" if n == math.inf else "-Inf" if n == -math.inf else n
           for n in map(js_number, values)]
    assert got == expected
