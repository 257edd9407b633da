"""Byte-identical JSON with the reference: `_json.dumps(_json.loads(line))` against node's
`JSON.stringify(JSON.parse(line))`, on hand-picked and generated lines, in written session lines
and in `picontext context --json`."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from picontext import _json
from picontext.session.manager import SessionManager

HAND_PICKED = [
    "1.2345678901234568e+20", "-0", "-0.0", "1.0", "1e16", "1e21", "1e-7", "1e-6", "0.000001", "123e-20",
    "5e-324", "1.7976931348623157e308", "9007199254740993", "-9007199254740993", "12345678901234567890",
    "123456789012345678901234567890", "18446744073709551616", "0.1", "100", "2.50", "1E+2",
    '{"b":1,"2":2,"a":3,"1":4,"01":5,"4294967294":6,"4294967295":7,"-1":8}',
    '{"x":{"10":1,"9":2},"y":[{"3":1,"z":2}]}',
    '"\\ud83d"', '"a\\udc00b"', '"\\ud83d\\ude00"', '"\\u2028\\u0000\\u001f\\u007f"', '"é😀"',
    '{"k":"text with :1e5, and ,1.0] inside","n":[1.5,2.0,-3e-9]}',
    "[1e400]", '{"usage":{"cost":{"input":0.0003,"total":0.00123}}}',
]


def _round_trip_ours(line: str) -> str | None:
    try:
        value = _json.loads(line.encode("utf-8", "surrogatepass"))
    except _json.JsonLineError:
        return None
    return _json.dumps(value).decode("utf-8")


def test_hand_picked_lines_round_trip_as_in_node(pi: Any) -> None:
    expected = pi.op("json_ops.roundTrip", HAND_PICKED)
    assert [_round_trip_ours(line) for line in HAND_PICKED] == expected


def _doubles() -> st.SearchStrategy[float]:
    bits = st.integers(min_value=0, max_value=2**64 - 1).map(lambda b: struct.unpack("d", struct.pack("Q", b))[0])
    return st.one_of(bits, st.floats(allow_nan=False, allow_infinity=False)).filter(lambda f: f == f)


_keys = st.one_of(st.text(max_size=4), st.integers(min_value=0, max_value=2**33).map(str))
_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), _doubles(),
              st.text(alphabet=st.characters(codec=None), max_size=6)),
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(_keys, children, max_size=4)),
    max_leaves=12,
)


def _to_json_text(value: Any) -> str:
    """JSON text of `value` that node can parse (Python's json writes lone surrogates escaped)."""
    return json.dumps(value, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(_values, min_size=1, max_size=20))
def test_generated_values_round_trip_as_in_node(pi: Any, values: list[Any]) -> None:
    lines = [_to_json_text(v) for v in values if not (isinstance(v, float) and abs(v) == float("inf"))]
    expected = pi.op("json_ops.roundTrip", lines)
    assert [_round_trip_ours(line) for line in lines] == expected


def test_written_lines_and_context_json_match_node_bytes(pi: Any, tmp_path: Path) -> None:
    sm = SessionManager.create(str(tmp_path), str(tmp_path))
    odd = {"big": 1.2345678901234568e+20, "negzero": -0.0, "one": 1.0, "huge": 2**60 + 1, "tiny": 1e-6,
           "keys": {"b": 1, "10": 2, "2": 3}, "lone": "\ud83d", "ok": "😀"}
    sm.append_message({"role": "user", "content": [{"type": "text", "text": "hi \udc00"}], "timestamp": 1,
                       "details": odd})
    sm.append_message({"role": "assistant", "content": [{"type": "text", "text": "x"}], "api": "a", "provider": "p",
                       "model": "m", "usage": {"input": 1, "output": 2, "cost": {"total": 1e-7}},
                       "stopReason": "stop", "timestamp": 2.0, "extra": odd})
    path = sm.get_session_file()
    assert path is not None
    raw_lines = Path(path).read_bytes().decode("utf-8").splitlines()
    assert pi.op("json_ops.roundTrip", raw_lines) == raw_lines  # what we wrote is what Pi would write
    assert "\\ud83d" in raw_lines[1] and "123456789012345680000" in raw_lines[1]
    proc = subprocess.run([sys.executable, "-m", "picontext", "context", path, "--json"], capture_output=True,
                          check=True)
    assert proc.stdout.decode("utf-8").rstrip("\n") == pi.op("json_ops.contextText", path)


def test_joined_values_match_node_bytes(pi: Any) -> None:
    """`dumps_joined` (one format check over many values: `context --json`) writes each value as
    JSON.stringify does, suspects anywhere in the batch included."""
    values = [_json.loads(line.encode("utf-8", "surrogatepass")) for line in HAND_PICKED if line != "[1e400]"]
    batches = [values, values[::-1], [{"text": "plain"}, {"n": 2.0}], [{"text": "no numbers"}] * 3, ["\ud83d"],
               [1e16, {"n": 1}], [2.0, -0.0, 12345678901234567890, 1e-7]]  # bare numbers first and after commas
    for batch in batches:
        text = "[" + ",".join(_to_json_text(v) for v in batch) + "]"
        assert (b"[" + _json.dumps_joined(batch) + b"]").decode("utf-8") == pi.op("json_ops.roundTrip", [text])[0]


@settings(max_examples=200, deadline=None)
@given(st.lists(_values, min_size=1, max_size=30))
def test_joined_values_equal_one_by_one(values: list[Any]) -> None:
    assert _json.dumps_joined(values) == b",".join(_json.dumps(v) for v in values)
