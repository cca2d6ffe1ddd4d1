"""``Arrival.when`` memoises a run's source date in the ledger's form on its string (every
re-rank of a group walks all its runs' dates again): the same answers as the plain
computation, on a first call and from the memo (from the foldmemo helper's branch,
session 4)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.errors import DomainError
from domain.ranking import RankEntry
from domain.timestamps import format_time, parse_time
from projections.records import ADMITTED, OBSERVED, Arrival


def _plain_when(observed: Any, admitted: str) -> tuple[str, str]:
    """``Arrival.when`` as it was before its memo (87817ed)."""
    if observed is not None:
        try:
            return format_time(parse_time(observed)), OBSERVED
        except (DomainError, ValueError):
            pass
    return admitted, ADMITTED


dates = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.timezones()
).map(lambda d: d.isoformat())
observed_dates = (
    dates
    | dates.map(lambda d: d.replace("+00:00", "Z"))
    | st.text(max_size=30)
    | st.sampled_from(["2026-02-30T00:00:00Z", "2026-08-22T11:05:31Z", "2026-08-22"])
    | st.none()
    | st.integers()
)


@settings(max_examples=500, deadline=None)
@given(observed_dates)
def test_a_runs_date_is_the_plain_computation(observed: Any) -> None:
    entry = RankEntry("sha256:" + "a" * 64, "sha256:" + "b" * 64, "passed", 1.0)
    for _ in range(2):  # the second time from the memo
        arrival = Arrival(1, entry, observed, "2026-01-01T00:00:00.000Z")
        assert arrival.when == _plain_when(observed, "2026-01-01T00:00:00.000Z")
