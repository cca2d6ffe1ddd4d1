"""The record-setting sequence of a comparison group (projections.records.record_history):
examples of what counts, and properties against the ranking itself as the oracle."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from domain.ranking import RankEntry, RankingError, View, rank_group
from projections.records import ADMITTED, OBSERVED, Arrival, Record, record_history

KEY = "sha256:" + "c" * 64


def run(n: int) -> str:
    return f"sha256:{n:064x}"


def arrival(
    position: int,
    value: float | None,
    *,
    status: str = "passed",
    retracted: bool = False,
    superseded: bool = False,
    key: str = KEY,
    digest: str | None = None,
    observed: str | None = None,
    admitted: str = "",
) -> Arrival:
    entry = RankEntry(
        run=digest or run(position),
        comparison_key=key,
        status=status,
        claimed=value,
        retracted=retracted,
        superseded=superseded,
    )
    return Arrival(position, entry, observed, admitted)


def test_a_group_of_improving_runs_sets_a_record_each_time() -> None:
    records = record_history([arrival(1, 300.0), arrival(2, 200.0), arrival(3, 100.0)])
    assert [r.run for r in records] == [run(1), run(2), run(3)]
    assert records[0] == Record(position=1, run=run(1), value=300.0)
    assert records[0].factor is None  # the first ranked run displaces nobody
    assert (records[1].previous, records[1].previous_value) == (run(1), 300.0)
    assert records[1].factor == pytest.approx(1.5) and records[2].factor == pytest.approx(2.0)


def test_slower_and_tied_runs_do_not_take_first_place() -> None:
    records = record_history(
        [arrival(1, 200.0), arrival(2, 250.0), arrival(3, 200.0), arrival(4, 199.0)]
    )
    # 250 is slower; 200 ties (dense ranks share #1), so #1 stays with the earlier run.
    assert [(r.run, r.previous) for r in records] == [(run(1), None), (run(4), run(1))]


def test_only_runs_the_ranking_would_rank_count() -> None:
    records = record_history(
        [
            arrival(1, None),  # states no primary value
            arrival(2, 10.0, status="failed"),
            arrival(3, float("nan")),
            arrival(4, 500.0),
            arrival(5, 5.0, status="timeout"),
        ]
    )
    assert [r.run for r in records] == [run(4)]
    assert record_history([arrival(1, None), arrival(2, 1.0, status="failed")]) == []
    assert record_history([]) == []


def test_a_later_retraction_or_supersession_keeps_the_record_marked() -> None:
    records = record_history(
        [
            arrival(1, 300.0),
            arrival(2, 200.0, retracted=True),
            arrival(3, 250.0),  # beats nothing: #2 stood at 200 when it arrived
            arrival(4, 150.0, superseded=True),
            arrival(5, 100.0),
        ]
    )
    assert [(r.run, r.withdrawn) for r in records] == [
        (run(1), None),
        (run(2), "retracted"),
        (run(4), "superseded"),
        (run(5), None),
    ]
    assert records[-1].previous == run(4)  # beat the superseded record, as it happened


def test_undated_arrivals_are_in_log_order_whatever_the_input_order() -> None:
    arrivals = [arrival(3, 100.0), arrival(1, 300.0), arrival(2, 200.0)]
    assert [r.position for r in record_history(arrivals)] == [1, 2, 3]


def test_runs_are_walked_in_the_order_their_sources_dated_them() -> None:
    """The KernelIndex catalog dates its record events by each run's observedAt: a run the
    ledger took in late but its source measured first is judged as of its own date."""
    records = record_history(
        [
            arrival(1, 200.0, observed="2026-03-01T00:00:00Z"),
            arrival(2, 300.0, observed="2026-02-01T00:00:00.5+01:00"),  # measured first
            arrival(3, 250.0, observed="2026-02-15T00:00:00Z"),
        ]
    )
    assert [(r.run, r.previous, r.at, r.dated) for r in records] == [
        (run(2), None, "2026-01-31T23:00:00.500Z", OBSERVED),
        (run(3), run(2), "2026-02-15T00:00:00.000Z", OBSERVED),
        (run(1), run(3), "2026-03-01T00:00:00.000Z", OBSERVED),
    ]


def test_a_run_whose_source_gave_no_date_is_dated_by_its_admission_and_says_so() -> None:
    records = record_history(
        [
            arrival(1, 300.0, observed="2026-05-01T00:00:00Z", admitted="2026-09-01T00:00:00.000Z"),
            arrival(2, 200.0, admitted="2026-04-01T00:00:00.000Z"),  # no source date
            arrival(3, 100.0, observed="yesterday", admitted="2026-06-01T00:00:00.000Z"),
        ]
    )
    assert [(r.run, r.at, r.dated) for r in records] == [
        (run(2), "2026-04-01T00:00:00.000Z", ADMITTED),
        (run(3), "2026-06-01T00:00:00.000Z", ADMITTED),  # no RFC 3339 date: as none
    ]


def test_mixed_groups_repeated_runs_and_shared_positions_are_refused() -> None:
    with pytest.raises(RankingError, match="one comparison group"):
        record_history([arrival(1, 1.0), arrival(2, 2.0, key="sha256:" + "d" * 64)])
    with pytest.raises(RankingError, match="twice"):
        record_history([arrival(1, 1.0), arrival(2, 2.0, digest=run(1))])
    with pytest.raises(RankingError, match="position"):
        record_history([arrival(1, 1.0), arrival(1, 2.0, digest=run(9))])


# --- properties ---------------------------------------------------------------------------


@st.composite
def groups(draw: st.DrawFn, withdrawals: bool = True) -> list[Arrival]:
    """One group's runs in a shuffled order: few distinct values (so ties happen), some
    without a value or not passed, some withdrawn since."""
    size = draw(st.integers(min_value=0, max_value=14))
    positions = draw(st.lists(st.integers(1, 10_000), min_size=size, max_size=size, unique=True))
    found = []
    for index, position in enumerate(positions):
        value = draw(st.one_of(st.none(), st.integers(1, 8).map(float)))
        status = draw(st.sampled_from(["passed", "passed", "passed", "failed"]))
        retracted = withdrawals and draw(st.booleans())
        superseded = withdrawals and draw(st.booleans())
        # Few days (so dates tie), some runs undated by their source.
        day = draw(st.one_of(st.none(), st.integers(1, 5)))
        observed = None if day is None else f"2026-01-0{day}T00:00:00Z"
        found.append(
            arrival(
                position,
                value,
                status=status,
                retracted=retracted,
                superseded=superseded,
                digest=run(index + 1),
                observed=observed,
                admitted=f"2026-01-0{draw(st.integers(1, 5))}T12:00:00.000Z",
            )
        )
    return found


def _rank_of(entries: list[RankEntry], digest: str) -> tuple[int, tuple[str, ...]]:
    ranked = {r.run: r for r in rank_group(entries, View.SOURCE_NATIVE)}
    return ranked[digest].rank, ranked[digest].tied_with


@settings(max_examples=300, deadline=None)
@given(groups())
def test_records_strictly_improve_in_date_order(arrivals: list[Arrival]) -> None:
    records = record_history(arrivals)
    order = [(r.at, r.position) for r in records]
    assert order == sorted(order) and len(set(order)) == len(order)
    when = {a.entry.run: a.when for a in arrivals}
    assert all((r.at, r.dated) == when[r.run] for r in records)
    by_run = {a.entry.run: a.entry for a in arrivals}
    for before, after in itertools.pairwise(records):
        # Strictly better by the ranking's own judgment (lower value, no tie) ...
        pair = [replace(by_run[r.run], retracted=False, superseded=False) for r in (before, after)]
        assert _rank_of(pair, after.run)[0] < _rank_of(pair, before.run)[0]
        assert after.value < before.value
        # ... and each names the record it displaced.
        assert (after.previous, after.previous_value) == (before.run, before.value)


@settings(max_examples=300, deadline=None)
@given(groups())
def test_a_record_is_a_run_ranked_first_alone_among_the_runs_before_it(
    arrivals: list[Arrival],
) -> None:
    """The oracle: rank the runs dated up to each run (ties of date in log order)."""
    records = {r.run for r in record_history(arrivals)}
    seen: list[RankEntry] = []
    for a in sorted(arrivals, key=lambda a: (a.when[0], a.position)):
        then = replace(a.entry, retracted=False, superseded=False)
        seen.append(then)
        first_alone = then.ranked_in(View.SOURCE_NATIVE) and _rank_of(seen, then.run) == (1, ())
        assert (then.run in records) == first_alone


@settings(max_examples=300, deadline=None)
@given(groups(withdrawals=False))
def test_with_nothing_withdrawn_the_last_record_is_the_current_first(
    arrivals: list[Arrival],
) -> None:
    records = record_history(arrivals)
    board = rank_group([a.entry for a in arrivals], View.SOURCE_NATIVE)
    assert bool(records) == bool(board)
    if records:
        assert records[-1].withdrawn is None
        # #1 of the current board (among runs tied at #1: the one that got there first).
        assert _rank_of([a.entry for a in arrivals], records[-1].run)[0] == 1
        assert records[-1].value == board[0].value


@settings(max_examples=100, deadline=None)
@given(groups(), st.randoms(use_true_random=False))
def test_the_history_is_a_function_of_the_set_of_arrivals(
    arrivals: list[Arrival], rnd: random.Random
) -> None:
    shuffled = list(arrivals)
    rnd.shuffle(shuffled)
    assert record_history(shuffled) == record_history(arrivals)


def _pairwise_history(arrivals: list[Arrival]) -> list[Record]:
    """The walk as first written: each run ranked against the standing #1 alone."""
    records: list[Record] = []
    best: Record | None = None
    holder: RankEntry | None = None
    for arrival in sorted(arrivals, key=lambda a: (a.when[0], a.position)):
        then = replace(arrival.entry, retracted=False, superseded=False)
        if not then.ranked_in(View.SOURCE_NATIVE):
            continue
        pair = [then] if holder is None else [holder, then]
        board = {r.run: r for r in rank_group(pair, View.SOURCE_NATIVE)}
        mine = board[then.run]
        if holder is not None and mine.rank >= board[holder.run].rank:
            continue
        withdrawn = "retracted" if arrival.entry.retracted else None
        if withdrawn is None and arrival.entry.superseded:
            withdrawn = "superseded"
        at, dated = arrival.when
        best = Record(
            arrival.position,
            then.run,
            mine.value,
            None if best is None else best.run,
            None if best is None else best.value,
            withdrawn,
            at,
            dated,
        )
        records.append(best)
        holder = then
    return records


