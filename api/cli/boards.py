"""`kernelindex leaderboard` and `compare`: comparison groups and their rankings (`search` is
``api.cli.search``).

Each asks the service (``api.service``): ``--json`` prints its reply as the API sends it for
the same query (``GET /v1/leaderboards/{key}``, ``/v1/compare``); the tables
and charts are drawn from the same reply. A leaderboard of every group of ``--definition``
and/or ``--gpu`` is the API's leaderboard of each, labelled by what sets it apart.
"""

from __future__ import annotations

from typing import Annotated

import typer
from msgspec import structs
from rich.markup import escape
from rich.table import Table

from api.cli.common import DbOption, HomeOption, JsonOption, handles_errors, out, print_reply
from api.service.models import ApiModel
from api.service.models.views import Leaderboard
from domain.evidence import EvidenceLevel
from domain.quantities import format_fixed, format_value
from domain.ranking import View
from ledger.errors import NotFoundError

app = typer.Typer()
BAR_WIDTH = 40


class LabelledBoard(Leaderboard, kw_only=True):
    """A group's leaderboard (the API's) with what sets the group apart from the others
    shown: the parts of its comparison key that differ from its lookalikes' (same
    definition and GPU), or every part when it has none."""

    label: str


class Boards(ApiModel, kw_only=True):
    groups: list[LabelledBoard]


def _print_board(board: Leaderboard) -> None:
    """The ranking with a latency bar per run: shorter bar, faster kernel."""
    view = View(board.view)
    out.print(
        f"[bold]Leaderboard[/] {board.comparison_key} · {view} comparison · {board.total} ranked"
    )
    if not board.entries:
        out.print("  (no run is ranked in this view)")
        return
    top = max(e.value for e in board.entries) or 1.0
    table = Table(box=None, pad_edge=False)
    for column in ("rank", "run", "evidence", "value", "× #1", "latency"):
        table.add_column(column, no_wrap=column != "run", overflow="fold")
    for e in board.entries:
        # The ratio first: a value near the float's top (1e308) times the width overflows.
        filled = max(1, round(BAR_WIDTH * (e.value / top)))
        table.add_row(
            str(e.rank),
            f"{escape(e.name)} [dim]{e.run[7:19]}[/]",
            e.evidence_level,
            format_value(e.value, e.unit if view is View.SOURCE_NATIVE else "ns"),
            format_fixed(e.ratio_to_first, 3) if e.ratio_to_first is not None else "—",
            "[cyan]" + "█" * filled + "[/]",
        )
    out.print(table)
    if board.next is not None:
        out.print(
            f"{board.total - board.next + 1} more: kernelindex leaderboard "
            f"{board.comparison_key[:19]} --from {board.next}"
        )


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
        str | None, typer.Option("--gpu", help="GPU product, e.g. 'NVIDIA B200'.")
    ] = None,
    view: Annotated[View, typer.Option("--view", help="Which ranking.")] = View.SOURCE_NATIVE,
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
    from api.cli.service import local_service  # noqa: PLC0415 - the database, when it runs
    from api.service.boards import group_label, labelled_groups  # noqa: PLC0415

    if key is None and definition is None and gpu is None:
        raise NotFoundError("give a comparison key, or --definition and/or --gpu")
    floor = EvidenceLevel.parse(min_level) if min_level else None
    with local_service(home, db) as service:

        def board_of(reference: str) -> Leaderboard:
            if limit is None:  # the API's own page size
                return service.boards.leaderboard(reference, view, floor, start)
            return service.boards.leaderboard(reference, view, floor, start, limit)

        if key is not None:
            board = board_of(key)
            if as_json:
                print_reply(board)
                return
            chosen = [(board, group_label(service.boards, board.comparison_key))]
        else:
            labelled = labelled_groups(service.boards, definition, gpu)
            chosen = [(board_of(k), label) for k, label in labelled]
        boards = [LabelledBoard(**structs.asdict(b), label=label) for b, label in chosen]
    if as_json:
        print_reply(Boards(groups=boards))
        return
    if len(boards) > 1:
        out.print(f"[bold]{len(boards)} comparison groups[/] match; each says what sets it apart")
    for board in boards:
        out.print(f"\n[dim]{escape(board.label)}[/]")
        _print_board(board)


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
        f"{result.a}\n  vs {result.b}\n  primary {result.metric}: "
        + (f"ratio {ratio:.4f}" if ratio is not None else "not comparable")
    )
    if not result.comparable:
        out.print(
            f"[yellow]not in one comparison group[/]: they differ in "
            f"{escape(str(result.not_comparable_by))}, so the ratio ranks nothing"
        )
    table = Table(box=None, pad_edge=False)
    for column in ("field", "a", "b"):
        table.add_column(column, overflow="fold")
    for d in result.differences:
        table.add_row(
            d.path,
            escape(str(d.a)) if d.in_a else "[dim]absent[/]",
            escape(str(d.b)) if d.in_b else "[dim]absent[/]",
        )
    out.print(table)
