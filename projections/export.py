"""Exporting runs with the state the projections claim for them (DESIGN.md §9)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import IO, Any

from sqlalchemy import select

from ledger.application import Ledger
from ledger.bundle import ExportSummary, export_bundle
from ledger.claims import make_claim
from projections.queries import run_row, standings
from projections.runner import ProjectionRunner
from projections.tables import runs as runs_table


def export_runs(
    ledger: Ledger,
    out: IO[str],
    runs: Iterable[str] | None,
    *,
    cohort: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> ExportSummary:
    """Bundle the given runs (or a whole comparison group, or everything) with claims.

    A run's bundle also carries the other runs of its comparison group, so its rank can be
    recomputed offline. A whole-ledger bundle (``runs=None``) carries no claims.
    """
    ProjectionRunner(ledger).catch_up()
    if runs is None and cohort is None:
        return export_bundle(ledger, out, runs=None, progress=progress)
    claimed = set(runs or [])
    claims: list[dict[str, Any]] = []
    members: set[str] = set(claimed)
    with ledger.recorder.transaction(commit=False) as session:  # type: ignore[attr-defined]
        groups = {cohort} if cohort else set()
        for digest in sorted(claimed):
            row = run_row(session, digest)
            if row is not None and row["comparison_key"]:
                groups.add(str(row["comparison_key"]))
        for key in groups:
            members.update(
                str(d)
                for d in session.execute(
                    select(runs_table.c.run_digest).where(runs_table.c.comparison_key == key)
                ).scalars()
            )
        if cohort:
            claimed |= members
        for digest in sorted(claimed):
            row = run_row(session, digest)
            if row is not None:
                claims.append(make_claim(digest, row, standings(session, digest)))
    return export_bundle(ledger, out, runs=sorted(members), claims=claims, progress=progress)