@settings(max_examples=500, deadline=None)
@given(groups())
def test_ranking_the_group_once_decides_as_ranking_each_run_against_the_first(
    arrivals: list[Arrival],
) -> None:
    """``record_history`` ranks the group once (a rebuild's re-ranking walks every group);
    its records are those of ranking each run against the standing #1 alone."""
    assert record_history(arrivals) == _pairwise_history(arrivals)


@settings(max_examples=300, deadline=None)
@given(groups())
def test_the_groups_ranking_handed_over_gives_the_history_it_gives_alone(
    arrivals: list[Arrival],
) -> None:
    """A re-ranking hands over the group's source-native ranking as the runs stand: used
    where nothing is withdrawn, ignored where something is (the runs then ranked as they
    were); the history is the one ``record_history`` finds on its own, either way."""
    standing = rank_group([a.entry for a in arrivals], View.SOURCE_NATIVE)
    assert record_history(arrivals, standing) == record_history(arrivals)


def test_a_ranking_handed_over_is_not_used_where_a_run_was_withdrawn() -> None:
    """The retracted record holder still set its record, whatever the standing board says
    (where it has no rank at all)."""
    arrivals = [arrival(1, 100.0, retracted=True), arrival(2, 200.0)]
    standing = rank_group([a.entry for a in arrivals], View.SOURCE_NATIVE)
    assert [r.run for r in record_history(arrivals, standing)] == [run(1)]
    assert record_history(arrivals, standing)[0].withdrawn == "retracted"
