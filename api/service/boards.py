"""Leaderboards and the ways to them: groups, operations, the front page, the feed (search is
``api.service.search``).

Each answer is read from the views in one snapshot (``Views.read``), after the request's one
freshness check.
"""

from __future__ import annotations

from dataclasses import dataclass

from msgspec import structs

from api.service.board_orders import Order, best_per_user, ordered, placed, sol_score_of
from api.service.errors import BadQueryError
from api.service.freshness import Views
from api.service.models.views import (
    BoardEntry,
    BoardGroup,
    GroupSummary,
    GroupTop,
    Leaderboard,
    Operation,
    OperationAbout,
    OperationGroup,
    OperationSummary,
)
from api.service.operation_specs import operation_about
from api.service.paging import next_start
from api.service.runs import Runs
from api.service.sweeps import place_in, sweep_of
from domain.evidence import EvidenceLevel
from domain.gpu_names import match_gpu
from domain.ranking import View
from ledger.errors import AmbiguousReferenceError, NotFoundError
from ledger.store.event_store import StoreSession
from projections import queries, view_reads
from projections.group_labels import GroupLabel, group_labels
from projections.records import (
    GroupName,
)
from projections.rows import BoardRow, GroupHeading, OperationGroupRow, RecentRunRow, SourceRow
from projections.view_reads import resolve_group

BOARD_PAGE = 100  # entries per leaderboard page (API); the pages show 50
BOARD_MAX = 500

__all__ = [
    "BOARD_MAX",
    "BOARD_PAGE",
    "Boards",
    "FrontPage",
    "GroupName",
    "Order",
]


@dataclass(frozen=True)
class FrontPage:
    """What the index page shows: the biggest groups (and how many there are), the
    operations with the most runs, the sources and the newest runs."""

    groups: list[GroupSummary]
    group_count: int
    operations: list[OperationSummary]
    sources: list[SourceRow]
    recent: list[RecentRunRow]


class Boards:
    def __init__(self, views: Views, runs: Runs) -> None:
        self.views = views
        self.runs = runs

    def resolve(self, reference: str) -> str:
        """A comparison group by its key or a unique prefix of it."""
        return self.views.read(lambda session: resolve_group(queries.rows_of(session), reference))

    def groups(self, benchmark: str | None = None, gpu: str | None = None) -> list[GroupSummary]:
        """Comparison groups, of ``benchmark`` and/or on the GPU ``gpu`` names as a person
        types it (``domain.gpu_names``)."""

        def read(session: StoreSession) -> list[GroupSummary]:
            product = _product(session, gpu) if gpu is not None else None
            return _groups(session, benchmark, product)

        return self.views.read(read)

    def gpu(self, typed: str) -> str:
        """The GPU product ``typed`` names: 404 when none, 400 with the candidates when
        several."""
        return self.views.read(lambda session: _product(session, typed))

    def operations(self, limit: int | None = None) -> list[OperationSummary]:
        return self.views.read(lambda session: _operations(session, limit))

    def operation(self, name: str) -> Operation:
        """One operation's groups, by GPU, each with its #1 and what sets it apart from the
        groups that look like it."""

        def read(
            session: StoreSession,
        ) -> tuple[list[OperationGroupRow], list[GroupLabel], OperationAbout | None]:
            rows = view_reads.operation_groups(queries.rows_of(session), name)
            labels = group_labels(queries.rows_of(session), [r.comparison_key for r in rows])
            return rows, labels, operation_about(session, name) if rows else None

        rows, labels, about = self.views.read(read)
        if not rows:
            raise NotFoundError(f"no comparison group of an operation named {name!r}")
        by_key = {label.key: label for label in labels}
        groups = []
        for r in rows:
            label = by_key[r.comparison_key]
            alike = label.lookalikes(labels)
            groups.append(
                OperationGroup(
                    comparison_key=r.comparison_key,
                    gpu=r.product,
                    metric=r.metric,
                    statistic=r.statistic,
                    unit=r.unit,
                    runs=r.runs,
                    parts=label.parts,
                    apart_by=label.separated_by(alike) if alike else None,
                    apart_short=label.short_apart(alike) if alike else None,
                    top=GroupTop(run=r.top_run, name=r.top_name, value=r.top_value),
                )
            )
        return Operation(
            operation=name,
            gpus=sorted({g.gpu for g in groups if g.gpu}),
            stacks=sorted({g.parts["protocol"] for g in groups}),
            about=about,
            groups=groups,
        )

    def leaderboard(
        self,
        reference: str,
        view: View,
        min_level: EvidenceLevel | None = None,
        start: int = 1,
        limit: int = BOARD_PAGE,
        order: Order = Order.RANK,
        per_user: bool = False,
    ) -> Leaderboard:
        """A page of a group's ranking (the group by key or unique prefix): ``limit``
        entries from the ``start``-th (1-based) of ``order``, every ranked run or each
        author's best (``board_orders``)."""
        board, _ = self.board_page(reference, view, start, limit, min_level, order, per_user)
        return board

    def board_page(
        self,
        reference: str,
        view: View,
        start: int,
        limit: int,
        min_level: EvidenceLevel | None = None,
        order: Order = Order.RANK,
        per_user: bool = False,
    ) -> tuple[Leaderboard, GroupHeading | None]:
        """A leaderboard page as its page shows it: with its group's heading (benchmark,
        GPU, metric and number of runs)."""
        size = max(1, min(limit, BOARD_MAX))
        whole = order is not Order.RANK or per_user  # the order is not the ranking's pages

        def read(session: StoreSession) -> _Read:
            rows = queries.rows_of(session)
            key = resolve_group(rows, reference)
            if not view_reads.group_exists(rows, key):
                raise NotFoundError(f"no comparison group {key}")
            page = {} if whole else {"offset": start - 1, "limit": size}
            return _Read(
                key=key,
                rows=view_reads.leaderboard(rows, key, view, min_level, **page),
                best=view_reads.leaderboard(rows, key, view, min_level, limit=1),
                total=view_reads.ranked_count(rows, key, view, min_level),
                group=_board_group(session, key),
                heading=view_reads.group_heading(rows, key),
            )

        found = self.views.read(read)
        group = found.group
        if order is Order.SOL_SCORE and not group.has_sol_score:
            raise BadQueryError(
                f"order {order}: the runs of group {found.key[:19]}… have no SOL score "
                f"(only SOL-ExecBench gives one; this group's source is {group.source})"
            )
        first = found.best[0].value if found.best else None
        entries = [board_entry(r, first) for r in found.rows]
        if group.has_sol_score:
            entries = [
                structs.replace(e, sol_score=sol_score_of(self.views.ledger.run_manifests(e.run)))
                for e in entries
            ]
        total = found.total
        if whole:
            entries = ordered(entries, order)
            if per_user:
                entries = best_per_user(entries)
            total = len(entries)
            entries = entries[start - 1 : start - 1 + size]
        board = Leaderboard(
            comparison_key=found.key,
            view=str(view),
            min_level=min_level.name.lower() if min_level is not None else None,
            order=str(order),
            per_user=per_user,
            total=total,
            start=start,
            next=next_start(start, size, total),
            group=group,
            entries=placed(entries, start),
        )
        return board, found.heading

    def front_page(self, groups: int, operations: int, recent: int) -> FrontPage:
        """The index page's reads, in one snapshot: the ``groups`` biggest groups, the
        ``operations`` with most runs, the sources, the ``recent`` newest runs."""

        def read(session: StoreSession) -> FrontPage:
            every = _groups(session, None, None)
            biggest = sorted(every, key=lambda g: (-g.runs, g.comparison_key))[:groups]
            return FrontPage(
                groups=biggest,
                group_count=len(every),
                operations=_operations(session, operations),
                sources=queries.sources(session),
                recent=queries.recent_runs(session, recent),
            )

        return self.views.read(read)


