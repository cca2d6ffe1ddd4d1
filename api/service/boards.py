"""Leaderboards and the ways to them: groups, operations, the front page, the feed (search is
``api.service.search``).

Each answer is read from the views in one snapshot (``Views.read``), after the request's one
freshness check.
"""

from __future__ import annotations

from dataclasses import dataclass

from api.service.freshness import Views
from api.service.models.views import (
    BoardEntry,
    GroupSummary,
    GroupTop,
    Leaderboard,
    Operation,
    OperationGroup,
    OperationSummary,
)
from api.service.runs import Runs
from domain.evidence import EvidenceLevel
from domain.ranking import View
from ledger.errors import NotFoundError
from ledger.store.event_store import StoreSession
from projections import queries
from projections.group_labels import GroupLabel, group_labels
from projections.records import (
    FEED_MAX,
    GroupName,
    RecordEntry,
    RecordPage,
    group_names,
    record_entries,
)
from projections.references import resolve_group
from projections.rows import BoardRow, GroupHeading, OperationGroupRow, RecentRunRow, SourceRow

BOARD_PAGE = 100  # entries per leaderboard page (API); the pages show 50
BOARD_MAX = 500

__all__ = [
    "BOARD_MAX",
    "BOARD_PAGE",
    "FEED_MAX",
    "Boards",
    "FrontPage",
    "GroupName",
    "RecordEntry",
    "RecordFeed",
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


@dataclass(frozen=True)
class RecordFeed:
    """A page of new #1 records (newest first) with the names of their groups."""

    key: str | None
    page: RecordPage
    names: dict[str, GroupName]


class Boards:
    def __init__(self, views: Views, runs: Runs) -> None:
        self.views = views
        self.runs = runs

    def resolve(self, reference: str) -> str:
        """A comparison group by its key or a unique prefix of it."""
        return self.views.read(lambda session: resolve_group(session, reference))

    def groups(self, benchmark: str | None = None, gpu: str | None = None) -> list[GroupSummary]:
        return self.views.read(lambda session: _groups(session, benchmark, gpu))

    def operations(self, limit: int | None = None) -> list[OperationSummary]:
        return self.views.read(lambda session: _operations(session, limit))

    def operation(self, name: str) -> Operation:
        """One operation's groups, by GPU, each with its #1 and what sets it apart from the
        groups that look like it."""

        def read(session: StoreSession) -> tuple[list[OperationGroupRow], list[GroupLabel]]:
            rows = queries.operation_groups(session, name)
            return rows, group_labels(session, [r.comparison_key for r in rows])

        rows, labels = self.views.read(read)
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
            groups=groups,
        )

    def leaderboard(
        self,
        reference: str,
        view: View,
        min_level: EvidenceLevel | None = None,
        start: int = 1,
        limit: int = BOARD_PAGE,
    ) -> Leaderboard:
        """A page of a group's ranking (the group by key or unique prefix): ``limit``
        entries from the ``start``-th (1-based)."""

        def read(session: StoreSession) -> Leaderboard:
            return _board(session, resolve_group(session, reference), view, min_level, start, limit)

        return self.views.read(read)

    def board_page(
        self, reference: str, view: View, start: int, limit: int
    ) -> tuple[Leaderboard, GroupHeading | None]:
        """A leaderboard page as its page shows it: with its group's heading (benchmark,
        GPU, metric and number of runs)."""

        def read(session: StoreSession) -> tuple[Leaderboard, GroupHeading | None]:
            key = resolve_group(session, reference)
            return _board(session, key, view, None, start, limit), queries.group_heading(
                session, key
            )

        return self.views.read(read)

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

    def records(
        self, group: str | None = None, before: int | None = None, limit: int = FEED_MAX
    ) -> RecordFeed:
        """New #1 records, newest first, of every group or of ``group`` (a key or a unique
        prefix: 404 unknown, 400 ambiguous), those set before log position ``before``."""

        def read(session: StoreSession) -> RecordFeed:
            key = resolve_group(session, group) if group is not None else None
            page = record_entries(session, key, before, limit)
            keys = {str(e.run["comparison_key"]) for e in page.entries}
            names = group_names(session, keys | ({key} if key is not None else set()))
            return RecordFeed(key, page, names)

        return self.views.read(read)


def _board(
    session: StoreSession,
    key: str,
    view: View,
    min_level: EvidenceLevel | None,
    start: int,
    limit: int,
) -> Leaderboard:
    size = max(1, min(limit, BOARD_MAX))
    rows = queries.leaderboard(session, key, view, min_level, offset=start - 1, limit=size)
    best = queries.leaderboard(session, key, view, min_level, limit=1)
    total = queries.ranked_count(session, key, view, min_level)
    if not queries.group_exists(session, key):
        raise NotFoundError(f"no comparison group {key}")
    first = best[0].value if best else None
    return Leaderboard(
        comparison_key=key,
        view=str(view),
        min_level=min_level.name.lower() if min_level is not None else None,
        total=total,
        start=start,
        next=start + size if start - 1 + size < total else None,
        entries=[board_entry(r, first) for r in rows],
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
    )


# ------------------------------------------------- labels of groups shown together


def labelled_groups(
    boards: Boards, definition: str | None = None, gpu: str | None = None
) -> list[tuple[str, str]]:
    """Every group of ``definition`` and/or ``gpu``, in the groups list's order, each with
    its label: what sets it apart from its lookalikes (``Boards.operation``), or every part
    of its key when it has none (``kernelindex leaderboard --definition/--gpu``)."""
    listed = boards.groups(definition, gpu)
    if not listed:
        asked = (("definition", definition), ("GPU", gpu))
        raise NotFoundError(
            "no comparison group has "
            + " on ".join(f"{what} {value!r}" for what, value in asked if value)
        )
    groups = _operation_groups(boards, [g.benchmark for g in listed])
    labelled = []
    for g in listed:
        group = groups.get(g.comparison_key)
        apart = group.apart_by if group is not None else None
        labelled.append((g.comparison_key, apart or _every_part(group)))
    return labelled


def group_label(boards: Boards, key: str) -> str:
    """What one group is made of (every part of its key), for its heading."""
    runs = boards.runs.list_page(comparison_key=key, limit=1).items
    groups = _operation_groups(boards, [runs[0].benchmark] if runs else [])
    return _every_part(groups.get(key))


def _every_part(group: OperationGroup | None) -> str:
    if group is None:
        return ""
    return " · ".join(f"{part} {name}" for part, name in group.parts.items())


def _operation_groups(boards: Boards, names: list[str | None]) -> dict[str, OperationGroup]:
    """Every group of the operations named, by key, with its parts and what sets it apart."""
    found: dict[str, OperationGroup] = {}
    for name in dict.fromkeys(n for n in names if n):
        found.update((g.comparison_key, g) for g in boards.operation(name).groups)
    return found
