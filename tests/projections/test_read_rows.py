"""The read door (``projections.queries``) answers typed rows (``projections.rows``), not
dicts: over the demo cohort, each read's rows are its row class, with the stored JSON
columns decoded where readers want lists, and the order each read promises."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, asdict

import pytest
from projection_world import ALL_RUNS, CLAIMED, GROUP, NAMES, RUN_21613, RUN_36818, SEED, World
from sqlalchemy import select

from domain.ranking import View
from projections import queries, view_reads
from projections.rows import (
    BoardRow,
    GroupHeading,
    GroupRow,
    OperationGroupRow,
    OperationRow,
    RecentRunRow,
    RunListRow,
    RunNames,
    RunRow,
    SourceRow,
)
from projections.tables import runs

UNKNOWN = "sha256:" + "0" * 64


def test_a_run_row_is_typed_with_its_reasons_decoded(cohort: World) -> None:
    cohort.runner().catch_up()
    with cohort.ledger.store.transaction(commit=False) as session:
        row = queries.run_row(session, SEED)
        stored = session.execute(select(runs).where(runs.c.run_digest == SEED)).mappings().one()
        missing = queries.run_row(session, UNKNOWN)
    assert isinstance(row, RunRow)
    assert missing is None
    assert (row.run_digest, row.name, row.claimed) == (SEED, NAMES[SEED], CLAIMED[SEED])
    assert isinstance(row.evidence_reasons, list) and row.evidence_reasons
    assert all(isinstance(r, str) for r in row.evidence_reasons)
    # Every column of the runs view, in table order, and nothing else.
    assert list(asdict(row)) == list(stored)
    column = "name"
    with pytest.raises(FrozenInstanceError):
        setattr(row, column, "renamed")


def test_a_leaderboard_is_board_rows_in_rank_order(cohort: World) -> None:
    cohort.runner().catch_up()
    with cohort.ledger.store.transaction(commit=False) as session:
        rows = queries.rows_of(session)
        board = view_reads.leaderboard(rows, GROUP, View.SOURCE_NATIVE)
        page = view_reads.leaderboard(rows, GROUP, View.SOURCE_NATIVE, offset=1, limit=1)
    assert all(isinstance(r, BoardRow) for r in board)
    assert [(r.run_digest, r.rank, r.of_count) for r in board] == [
        (RUN_21613, 1, 3),
        (RUN_36818, 2, 3),
        (SEED, 3, 3),
    ]
    assert [r.value for r in board] == sorted(CLAIMED[r.run_digest] for r in board)
    assert board[0].tied_runs == []
    assert page == [board[1]]


def test_groups_and_operations_are_typed(cohort: World) -> None:
    cohort.runner().catch_up()
    with cohort.ledger.store.transaction(commit=False) as session:
        groups = queries.groups(session)
        operations = queries.operations(session)
        heading = view_reads.group_heading(queries.rows_of(session), GROUP)
        no_heading = view_reads.group_heading(queries.rows_of(session), UNKNOWN)
        benchmark = groups[0].benchmark
        assert benchmark is not None
        of_operation = view_reads.operation_groups(queries.rows_of(session), benchmark)
    assert groups and all(isinstance(g, GroupRow) for g in groups)
    ours = next(g for g in groups if g.comparison_key == GROUP)
    assert ours.runs == 3
    assert all(isinstance(o, OperationRow) for o in operations)
    assert sum(o.runs for o in operations) == len(ALL_RUNS)
    assert isinstance(heading, GroupHeading) and heading.runs == 3
    assert no_heading is None
    assert all(isinstance(g, OperationGroupRow) for g in of_operation)
    top = next(g for g in of_operation if g.comparison_key == GROUP)
    assert (top.top_run, top.top_name, top.top_value) == (
        RUN_21613,
        NAMES[RUN_21613],
        CLAIMED[RUN_21613],
    )


def test_sources_runs_and_names_are_typed(cohort: World) -> None:
    cohort.runner().catch_up()
    with cohort.ledger.store.transaction(commit=False) as session:
        sources = queries.sources(session)
        recent = queries.recent_runs(session, 10)
        listed = queries.list_runs(session, queries.RunFilter(), 10)
        names = queries.run_names(session, SEED)
        unknown = queries.run_names(session, UNKNOWN)
    assert all(isinstance(s, SourceRow) for s in sources)
    assert sum(s.runs for s in sources) == len(ALL_RUNS)
    assert all(isinstance(r, RecentRunRow) for r in recent)
    assert all(isinstance(r, RunListRow) for r in listed)
    # The runs list is in ingestion order; the recent runs newest first.
    assert [r.run_digest for r in listed] == list(ALL_RUNS)
    assert [r.run_digest for r in recent] == list(reversed(ALL_RUNS))
    assert isinstance(names, RunNames) and names.name == NAMES[SEED]
    assert unknown == RunNames(None, None)