@dataclass(frozen=True)
class _Read:
    key: str
    rows: list[BoardRow]
    best: list[BoardRow]
    total: int
    group: BoardGroup
    heading: GroupHeading | None


def _product(session: StoreSession, typed: str) -> str:
    """The one GPU product ``typed`` names (``domain.gpu_names.match_gpu``)."""
    known = queries.products(session)
    found = match_gpu(typed, known)
    if found.name is not None:
        return found.name
    if found.candidates:
        raise AmbiguousReferenceError(
            f"GPU {typed!r} could be any of: {', '.join(found.candidates)}; type more of its name"
        )
    raise NotFoundError(f"no GPU named {typed!r}; the ledger has runs on: {', '.join(known)}")


def _board_group(session: StoreSession, key: str) -> BoardGroup:
    """What the board ranks: its operation and GPU, its parts, what sets it apart from the
    operation's groups that look like it, and the sweep it is one workload of."""
    rows = queries.rows_of(session)
    identity = view_reads.group_identity(rows, key)
    benchmark, product, source = identity if identity is not None else (None, None, None)
    siblings = view_reads.operation_groups(rows, benchmark) if benchmark is not None else []
    labels = group_labels(rows, list({key, *(r.comparison_key for r in siblings)}))
    label = next(lab for lab in labels if lab.key == key)
    alike = label.lookalikes(labels)
    sweep = sweep_of(label, alike)
    about = operation_about(session, benchmark) if benchmark is not None else None
    return BoardGroup(
        benchmark=benchmark,
        gpu=product,
        source=source,
        parts=label.parts,
        apart_by=label.separated_by(alike) if alike else None,
        sweep_workloads=len(sweep),
        sweep=place_in(label, sweep),
        description=about.description if about is not None else None,
        has_sol_score=source == "sol-execbench",
        has_authors=view_reads.group_has_authors(rows, key),
    )


def _groups(session: StoreSession, benchmark: str | None, gpu: str | None) -> list[GroupSummary]:
    return [
        GroupSummary(
            comparison_key=r.comparison_key,
            benchmark=r.benchmark,
            gpu=r.product,
            metric=r.metric,
            statistic=r.statistic,
            unit=r.unit,
            runs=r.runs,
        )
        for r in queries.groups(session, benchmark, gpu)
    ]


def _operations(session: StoreSession, limit: int | None) -> list[OperationSummary]:
    return [
        OperationSummary(operation=r.benchmark, runs=r.runs, groups=r.groups, gpus=r.gpus)
        for r in queries.operations(session, limit)
    ]


def board_entry(row: BoardRow, first: float | None) -> BoardEntry:
    """A ranked run as a board shows it; its place, SOL score and per-user facts are set
    by the order it is shown in (``board_orders``)."""
    return BoardEntry(
        rank=row.rank,
        of=row.of_count,
        run=row.run_digest,
        name=row.name,
        title=row.title,
        source=row.source,
        external_id=row.external_id,
        evidence_level=row.evidence_level,
        value=row.value,
        unit=row.unit,
        metric=row.metric,
        statistic=row.statistic,
        claimed=row.claimed,
        rerun_median_ns=row.rerun_median_ns,
        author=row.author,
        tied_with=row.tied_runs,
        ratio_to_first=row.value / first if first else None,
        place=row.rank,
        sol_score=None,
        runs_of_author=None,
        gap_to_next=None,
    )
