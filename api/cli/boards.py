"""`kernelindex leaderboard` and `compare`: comparison groups and their rankings (`search` is
``api.cli.search``).

Each asks the service (``api.service``): ``--json`` prints its reply as the API sends it for
the same query (``GET /v1/leaderboards/{key}``, ``/v1/compare``, ``/v1/search``); the tables
are drawn from the same reply (``api.display``), fitted to the terminal's width. A
leaderboard of every group of ``--definition`` and/or ``--gpu`` (a GPU as typed: the
service's one matcher) is the API's leaderboard of each, labelled by what sets it apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Protocol

import typer
from msgspec import structs
from rich.markup import escape

from api.cli.common import DbOption, HomeOption, JsonOption, handles_errors, out, print_reply
from api.cli.compare_table import difference_lines
from api.display import board_table
from api.service.board_orders import Order
from api.service.board_pages import BOARD_PAGE
from api.service.models import ApiModel
from api.service.models.views import GroupSummary, Leaderboard
from domain.evidence import EvidenceLevel
from domain.ranking import View
from ledger.errors import NotFoundError

if TYPE_CHECKING:
    from collections.abc import Callable

app = typer.Typer()
MIN_WIDTH = 40  # narrower terminals get lines this long, wrapped by the terminal


class LabelledBoard(Leaderboard, kw_only=True):
    """A group's leaderboard (the API's) with what sets the group apart from the others
    shown: the parts of its comparison key that differ from its lookalikes' (same
    definition and GPU), or every part when it has none."""

    label: str


class Boards(ApiModel, kw_only=True):
    groups: list[LabelledBoard]


def _print_board(board: Leaderboard) -> None:
    """The ranking (``api.display.board_table``), fitted to the terminal's width."""
    out.print(
        f"[bold]Leaderboard[/] {board.comparison_key} · {board.view} comparison · "
        f"{board.total} {'users' if board.per_user else 'ranked'}",
        soft_wrap=False,  # wrapped at words to the terminal's width
    )
    if board.per_user or board.order != Order.RANK:
        shown = "each user's best run" if board.per_user else "every run"
        order = "by rank" if board.order == Order.RANK else f"by {board.order}"
        out.print(f"{shown}, {order}; “rank” is the ledger's ranking", soft_wrap=False)
    group = board.group
    if group is not None and group.sweep is not None:
        place = group.sweep
        out.print(
            f"[dim]workload {escape(place.workload)}, {place.position} of a sweep of "
            f"{place.workloads}: its ranks are among this workload's runs only[/]",
            soft_wrap=False,
        )
    if not board.entries:
        out.print("  (no run is ranked in this view)")
        return
    for line in board_table(board, out.width):
        out.print(line, markup=False, highlight=False, soft_wrap=False, overflow="ellipsis")
    if board.next is not None:
        out.print(
            f"{board.total - board.next + 1} more: kernelindex leaderboard "
            f"{board.comparison_key[:19]} --from {board.next}"
            + (" --per-user" if board.per_user else "")
            + (f" --order {board.order}" if board.order != Order.RANK else ""),
            soft_wrap=False,
        )


def _label(board: Leaderboard) -> str:
    """What sets the group apart from its lookalikes, or every part of its key."""
    group = board.group
    if group is None:
        return ""
    return group.apart_by or " · ".join(f"{part} {name}" for part, name in group.parts.items())


class BoardReads(Protocol):
    """The service's boards (``api.service.boards.Boards``), or the same reads through the
    driver (``api.service.driver_boards.DriverBoards``)."""

    def leaderboard(
        self,
        reference: str,
        view: View,
        min_level: EvidenceLevel | None,
        start: int,
        limit: int,
        order: Order,
        per_user: bool,
    ) -> Leaderboard: ...

    def groups(self, benchmark: str | None, gpu: str | None) -> list[GroupSummary]: ...


def _chosen(
    reads: BoardReads,
    key: str | None,
    definition: str | None,
    gpu: str | None,
    board_of: Callable[[BoardReads, str], Leaderboard],
) -> list[Leaderboard]:
    """The board of ``key``, or of every group of ``definition`` and/or ``gpu``."""
    if key is not None:
        return [board_of(reads, key)]
    listed = reads.groups(definition, gpu)
    if not listed:
        raise NotFoundError(
            "no comparison group has "
            + " on ".join(
                f"{what} {value!r}"
                for what, value in (("definition", definition), ("GPU", gpu))
                if value
            )
        )
    return [board_of(reads, g.comparison_key) for g in listed]


