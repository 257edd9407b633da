"""Time and identifiers: ISO entry timestamps, epoch-ms message timestamps, UUIDv7 and entry ids.

Everything that reads the clock or draws random numbers goes through a `Clock` or `IdFactory`
so that tests can inject deterministic ones.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Protocol

from picontext._json import js_joined

_ONE_MS = timedelta(milliseconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Clock(Protocol):
    def now_ms(self) -> int: ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class FrozenClock:
    """A clock that only moves when told to (`advance`), or by `step_ms` on every read."""

    def __init__(self, start_ms: int = 1_772_359_200_000, step_ms: int = 0) -> None:
        self._now = start_ms
        self._step = step_ms

    def now_ms(self) -> int:
        value = self._now
        self._now += self._step
        return value

    def advance(self, ms: int) -> None:
        self._now += ms


def iso_from_ms(ms: int) -> str:
    """`new Date(ms).toISOString()`: UTC with milliseconds and a trailing Z."""
    return _iso_second(ms // 1000) + f"{ms % 1000:03d}Z"


@lru_cache(maxsize=16)
def _iso_second(seconds: int) -> str:
    # Formatting a date costs ~10 us, most of an append's budget; appends a few ms apart share
    # their second, so only the milliseconds are formatted per entry.
    # The year by hand: strftime's %Y drops the zero padding JS keeps for years before 1000.
    moment = datetime.fromtimestamp(seconds, tz=UTC)
    return f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}."


_ISO_RE = re.compile(
    r"^([+-]\d{6}|\d{4})(?:-(\d{2})(?:-(\d{2}))?)?"
    r"(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:\d{2})?)?$"
)


def js_date_ms(value: object) -> int | float:
    """`new Date(value).getTime()`: an int of epoch ms, or NaN (a float) when JS gets NaN."""
    if value is None:
        return 0
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        if value != value or abs(value) > 8.64e15:
            return float("nan")
        return int(value)  # JS truncates toward zero
    if isinstance(value, list):  # ToPrimitive: an array is its joined text (["2026-01-01"], [[...]])
        value = js_joined(value)
    ms = ms_from_iso(value)
    return int(ms) if ms == ms else ms


def ms_from_iso(text: object) -> float:
    """`Date.parse(text)` for ISO-8601 strings; NaN for anything else. ECMAScript leaves other
    strings to each engine's own heuristics (V8 reads "0" as 2000-01-01, "13" as NaN); picontext
    follows none of them, so such a timestamp is NaN here (tests/differential/test_confused_vs_pi.py)."""
    if not isinstance(text, str):
        return float("nan")
    m = _ISO_RE.match(text.strip())
    if not m:
        return float("nan")
    year_s, mo, d, hh, mi, ss, frac, tz = m.groups()
    try:
        year = int(year_s)
        month = int(mo or 1)
        day = int(d or 1)
        hour, minute, second = int(hh or 0), int(mi or 0), int(ss or 0)
        if not (1 <= year <= 9999):
            return float("nan")
        dt = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError:
        return float("nan")
    ms = (dt - _EPOCH) // _ONE_MS
    if frac:
        ms += int(frac[:3].ljust(3, "0"))
    if tz and tz != "Z":
        sign = 1 if tz[0] == "+" else -1
        ms -= sign * (int(tz[1:3]) * 60 + int(tz[4:6])) * 60_000
    elif hh is not None and tz is None:
        # JavaScript reads a date-time without offset as local time.
        ms -= _local_offset_ms(ms)
    return float(ms)


def _local_offset_ms(ms: int) -> int:
    off = datetime.fromtimestamp(ms / 1000).astimezone().utcoffset()
    return int(off.total_seconds() * 1000) if off else 0


class IdFactory(Protocol):
    def entry_id(self) -> str: ...
    def session_id(self) -> str: ...


class UUIDv7:
    """RFC 9562 UUIDv7: 48-bit ms time (never decreasing) + a per-process counter + random bits."""

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._last_ms = -1
        self._seq = int.from_bytes(os.urandom(4), "big") & 0x3FFFFFF

    def __call__(self) -> str:
        with self._lock:
            ms = max(self._clock.now_ms(), self._last_ms)
            if ms == self._last_ms:
                self._seq = (self._seq + 1) & 0x3FFFFFFFFFF
            self._last_ms = ms
            seq = self._seq
        rand = int.from_bytes(os.urandom(8), "big")
        # ver(4) | seq hi 12 bits as rand_a | var(2) | seq lo 30 bits | 32 random bits
        value = (ms & 0xFFFFFFFFFFFF) << 80
        value |= 0x7 << 76
        value |= ((seq >> 30) & 0xFFF) << 64
        value |= 0b10 << 62
        value |= (seq & 0x3FFFFFFF) << 32
        value |= rand & 0xFFFFFFFF
        return str(uuid.UUID(int=value))


class RandomIds:
    """Entry ids as Pi mints them (8 hex digits of a v4 UUID) and UUIDv7 session ids."""

    def __init__(self, clock: Clock | None = None) -> None:
        self._v7 = UUIDv7(clock)

    def entry_id(self) -> str:
        # The first 8 hex digits of a v4 UUID are 32 random bits: drawn directly, a tenth of the cost.
        return os.urandom(4).hex()

    def full_id(self) -> str:
        return str(uuid.uuid4())

    def session_id(self) -> str:
        return self._v7()


class SequentialIds:
    """Deterministic ids for tests: e00000001, ... and UUIDv7-shaped session ids."""

    def __init__(self, prefix: str = "e") -> None:
        self._counter = itertools.count(1)
        self._sessions = itertools.count(1)
        self._prefix = prefix

    def entry_id(self) -> str:
        return f"{next(self._counter):08x}"

    def full_id(self) -> str:
        return str(uuid.UUID(int=next(self._counter)))

    def session_id(self) -> str:
        n = next(self._sessions)
        return f"0199aa00-0000-7000-8000-{n:012x}"
