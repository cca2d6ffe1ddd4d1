"""``quantize`` is the time the ledger records, read back: admission judges that time, so its
fast form must equal formatting the moment and parsing the text, for every aware moment."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from domain.timestamps import format_time, parse_time
from ledger.authority.signers import quantize

zones = st.integers(-23 * 60, 23 * 60).map(lambda m: timezone(timedelta(minutes=m)))


# Every aware moment that has a UTC time: a day inside each end of datetime's range, as an
# offset of up to 23 h moves the UTC time across it (9999-12-31T23:00-23:00 is year 10000 in
# UTC, which parse_time refuses as text and astimezone cannot form; a seed drew near it).
@given(
    st.datetimes(
        min_value=datetime(1000, 1, 2),
        max_value=datetime(9999, 12, 30, 23, 59, 59, 999999),
        timezones=zones | st.just(UTC),
    )
)
@example(datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=timezone(timedelta(hours=-23))))
@example(datetime(1000, 1, 2, tzinfo=timezone(timedelta(hours=23))))
def test_quantize_is_the_recorded_text_read_back(moment: datetime) -> None:
    expected = parse_time(format_time(moment))
    got = quantize(moment)
    assert got == expected
    assert got.tzinfo == expected.tzinfo == UTC


def test_a_naive_moment_is_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        quantize(datetime(2026, 12, 3, 12, 0, 0))


@given(st.datetimes(datetime(2, 1, 1), datetime(9998, 12, 31), timezones=zones | st.just(UTC)))
def test_format_time_is_rfc3339_at_the_millisecond_and_reads_back(moment: datetime) -> None:
    utc = moment.astimezone(UTC)
    # The year padded to four digits: strftime's %Y wrote "999-..." below 1000 (glibc), a
    # text parse_time refuses.
    expected = (
        f"{utc.year:04d}" + utc.strftime("-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"
    )
    assert format_time(moment) == expected
    assert parse_time(format_time(moment)) == quantize(moment)
