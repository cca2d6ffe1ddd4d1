"""The views' reads that every face runs as the same text (issue 33), defined once in Core.

As ``ledger.store.read_queries`` does for the ledger's own tables: each statement is
defined here over the views' tables (``projections.tables``) and compiled ahead, per
dialect, into ``projections.view_statements`` (generated: ``python -m
projections.view_queries`` rewrites it; tests/projections/test_view_statements.py fails
when it differs from what these definitions compile to). ``projections.view_reads`` runs
them on a ``Rows`` (``ledger.store.read_door``): the server's and a full command's
SQLAlchemy connection, or a short command's driver connection.

The leaderboard's reads are here (its group, labels, groups and GPUs, the workloads that
name its operation's definition; its SOL scores and the definition are the ledger's own
tables, ``ledger.store.read_queries``); the others still run as Core on a session.
"""

from __future__ import annotations

import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from sqlalchemy import Select, and_, bindparam, exists, func, or_, select

from domain.ranking import View
from ledger.store.read_only import events_table
from ledger.store.read_queries import Queries, generated_module
from projections.queries import leaders
from projections.reference_text import SHOWN
from projections.rows import RunRow
from projections.run_views import RUNNER_NAME
from projections.tables import (
    VIEWS_VERSION,
    manifests,
    ranks,
    runs,
    stale_groups,
    tracking,
    view_schema,
)

GENERATED = Path(__file__).with_name("view_statements.py")


def _board(paged: bool) -> Select[Any]:
    """Ranked runs of group ``key`` in view ``view``, best first (ties by run digest), of
    evidence order ``min_order`` or above; ``paged``: ``limit`` of them from ``offset``."""
    query = (
        select(
            ranks.c.rank,
            ranks.c.of_count,
            ranks.c.value,
            ranks.c.tied_with,
            runs.c.run_digest,
            runs.c.name,
            runs.c.title,
            runs.c.source,
            runs.c.external_id,
            runs.c.evidence_level,
            runs.c.evidence_order,
            runs.c.metric,
            runs.c.statistic,
            runs.c.unit,
            runs.c.claimed,
            runs.c.rerun_median_ns,
            runs.c.author,
        )
        .join(runs, runs.c.run_digest == ranks.c.run_digest)
        .where(
            ranks.c.comparison_key == bindparam("key"),
            ranks.c.view == bindparam("view"),
            runs.c.evidence_order >= bindparam("min_order"),
        )
        .order_by(ranks.c.rank, ranks.c.run_digest)
    )
    return query.limit(bindparam("limit")).offset(bindparam("offset")) if paged else query


def _ranked_count() -> Select[Any]:
    return (
        select(func.count())
        .select_from(ranks)
        .join(runs, runs.c.run_digest == ranks.c.run_digest)
        .where(
            ranks.c.comparison_key == bindparam("key"),
            ranks.c.view == bindparam("view"),
            runs.c.evidence_order >= bindparam("min_order"),
        )
    )


def _group_heading() -> Select[Any]:
    """Benchmark, GPU and metric of group ``key`` (one member's: they share them), with its
    number of runs."""
    t = runs.c
    counted = runs.alias("counted")
    count = select(func.count()).where(counted.c.comparison_key == bindparam("key"))
    return (
        select(
            t.benchmark,
            t.product,
            t.metric,
            t.statistic,
            t.unit,
            count.scalar_subquery().label("runs"),
        )
        .where(t.comparison_key == bindparam("key"))
        .limit(1)
    )


def _group_identity() -> Select[Any]:
    t = runs.c
    return select(t.benchmark, t.product, t.source).where(t.comparison_key == bindparam("key"))


def _group_exists() -> Select[Any]:
    return select(runs.c.run_digest).where(runs.c.comparison_key == bindparam("key")).limit(1)


