"""RFC 3339 times: whatever string comes in, a time or the ledger's refusal (never another
exception: an OverflowError from a time that matched the pattern used to fail every
envelope committed with it)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.errors import DomainError
from domain.importers.catalog_form import utc_millis
from domain.importers.fields import MappingError
from domain.timestamps import _parse_rfc3339, format_time, parse_time

_OUT_OF_RANGE = [
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59-01:00",
    "0001-01-01T00:59:59+01:00",
]


@pytest.mark.parametrize("text", [*_OUT_OF_RANGE, "0000-01-01T00:00:00Z", "2026-02-30T00:00:00Z"])
def test_a_pattern_match_that_is_no_time_is_refused(text: str) -> None:
    with pytest.raises(DomainError, match="is not a valid date-time"):
        parse_time(text)
    with pytest.raises(MappingError, match="is not an ISO 8601 time"):
        utc_millis(text, "observedAt")


def test_the_edges_of_the_range_are_times() -> None:
    assert parse_time("0001-01-01T00:00:00Z") == datetime(1, 1, 1, tzinfo=UTC)
    assert parse_time("0001-01-01T01:00:00+01:00") == datetime(1, 1, 1, tzinfo=UTC)
    assert format_time(parse_time("9999-12-31T23:59:59.999999999Z")) == "9999-12-31T23:59:59.999Z"
    assert utc_millis("0999-06-01T00:00:00Z", "t") == "0999-06-01T00:00:00.000Z"


_times = st.builds(
    "{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}{}".format,
    st.sampled_from([0, 1, 2, 999, 1000, 2026, 9998, 9999]),
    st.integers(0, 13),
    st.integers(0, 32),
    st.integers(0, 24),
    st.integers(0, 60),
    st.integers(0, 60),
    st.sampled_from(
        ["Z", "+00:00", "+01:00", "-01:00", "+23:59", "-23:59", ".5Z", ".123456789-14:00"]
    ),
)


@given(_times)
def test_any_time_shaped_string_is_a_time_or_a_refusal(text: str) -> None:
    try:
        moment = parse_time(text)
    except DomainError:
        return
    assert moment.tzinfo is UTC
    assert parse_time(format_time(moment)) <= moment  # millisecond form reads back


def _read(text: str) -> tuple[datetime | None, str | None]:
    try:
        moment = parse_time(text, "t")
    except DomainError as exc:
        return None, exc.message
    assert moment.tzinfo is UTC
    return moment, None


def _reference(text: str) -> tuple[datetime | None, str | None]:
    try:
        return _parse_rfc3339(text, "t"), None
    except DomainError as exc:
        return None, exc.message


_ledger_form = st.builds(
    "{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}{}Z{}".format,
    st.integers(0, 9999),
    st.integers(0, 13),
    st.integers(0, 32),
    st.integers(0, 24),
    st.integers(0, 60),
    st.integers(0, 60),
    st.sampled_from(["", ".0", ".5", ".12", ".123", ".1234", ".12345", ".123456", ".1234567"]),
    st.sampled_from(["", "", "", "\n", " "]),
)


@given(st.one_of(_ledger_form, _times, st.text(max_size=30)))
def test_the_fast_reading_of_the_ledger_form_is_the_general_reading(text: str) -> None:
    # Twice: the second reading may come from the memo of recent times.
    assert _read(text) == _reference(text)
    assert _read(text) == _reference(text)