@app.command("leaderboard")
@handles_errors
def leaderboard(
    key: Annotated[
        str | None, typer.Argument(help="Comparison key (sha256:…) or a unique prefix.")
    ] = None,
    definition: Annotated[
        str | None, typer.Option("--definition", help="Benchmark/definition name.")
    ] = None,
    gpu: Annotated[
        str | None,
        typer.Option("--gpu", help="A GPU as typed: B200, 'NVIDIA B200', mi300x, hopper."),
    ] = None,
    view: Annotated[View, typer.Option("--view", help="Which ranking.")] = View.SOURCE_NATIVE,
    order: Annotated[
        Order,
        typer.Option("--order", help="rank (the ledger's) or sol-score (SOL-ExecBench's score)."),
    ] = Order.RANK,
    per_user: Annotated[
        bool, typer.Option("--per-user", help="Each user's best run, with the gap to the next.")
    ] = False,
    min_level: Annotated[
        str | None, typer.Option("--min-level", help="Only runs at or above this evidence level.")
    ] = None,
    start: Annotated[
        int, typer.Option("--from", min=1, help="The place to start at (1: the first).")
    ] = 1,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, help="Places to show at most (default: the API's page)."),
    ] = None,
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """A comparison group's ranking, with a chart: by key (or a unique prefix), or every group
    of --definition and/or --gpu, each labelled by what separates it from the others."""
    from api.cli.driver import quick_reads  # noqa: PLC0415 - only this command's door

    if key is None and definition is None and gpu is None:
        raise NotFoundError("give a comparison key, or --definition and/or --gpu")
    floor = EvidenceLevel.parse(min_level) if min_level else None
    size = limit if limit is not None else BOARD_PAGE  # the API's own page size

    def board_of(reads: BoardReads, reference: str) -> Leaderboard:
        return reads.leaderboard(reference, view, floor, start, size, order, per_user)

    chosen: list[Leaderboard] | None = None
    # Through the driver where the views are fresh (issue 33), else through the full service
    # (which folds first): the same reads either way (api/service/board_pages.py).
    with quick_reads(home, db, views=True) as door:
        if door is not None:
            chosen = _chosen(door.boards, key, definition, gpu, board_of)
    if chosen is None:
        from api.cli.service import local_service  # noqa: PLC0415 - the database, when it runs

        with local_service(home, db) as service:
            chosen = _chosen(service.boards, key, definition, gpu, board_of)
    if key is not None and as_json:
        print_reply(chosen[0])
        return
    boards = [LabelledBoard(**structs.asdict(b), label=_label(b)) for b in chosen]
    if as_json:
        print_reply(Boards(groups=boards))
        return
    if len(boards) > 1:
        out.print(f"[bold]{len(boards)} comparison groups[/] match; each says what sets it apart")
    for labelled in boards:
        out.print(f"\n[dim]{escape(labelled.label)}[/]", soft_wrap=False)
        _print_board(labelled)


@app.command("compare")
@handles_errors
def compare(
    a: Annotated[str, typer.Argument(help="Run digest or prefix.")],
    b: Annotated[str, typer.Argument(help="Run digest or prefix to compare with.")],
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Field-by-field differences between two runs and the ratio of their primary values."""
    from api.cli.service import local_service  # noqa: PLC0415 - the database, when it runs

    with local_service(home, db) as service:
        result = service.compare.two(a, b)
    if as_json:
        print_reply(result)
        return
    ratio = result.ratio
    out.print(
        f"a  {result.a}\nb  {result.b}\nprimary {result.metric}: "
        + (f"ratio {ratio:.4f} (a ÷ b)" if ratio is not None else "not comparable")
    )
    if not result.comparable:
        out.print(
            f"[yellow]not in one comparison group[/]: they differ in "
            f"{escape(str(result.not_comparable_field or result.not_comparable_by))}, "
            "so the ratio ranks nothing"
        )
    rows = [
        (d.path, str(d.a) if d.in_a else "absent", str(d.b) if d.in_b else "absent")
        for d in result.differences
    ]
    for line in difference_lines(rows, max(out.width, MIN_WIDTH)):
        out.print(line, markup=False, highlight=False, soft_wrap=True)