def _group_has_authors() -> Select[Any]:
    return (
        select(runs.c.run_digest)
        .where(runs.c.comparison_key == bindparam("key"), runs.c.author.is_not(None))
        .limit(1)
    )


def _group_keys() -> Select[Any]:
    """At most ``limit`` comparison keys matching ``pattern`` (a digest prefix and ``%``:
    hex digits hold no LIKE wildcard), in order."""
    return (
        select(runs.c.comparison_key)
        .where(runs.c.comparison_key.like(bindparam("pattern")))
        .distinct()
        .order_by(runs.c.comparison_key)
        .limit(bindparam("limit"))
    )


def _operation_groups() -> Select[Any]:
    """The comparison groups of operation ``benchmark`` with each group's #1
    (source-native; ``projections.queries.leaders``)."""
    counted = (
        select(
            runs.c.comparison_key,
            runs.c.product,
            runs.c.metric,
            runs.c.statistic,
            runs.c.unit,
            func.count().label("runs"),
        )
        .where(runs.c.benchmark == bindparam("benchmark"), runs.c.comparison_key.is_not(None))
        .group_by(
            runs.c.comparison_key, runs.c.product, runs.c.metric, runs.c.statistic, runs.c.unit
        )
        .subquery()
    )
    first = leaders()
    top = runs.alias("top")
    return (
        select(
            counted,
            first.c.run_digest.label("top_run"),
            ranks.c.value.label("top_value"),
            top.c.name.label("top_name"),
        )
        .outerjoin(first, first.c.comparison_key == counted.c.comparison_key)
        .outerjoin(
            ranks,
            (ranks.c.run_digest == first.c.run_digest) & (ranks.c.view == str(View.SOURCE_NATIVE)),
        )
        .outerjoin(top, top.c.run_digest == first.c.run_digest)
        .order_by(counted.c.product, counted.c.runs.desc(), counted.c.comparison_key)
    )


def _group_members() -> Select[Any]:
    """One member of each group of ``keys`` (the smallest digest: every member shares what
    the key is made of) with the group's number of runs: what ``group_labels`` names."""
    member = (
        select(
            runs.c.comparison_key,
            func.min(runs.c.run_digest).label("run"),
            func.count().label("runs"),
        )
        .where(runs.c.comparison_key.in_(bindparam("keys", expanding=True)))
        .group_by(runs.c.comparison_key)
        .subquery()
    )
    return select(
        member.c.comparison_key,
        member.c.runs,
        runs.c.benchmark,
        runs.c.product,
        runs.c.protocol_digest,
        runs.c.environment_digest,
        runs.c.workload_digest,
        runs.c.metric,
        runs.c.statistic,
        runs.c.unit,
    ).join(runs, runs.c.run_digest == member.c.run)


def _manifest_documents() -> Select[Any]:
    return select(manifests.c.digest, manifests.c.name, manifests.c.document).where(
        manifests.c.digest.in_(bindparam("digests", expanding=True))
    )


def _views_state() -> Select[Any]:
    """What decides whether the views answer as a command's catch-up would leave them: the
    build that stamped them, whether any event lies past the position they were folded to,
    and whether any group still waits to be re-ranked. One row, in the read's snapshot."""
    position = func.coalesce(
        select(tracking.c.position)
        .where(tracking.c.name == bindparam("runner", RUNNER_NAME))
        .scalar_subquery(),
        0,
    )
    return select(
        select(view_schema.c.version).where(view_schema.c.id == 1).scalar_subquery(),
        exists(select(events_table.c.id).where(events_table.c.id > position)),
        exists(select(stale_groups.c.comparison_key)),
    )


# The leaderboard's groups and GPUs, and its operation's definition (helper board).


