"""A leaderboard page and the groups it is chosen from: the one reading of them, for every
face (issue 33).

Each read is a generated statement run on whatever door holds the connection
(``ledger.store.read_door``): the server's and a full command's SQLAlchemy connection
(``api.service.boards.Boards``, in its views' snapshot), or a short command's driver
connection (``api.service.driver_boards``), which then loads no SQLAlchemy, eventsourcing or
read-model tables. So ``kernelindex leaderboard`` answers alike through either.
"""

from __future__ import annotations

from dataclasses import dataclass

from msgspec import structs

from api.service.board_orders import Order, best_per_user, ordered, placed, sol_scores
from api.service.models.views import BoardEntry, BoardGroup, GroupSummary, Leaderboard
from api.service.operation_specs import operation_spec
from api.service.paging import next_start
from api.service.sweeps import place_in, sweep_of
from domain.evidence import EvidenceLevel
from domain.gpu_names import match_gpu
from domain.ranking import View
from ledger.errors import AmbiguousReferenceError, NotFoundError
from ledger.store.read_door import Rows
from projections import view_reads
from projections.group_labels import group_labels
from projections.rows import BoardRow, GroupHeading
from projections.view_reads import resolve_group

BOARD_PAGE = 100  # entries per leaderboard page (API); the pages show 50
BOARD_MAX = 500


@dataclass(frozen=True)
class _Read:
    key: str
    rows: list[BoardRow]
    best: list[BoardRow]
    total: int
    group: BoardGroup
    heading: GroupHeading | None
    sol_scores: dict[str, float | None]


def board_page(
    rows: Rows,
    reference: str,
    view: View,
    start: int,
    limit: int,
    min_level: EvidenceLevel | None = None,
    order: Order = Order.RANK,
    per_user: bool = False,
) -> tuple[Leaderboard, GroupHeading | None]:
    """A page of a group's ranking (the group by key or unique prefix): ``limit`` entries
    from the ``start``-th (1-based) of ``order``, every ranked run or each author's best
    (``board_orders``), with the group's heading (benchmark, GPU, metric, runs)."""
    size = max(1, min(limit, BOARD_MAX))
    whole = order is not Order.RANK or per_user  # the order is not the ranking's pages
    found = _read(rows, reference, view, min_level, None if whole else (start - 1, size))
    group = found.group
    if order is Order.SOL_SCORE and not group.has_sol_score:
        # The service's refusals load the store's (rare here: a door need not load them).
        from api.service.errors import BadQueryError  # noqa: PLC0415

        raise BadQueryError(
            f"order {order}: the runs of group {found.key[:19]}… have no SOL score "
            f"(only SOL-ExecBench gives one; this group's source is {group.source})"
        )
    first = found.best[0].value if found.best else None
    entries = [board_entry(r, first) for r in found.rows]
    if group.has_sol_score:
        entries = [structs.replace(e, sol_score=found.sol_scores[e.run]) for e in entries]
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


def _read(
    rows: Rows,
    reference: str,
    view: View,
    min_level: EvidenceLevel | None,
    page: tuple[int, int] | None,
) -> _Read:
    """What a board shows, read in ``rows``'s snapshot; ``page``: (offset, limit) of the
    ranking, None for all of it."""
    key = resolve_group(rows, reference)
    if not view_reads.group_exists(rows, key):
        raise NotFoundError(f"no comparison group {key}")
    paged = {} if page is None else {"offset": page[0], "limit": page[1]}
    ranked = view_reads.leaderboard(rows, key, view, min_level, **paged)
    group = board_group(rows, key)
    return _Read(
        key=key,
        rows=ranked,
        best=view_reads.leaderboard(rows, key, view, min_level, limit=1),
        total=view_reads.ranked_count(rows, key, view, min_level),
        group=group,
        heading=view_reads.group_heading(rows, key),
        sol_scores=sol_scores(rows, [r.run_digest for r in ranked]) if group.has_sol_score else {},
    )


def board_group(rows: Rows, key: str) -> BoardGroup:
    """What the board ranks: its operation and GPU, its parts, what sets it apart from the
    operation's groups that look like it, and the sweep it is one workload of."""
    identity = view_reads.group_identity(rows, key)
    benchmark, product, source = identity if identity is not None else (None, None, None)
    siblings = view_reads.operation_groups(rows, benchmark) if benchmark is not None else []
    labels = group_labels(rows, list({key, *(r.comparison_key for r in siblings)}))
    label = next(lab for lab in labels if lab.key == key)
    alike = label.lookalikes(labels)
    sweep = sweep_of(label, alike)
    about = operation_spec(rows, benchmark) if benchmark is not None else None
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


def group_summaries(
    rows: Rows, benchmark: str | None = None, gpu: str | None = None
) -> list[GroupSummary]:
    """Comparison groups, of ``benchmark`` and/or on the GPU ``gpu`` names as a person
    types it (``domain.gpu_names``)."""
    product = gpu_product(rows, gpu) if gpu is not None else None
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
        for r in view_reads.groups(rows, benchmark, product)
    ]


def gpu_product(rows: Rows, typed: str) -> str:
    """The one GPU product ``typed`` names (``domain.gpu_names.match_gpu``): 404 when none,
    400 with the candidates when several."""
    known = view_reads.products(rows)
    found = match_gpu(typed, known)
    if found.name is not None:
        return found.name
    if found.candidates:
        raise AmbiguousReferenceError(
            f"GPU {typed!r} could be any of: {', '.join(found.candidates)}; type more of its name"
        )
    raise NotFoundError(f"no GPU named {typed!r}; the ledger has runs on: {', '.join(known)}")


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
