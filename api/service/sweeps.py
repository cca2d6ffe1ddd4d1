"""Where a comparison group stands in its operation's workload sweep, and what a run's rank
means there.

A sweep is the groups of one operation on one GPU, with one protocol, environment and metric,
that differ only by workload (FlashInfer-Bench's batch sizes, SOL-ExecBench's shapes): each
workload is its own comparison group and ranks alone, so a run there is often "Rank 1 of 1".
Said bare, that reads as a win; a kernel engineer wants the workload it ranks on, where that
workload sits in the sweep, and, when the run is its workload's only one, that it has no rank
among others. One rule for every face: the board's group, the run's record (its page, its
``/v1`` JSON and ``kernelindex show`` print the standings' labels made here).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from api.service.models.views import SweepPlace
from ledger.store.read_door import Rows
from projections import view_reads
from projections.group_labels import GroupLabel, group_labels
from projections.rows import Standing

_DIGITS = re.compile(r"(\d+)")


def _natural(name: str) -> tuple[tuple[int, int | str], ...]:
    """Order workload names as people count: batch_size 2 before batch_size 16."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in _DIGITS.split(name) if p)


def _workload(label: GroupLabel, sweep: Sequence[GroupLabel]) -> str:
    """The group's workload by what sets it apart in the sweep ("batch_size=16" of
    "fused_add_rmsnorm_h2048 · batch_size=16"), else by its whole name."""
    others = [o for o in sweep if o.key != label.key]
    return (others and label.short_apart(others)) or label.parts.get("workload", "?")


def sweep_of(label: GroupLabel, lookalikes: Sequence[GroupLabel]) -> list[GroupLabel]:
    """The groups of ``label``'s sweep, itself among them, in the order of their workloads:
    those of ``lookalikes`` (its operation and GPU) whose every part but the workload is its."""
    same = [
        o
        for o in [label, *lookalikes]
        if all(o.parts.get(p) == label.parts.get(p) for p in label.parts if p != "workload")
    ]
    return sorted(same, key=lambda o: (_natural(o.parts.get("workload", "")), o.key))


def place_in(label: GroupLabel, sweep: Sequence[GroupLabel]) -> SweepPlace | None:
    """Where ``label`` stands in ``sweep`` (None: a group alone is no sweep)."""
    if len(sweep) < 2:
        return None
    position = next(i for i, o in enumerate(sweep, 1) if o.key == label.key)
    return SweepPlace(workload=_workload(label, sweep), position=position, workloads=len(sweep))


def group_place(rows: Rows, key: str) -> SweepPlace | None:
    """Where group ``key`` stands in its sweep, read from the views (None: in none)."""
    identity = view_reads.group_identity(rows, key)
    if identity is None or identity[0] is None:
        return None
    benchmark, product, _ = identity
    keys = [g.comparison_key for g in view_reads.groups(rows, benchmark, product)]
    labels = group_labels(rows, list({key, *keys}))
    label = next((lab for lab in labels if lab.key == key), None)
    if label is None:
        return None
    return place_in(label, sweep_of(label, label.lookalikes(labels)))


class SweepPlaces:
    """:func:`group_place`, remembered per position of the views (issue 34: 2.5–3.5 ms of
    CPU per run record, the same answer every time until the views move).

    A group's place is read from the views' runs alone (their groups, identities and
    labels), which change only in a fold's batch, in the transaction that moves their
    position: at one position it is one answer. The caller passes the position its snapshot
    reads at (``Views.position_in``); a read at another one starts the memo afresh. One
    per service, so per ledger."""

    _KEPT = 4096  # groups remembered at one position (a page reads one)

    def __init__(self) -> None:
        self._at: tuple[int, dict[str, SweepPlace | None]] = (-1, {})

    def place(self, rows: Rows, key: str, position: int) -> SweepPlace | None:
        at, known = self._at
        if at != position or len(known) >= self._KEPT:
            # Threads reading at different positions each fill their own position's memo.
            known = {}
            self._at = (position, known)
        if key not in known:
            known[key] = group_place(rows, key)
        return known[key]


def standing_label(standing: Standing, sweep: SweepPlace | None) -> str:
    """A run's standing in one view, in words: in a sweep, among the runs of its workload
    (or none, as its workload's only run); elsewhere, in its comparison group."""
    if sweep is None:
        return standing.label
    workload = f"workload {sweep.workload} ({sweep.position} of {sweep.workloads} in its sweep)"
    view = f"{standing.view} comparison"
    if standing.of == 1:
        return f"Not ranked: the only run of {workload} · {view}"
    return f"Rank {standing.rank} of {standing.of} among the runs of {workload} · {view}"