def _groups(of_benchmark: bool, on_product: bool) -> Select[Any]:
    """Comparison groups with what their runs were measured as and how many there are, by
    benchmark, product and key: of ``benchmark`` only and/or on ``product`` only."""
    t = runs.c
    query = (
        select(t.comparison_key, t.benchmark, t.product, t.metric, t.statistic, t.unit)
        .add_columns(func.count().label("runs"))
        .where(t.comparison_key.is_not(None))
        .group_by(t.comparison_key, t.benchmark, t.product, t.metric, t.statistic, t.unit)
        .order_by(t.benchmark, t.product, t.comparison_key)
    )
    if of_benchmark:
        query = query.where(t.benchmark == bindparam("benchmark"))
    if on_product:
        query = query.where(t.product == bindparam("product"))
    return query


def _products() -> Select[Any]:
    """Every GPU product a run names, in order."""
    return (
        select(runs.c.product)
        .where(runs.c.product.is_not(None))
        .distinct()
        .order_by(runs.c.product)
    )


def _operation_workloads() -> Select[Any]:
    """The workload manifests the runs of ``benchmark`` name (each names its operation's
    spec by digest)."""
    named = (
        select(runs.c.workload_digest)
        .where(runs.c.benchmark == bindparam("benchmark"), runs.c.workload_digest.is_not(None))
        .distinct()
    )
    return select(manifests.c.document).where(manifests.c.digest.in_(named))


# A run named by what a person types (projections.references.resolve_run; helper "runs").
def _run_matches(*conditions: Any) -> Select[Any]:
    return (
        select(
            runs.c.run_digest,
            runs.c.name,
            runs.c.source,
            runs.c.external_id,
            runs.c.product,
            runs.c.benchmark,
        )
        .where(or_(*conditions))
        .order_by(runs.c.run_digest)
        .limit(SHOWN + 1)
    )


def _runs_named() -> Select[Any]:
    """Runs whose name or source's id is ``ref``, or whose source is ``source`` and id is
    ``id`` (both NULL when ``ref`` is not ``SOURCE#ID``: then nothing matches them)."""
    ref: Any = bindparam("ref")
    return _run_matches(
        runs.c.name == ref,
        runs.c.external_id == ref,
        and_(runs.c.source == bindparam("source"), runs.c.external_id == bindparam("id")),
    )


def _runs_prefixed() -> Select[Any]:
    """Runs whose digest starts ``pattern`` (hex and ``sha256:``: nothing to escape)."""
    return _run_matches(runs.c.run_digest.like(bindparam("pattern")))


# What the views say of one run: its row, its standings, its group's #1 and the groups of its
# sweep (``projections.view_reads``; helper "runs").
def _run_row() -> Select[Any]:
    return select(*(runs.c[f.name] for f in fields(RunRow))).where(
        runs.c.run_digest == bindparam("digest")
    )


def _run_standings() -> Select[Any]:
    r = ranks.c
    return select(r.view, r.rank, r.of_count, r.value, r.tied_with).where(
        r.run_digest == bindparam("digest")
    )


def _group_top() -> Select[Any]:
    """A group's #1 in ``view``: among runs tied at #1 the smallest digest."""
    return (
        select(ranks.c.run_digest)
        .where(ranks.c.comparison_key == bindparam("key"), ranks.c.view == bindparam("view"))
        .order_by(ranks.c.rank, ranks.c.run_digest)
        .limit(1)
    )


# Search (``projections.search_index``, ``projections.search``): the runs a search indexes,
# what tells whether they moved since an index was built, and each group's #1.


def _search_position() -> Select[Any]:
    """The position of the last event folded into the views (no row: none yet)."""
    return select(tracking.c.position).where(tracking.c.name == bindparam("runner", RUNNER_NAME))


def _search_fingerprint_runs() -> Select[Any]:
    """The grouped runs: how many, the newest, and sums that move with any evidence change."""
    return select(
        func.count(),
        func.coalesce(func.max(runs.c.ingested_position), 0),
        func.coalesce(func.sum(runs.c.evidence_caused_by), 0),
        func.coalesce(func.sum(runs.c.evidence_order), 0),
    ).where(runs.c.comparison_key.is_not(None))


