"""Exporting runs with the state the projections claim for them (DESIGN.md §9).

The claims and the tree size they are about are read together (``ProjectionRunner.snapshot``):
the bundle is exported as of the leaf that logs the last event the views had folded, so an
honest bundle's claims are exactly what its events give. The runs, groups and keys in scope
are the ledger's own decision (``ledger.bundle``), from its group index, not the views'.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict
from typing import IO, Any, TypeVar

from sqlalchemy import select

from ledger.application import Ledger
from ledger.bundle import ExportSummary, export_bundle
from ledger.store.event_store import StoreSession
from ledger.store.group_index import group_of
from ledger.verify import make_claim
from projections.queries import run_row, standings
from projections.runner import ProjectionRunner
from projections.tables import runs as runs_table

T = TypeVar("T")
# How a caller reads the views (``ProjectionRunner.snapshot``, or its own freshness first).
ViewsReader = Callable[[Callable[[StoreSession], T]], tuple[int, T]]


def export_runs(
    ledger: Ledger,
    out: IO[str],
    runs: Iterable[str] | None,
    *,
    cohort: str | None = None,
    held: Iterable[int] = (),
    progress: Callable[[int], None] | None = None,
    group: bool = True,
    read_views: ViewsReader[tuple[set[str], list[dict[str, Any]]]] | None = None,
) -> ExportSummary:
    """Bundle the given runs (or a whole comparison group, or everything) with claims.

    A run's bundle also carries every other run of its comparison group, with the group's
    head, so its rank can be recomputed offline. A whole-ledger bundle (``runs=None``)
    carries no claims. ``held``: tree sizes of checkpoints the requester holds.
    ``group=False``: the runs and their signers only, without their groups and so without
    claims (a history). ``read_views``: how the caller reads the views, brought up to date
    as it decides (the service's freshness); by default the views are caught up first.
    """
    if read_views is None:
        runner = ProjectionRunner(ledger)
        runner.catch_up()
        read_views = runner.snapshot
    if runs is None and cohort is None:
        return export_bundle(ledger, out, runs=None, held=held, progress=progress)
    asked = sorted(set(runs or []))

    def read(session: StoreSession) -> tuple[set[str], list[dict[str, Any]]]:
        if not group:
            return set(), []
        groups = {cohort} if cohort else set()
        groups.update(g for d in asked if (g := group_of(session, d)) is not None)
        claimed = set(asked)
        if cohort:
            claimed.update(
                str(d)
                for d in session.execute(
                    select(runs_table.c.run_digest).where(runs_table.c.comparison_key == cohort)
                ).scalars()
            )
        claims = []
        for digest in sorted(claimed):
            row = run_row(session, digest)
            if row is not None:
                # make_claim (ledger.verify) reads the run's columns by name, as a mapping.
                claims.append(make_claim(digest, asdict(row), standings(session, digest)))
        return groups, claims

    position, (groups, claims) = read_views(read)
    with ledger.store.transaction(commit=False) as session:
        size = ledger.tlog.size_at_position(session, position)
    return export_bundle(
        ledger,
        out,
        runs=asked,
        groups=groups,
        claims=claims,
        size=size,
        held=held,
        progress=progress,
    )
