"""Entry timestamps are `new Date(ms).toISOString()`: checked against calendar arithmetic that
shares no code with the formatter (epoch + a timedelta), over the whole range JS prints with a
four-digit year, negative times and millisecond edges included."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import example, given, settings
from hypothesis import strategies as st

from picontext._clock import iso_from_ms

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FIRST = int((datetime(1, 1, 1, tzinfo=UTC) - EPOCH).total_seconds() * 1000)
LAST = int((datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC) - EPOCH).total_seconds() * 1000)


@settings(deadline=None)  # a loaded machine may pause any example; the time is not what is tested
@given(st.integers(min_value=FIRST, max_value=LAST))
@example(-30_610_224_000_001)  # the year 999: strftime printed "999"
@example(0)
@example(-1)
@example(999)
@example(1000)
@example(1764686400999)
@example(1764686401000)
def test_iso_from_ms_is_the_calendar_date_with_milliseconds(ms: int) -> None:
    moment = EPOCH + timedelta(milliseconds=ms)
    expected = f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"
    assert iso_from_ms(ms) == expected


def test_entries_a_few_ms_apart_share_the_second_and_still_differ() -> None:
    stamps = [iso_from_ms(1764686400000 + step) for step in range(0, 3000, 7)]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    assert stamps[0] == "2025-12-02T14:40:00.000Z" and stamps[-1] == "2025-12-02T14:40:02.996Z"