def _search_fingerprint_manifests() -> Select[Any]:
    return select(func.count(), func.coalesce(func.max(manifests.c.position), 0))


def _search_runs() -> Select[Any]:
    """Every grouped run's searchable columns, in log order."""
    t = runs.c
    return (
        select(
            t.comparison_key,
            t.benchmark,
            t.product,
            t.source,
            t.evidence_level,
            t.evidence_order,
            t.name,
            t.ingested_position,
            t.protocol_digest,
            t.workload_digest,
            t.title,
            t.author,
            t.external_id,
            t.run_digest,
            t.implementation_digest,
        )
        .where(t.comparison_key.is_not(None))
        .order_by(t.ingested_position, t.run_digest)
    )


def _group_tops() -> Select[Any]:
    """Each group of ``keys``'s #1 in the source-native view, with its value, name and unit."""
    first = leaders()
    return (
        select(first.c.comparison_key, first.c.run_digest, ranks.c.value, runs.c.name, runs.c.unit)
        .join(
            ranks,
            (ranks.c.run_digest == first.c.run_digest) & (ranks.c.view == str(View.SOURCE_NATIVE)),
        )
        .join(runs, runs.c.run_digest == first.c.run_digest)
        .where(first.c.comparison_key.in_(bindparam("keys", expanding=True)))
    )


QUERIES: Queries = {
    "board_page": (lambda: _board(paged=True), ("key", "view", "min_order", "limit", "offset")),
    "board": (lambda: _board(paged=False), ("key", "view", "min_order")),
    "ranked_count": (_ranked_count, ("key", "view", "min_order")),
    "group_heading": (_group_heading, ("key",)),
    "group_identity": (lambda: _group_identity().limit(1), ("key",)),
    "group_exists": (_group_exists, ("key",)),
    "group_has_authors": (_group_has_authors, ("key",)),
    "group_keys": (_group_keys, ("pattern", "limit")),
    "operation_groups": (_operation_groups, ("benchmark",)),
    "group_members": (_group_members, ("keys",)),
    "manifest_documents": (_manifest_documents, ("digests",)),
    "views_state": (_views_state, ()),
    # The leaderboard's groups and GPUs, and its operation's definition (helper board).
    "groups": (lambda: _groups(False, False), ()),
    "groups_of_benchmark": (lambda: _groups(True, False), ("benchmark",)),
    "groups_on_product": (lambda: _groups(False, True), ("product",)),
    "groups_of_benchmark_on_product": (lambda: _groups(True, True), ("benchmark", "product")),
    "products": (_products, ()),
    "operation_workloads": (_operation_workloads, ("benchmark",)),
    # A run's history and record through the door (helper "runs").
    "runs_named": (_runs_named, ("ref", "source", "id")),
    "runs_prefixed": (_runs_prefixed, ("pattern",)),
    "run_row": (_run_row, ("digest",)),
    "run_standings": (_run_standings, ("digest",)),
    "group_top": (_group_top, ("key", "view")),
    # Search (manifests: "manifest_documents").
    "search_position": (_search_position, ()),
    "search_fingerprint_runs": (_search_fingerprint_runs, ()),
    "search_fingerprint_manifests": (_search_fingerprint_manifests, ()),
    "search_runs": (_search_runs, ()),
    "group_tops": (_group_tops, ("keys",)),
}


def generate() -> str:
    """The text of ``projections.view_statements`` (as ``ruff format`` leaves it)."""
    return generated_module(
        QUERIES,
        made_by="projections.view_queries",
        tested_by="tests/projections/test_view_statements.py",
        constants={"VIEWS_VERSION": VIEWS_VERSION},
    )


if __name__ == "__main__":
    GENERATED.write_text(generate(), "utf-8")
    sys.stdout.write(f"wrote {GENERATED}\n")
