"""The registry's reads of the views: runs gathered by GPU or by implementation author.

A GPU is the product a run's environment names (the runs view's ``product``); an author the
implementation manifest's ``metadata.authors`` as the runs view keeps them (``author``).
Both are compared exactly, as stored: matching what a person types to a stored name is the
GPU-name matcher's business, not this module's.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Final, Literal

from sqlalchemy import ColumnElement, func, select

from ledger.store.event_store import StoreSession
from projections.queries import RUN_LIST_COLUMNS
from projections.records import VIEW
from projections.rows import RunListRow
from projections.tables import ranks, records, runs

Facet = Literal["gpu", "author"]
COLUMNS: Final = {"gpu": runs.c.product, "author": runs.c.author}


@dataclass(frozen=True)
class FacetRow:
    """One GPU or author with counts of its runs and what they hold."""

    name: str
    runs: int
    groups: int
    operations: int
    gpus: int
    authors: int
    records: int = 0
    holds: int = 0


def facet_rows(session: StoreSession, facet: Facet, name: str | None = None) -> list[FacetRow]:
    """Every GPU or author the runs name (or the one named ``name``), most runs first."""
    column = COLUMNS[facet]
    chosen: ColumnElement[bool] = column.is_not(None) if name is None else column == name
    t = runs.c
    counts = select(
        column,
        func.count(),
        func.count(t.comparison_key.distinct()),
        func.count(t.benchmark.distinct()),
        func.count(t.product.distinct()),
        func.count(t.author.distinct()),
    ).where(chosen)
    found = {
        str(row[0]): FacetRow(str(row[0]), *(int(v) for v in row[1:]))
        for row in session.execute(counts.group_by(column)).all()
    }
    joined = runs.join(records, records.c.run_digest == t.run_digest)
    set_records = select(column, func.count()).select_from(joined).where(chosen)
    joined_ranks = runs.join(ranks, ranks.c.run_digest == t.run_digest)
    firsts = (
        select(column, func.count(ranks.c.comparison_key.distinct()))
        .select_from(joined_ranks)
        .where(chosen, ranks.c.view == str(VIEW), ranks.c.rank == 1)
    )
    extra: dict[str, dict[str, int]] = {}
    for field, query in (("records", set_records), ("holds", firsts)):
        for row in session.execute(query.group_by(column)).all():
            extra.setdefault(str(row[0]), {})[field] = int(row[1])
    rows = [FacetRow(**(_as_dict(row) | extra.get(key, {}))) for key, row in found.items()]
    return sorted(rows, key=lambda r: (-r.runs, r.name))


def _as_dict(row: FacetRow) -> dict[str, Any]:
    return {f.name: getattr(row, f.name) for f in fields(row)}


def facet_runs(
    session: StoreSession, facet: Facet, name: str, after: int | None, limit: int
) -> list[RunListRow]:
    """At most ``limit`` runs of the GPU or author ``name`` in log order, after position
    ``after`` (the last of the page before)."""
    query = select(*RUN_LIST_COLUMNS).where(COLUMNS[facet] == name)
    if after is not None:
        query = query.where(runs.c.ingested_position > after)
    query = query.order_by(runs.c.ingested_position).limit(limit)
    return [RunListRow.from_mapping(r) for r in session.execute(query).mappings()]


def unnamed_runs(session: StoreSession, facet: Facet) -> int:
    """How many runs name no GPU (or no author)."""
    query = select(func.count()).select_from(runs).where(COLUMNS[facet].is_(None))
    return int(session.execute(query).scalar_one())
