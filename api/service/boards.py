"""Leaderboards and the ways to them: groups, operations, the front page, the feed (search is
``api.service.search``).

Each answer is read from the views in one snapshot (``Views.read``), after the request's one
freshness check.
"""

from __future__ import annotations

from dataclasses import dataclass

from api.service.board_orders import Order
from api.service.board_pages import BOARD_MAX, BOARD_PAGE, board_page, gpu_product, group_summaries
from api.service.freshness import Views
from api.service.models.views import (
    GroupSummary,
    GroupTop,
    Leaderboard,
    Operation,
    OperationAbout,
    OperationGroup,
    OperationSummary,
)
from api.service.operation_specs import operation_about
from api.service.runs import Runs
from domain.evidence import EvidenceLevel
from domain.ranking import View
from ledger.errors import NotFoundError
from ledger.store.event_store import StoreSession
from projections import queries, view_reads
from projections.group_labels import GroupLabel, group_labels
from projections.records import (
    GroupName,
)
from projections.rows import GroupHeading, OperationGroupRow, RecentRunRow, SourceRow
from projections.view_reads import resolve_group

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

        return self.views.read(
            lambda session: group_summaries(queries.rows_of(session), benchmark, gpu)
        )

    def gpu(self, typed: str) -> str:
        """The GPU product ``typed`` names: 404 when none, 400 with the candidates when
        several."""
        return self.views.read(lambda session: gpu_product(queries.rows_of(session), typed))

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
        GPU, metric and number of runs); ``api.service.board_pages.board_page``, in the views'
        snapshot."""
        return self.views.read(
            lambda session: board_page(
                queries.rows_of(session), reference, view, start, limit, min_level, order, per_user
            )
        )

    def front_page(self, groups: int, operations: int, recent: int) -> FrontPage:
        """The index page's reads, in one snapshot: the ``groups`` biggest groups, the
        ``operations`` with most runs, the sources, the ``recent`` newest runs."""

        def read(session: StoreSession) -> FrontPage:
            every = group_summaries(queries.rows_of(session))
            biggest = sorted(every, key=lambda g: (-g.runs, g.comparison_key))[:groups]
            return FrontPage(
                groups=biggest,
                group_count=len(every),
                operations=_operations(session, operations),
                sources=queries.sources(session),
                recent=queries.recent_runs(session, recent),
            )

        return self.views.read(read)


def _operations(session: StoreSession, limit: int | None) -> list[OperationSummary]:
    return [
        OperationSummary(operation=r.benchmark, runs=r.runs, groups=r.groups, gpus=r.gpus)
        for r in queries.operations(session, limit)
    ]
