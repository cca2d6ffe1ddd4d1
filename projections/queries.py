"""Reads over the projected views: one run's standing, leaderboards, groups.

The one read door: each read answers typed, frozen rows (``projections.rows``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any

from sqlalchemy import func, select

from domain.evidence import EvidenceLevel
from domain.ranking import View
from ledger.store.event_store import StoreSession, connection_of
from ledger.store.read_door import Rows, SessionRows
from projections import view_reads
from projections.rows import (
    GroupRow,
    OperationRow,
    RecentRunRow,
    RunListRow,
    RunNames,
    RunRow,
    SourceRow,
    Standing,
)
from projections.tables import manifests, ranks, runs


def rows_of(session: StoreSession) -> Rows:
    """``session``'s connection as the views' generated statements run on it (the server's
    and a full command's door; a short command brings its driver's)."""
    return SessionRows(connection_of(session))


def run_row(session: StoreSession, digest: str) -> RunRow | None:
    return view_reads.run_row(rows_of(session), digest)


def standings(session: StoreSession, digest: str) -> dict[str, Standing]:
    return view_reads.standings(rows_of(session), digest)


def groups(
    session: StoreSession, benchmark: str | None = None, product: str | None = None
) -> list[GroupRow]:
    """Comparison groups, optionally those of a benchmark/definition on a GPU product
    (``projections.view_reads.groups``, on the session's connection)."""
    return view_reads.groups(rows_of(session), benchmark, product)


def top_of_group(session: StoreSession, key: str, view: View) -> str | None:
    return view_reads.top_of_group(rows_of(session), key, view)


def manifest_by_digest(session: StoreSession, digest: str) -> dict[str, Any] | None:
    """A manifest some admitted event carried, by its digest (None if no event did)."""
    document = session.execute(
        select(manifests.c.document).where(manifests.c.digest == digest)
    ).scalar()
    return None if document is None else dict(json.loads(document))


def leaders() -> Any:
    """One #1 run per comparison group (source-native view); among runs tied at #1 the
    smallest digest, as ``top_of_group`` and the run page's "compare with #1" take it."""
    return (
        select(ranks.c.comparison_key, func.min(ranks.c.run_digest).label("run_digest"))
        .where(ranks.c.view == str(View.SOURCE_NATIVE), ranks.c.rank == 1)
        .group_by(ranks.c.comparison_key)
        .subquery()
    )


def operations(session: StoreSession, limit: int | None = None) -> list[OperationRow]:
    """Each operation (benchmark or definition) with its runs, groups and GPUs, most runs
    first: the way in to thousands of groups."""
    query = (
        select(
            runs.c.benchmark,
            func.count().label("runs"),
            func.count(runs.c.comparison_key.distinct()).label("groups"),
            func.count(runs.c.product.distinct()).label("gpus"),
        )
        .where(runs.c.benchmark.is_not(None))
        .group_by(runs.c.benchmark)
        .order_by(func.count().desc(), runs.c.benchmark)
    )
    if limit is not None:
        query = query.limit(limit)
    return [OperationRow.from_mapping(r) for r in session.execute(query).mappings()]


def sources(session: StoreSession) -> list[SourceRow]:
    """Each source with how many runs it gave, most first."""
    query = (
        select(runs.c.source, func.count().label("runs"))
        .group_by(runs.c.source)
        .order_by(func.count().desc(), runs.c.source)
    )
    return [SourceRow.from_mapping(r) for r in session.execute(query).mappings()]


def recent_runs(session: StoreSession, limit: int) -> list[RecentRunRow]:
    """The newest runs, newest first, with what a list of them shows."""
    t = runs.c
    query = (
        select(
            t.run_digest,
            t.name,
            t.title,
            t.source,
            t.benchmark,
            t.product,
            t.claimed,
            t.unit,
            t.evidence_level,
            t.retracted,
            t.ingested_at,
            t.ingested_position,
        )
        .order_by(t.ingested_position.desc())
        .limit(limit)
    )
    return [RecentRunRow.from_mapping(r) for r in session.execute(query).mappings()]


def run_names(session: StoreSession, digest: str) -> RunNames:
    """A run's name and title (both None for a run the views do not hold)."""
    query = select(runs.c.name, runs.c.title).where(runs.c.run_digest == digest)
    row = session.execute(query).mappings().first()
    return RunNames.from_mapping(row) if row is not None else RunNames(None, None)


# What the runs list shows of each run (run_item), in ingestion order: RunListRow's fields.
RUN_LIST_COLUMNS = tuple(runs.c[f.name] for f in fields(RunListRow))


@dataclass(frozen=True)
class RunFilter:
    """Which runs a list holds (None: any); ``after`` is the last position of the page
    before (the list is in ingestion order)."""

    comparison_key: str | None = None
    source: str | None = None
    level: EvidenceLevel | None = None
    gpu: str | None = None
    benchmark: str | None = None
    after: int | None = None


def list_runs(session: StoreSession, where: RunFilter, limit: int) -> list[RunListRow]:
    """At most ``limit`` runs in ingestion order, with what the runs list shows of each."""
    t = runs.c
    query = select(*RUN_LIST_COLUMNS).order_by(t.ingested_position)
    for column, value in (
        (t.comparison_key, where.comparison_key),
        (t.source, where.source),
        (t.evidence_level, where.level.name.lower() if where.level is not None else None),
        (t.product, where.gpu),
        (t.benchmark, where.benchmark),
    ):
        if value is not None:
            query = query.where(column == value)
    if where.after is not None:
        query = query.where(t.ingested_position > where.after)
    return [RunListRow.from_mapping(r) for r in session.execute(query.limit(limit)).mappings()]


def products(session: StoreSession) -> list[str]:
    """Every GPU product a run of the views names, sorted (``view_reads.products``)."""
    return view_reads.products(rows_of(session))


def operation_spec_digests(session: StoreSession, benchmark: str) -> set[str]:
    """The OperationSpec digests the workloads of ``benchmark``'s runs name
    (``view_reads.operation_spec_digests``)."""
    return view_reads.operation_spec_digests(rows_of(session), benchmark)
