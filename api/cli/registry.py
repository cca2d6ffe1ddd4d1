"""`kernelindex gpus`, `implementations`, `projects` and `records`: the registry, as the
service answers it.

``--json`` prints the reply the API sends for the same query (``GET /v1/gpus[/{name}]``,
``/v1/implementations[/{name}]``, ``/v1/projects[/{name}]``, ``/v1/records``); the tables
are drawn from that reply.
Names are exact, as the runs store them ("NVIDIA B200").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.markup import escape
from rich.table import Table

from api.cli.common import DbOption, HomeOption, JsonOption, handles_errors, out, print_reply
from domain.quantities import format_value

if TYPE_CHECKING:
    from pathlib import Path

    from api.service.models.registry import RecordTimeline, RegistryPage, RegistrySummary

app = typer.Typer()

NameArgument = Annotated[
    str | None, typer.Argument(help="Exact stored name; none: list them all.", show_default=False)
]
CursorOption = Annotated[
    str | None, typer.Option("--cursor", help="The runs page after this cursor (runsNext).")
]
BeforeOption = Annotated[
    int | None,
    typer.Option("--before", min=1, help="The records after this one (the next of a page)."),
]


def _summaries(title: str, rows: list[RegistrySummary]) -> None:
    table = Table(box=None, pad_edge=False)
    table.add_column(title, overflow="fold")
    for column in ("runs", "groups", "records", "#1 now"):
        table.add_column(column, justify="right")
    for r in rows:
        counts = (r.runs, r.groups, r.records, r.holds)
        table.add_row(escape(r.name), *(f"{n:,}" for n in counts))
    out.print(table)


def _records(timeline: RecordTimeline) -> None:
    table = Table(box=None, pad_edge=False)
    for column in ("date", "group", "new #1", "value", "beat"):
        table.add_column(column, overflow="fold")
    for r in timeline.items:
        dated = "" if r.dated == "observed" else " (admitted)"
        beat = escape(r.previous_name) if r.previous_name else "first ranked run"
        value = format_value(r.value, r.unit)
        table.add_row(r.at + dated, escape(r.group), escape(r.name), value, beat)
    out.print(table)
    if timeline.next is not None:
        out.print(f"older records: --before {timeline.next}")


def _page(found: RegistryPage) -> None:
    s = found.summary
    out.print(
        f"[bold]{escape(found.name)}[/]: {s.runs:,} runs in {s.groups:,} groups · "
        f"{s.records:,} #1 records set · #1 now in {s.holds:,} groups"
    )
    _records(found.records)
    for r in found.runs:
        out.print(f"  {r.digest[:19]}  {escape(r.name)}  {format_value(r.claimed, r.unit)}")
    if found.runs_next is not None:
        out.print(f"more runs: --cursor {found.runs_next}")


@app.command("gpus")
@handles_errors
def gpus(
    name: NameArgument = None,
    cursor: CursorOption = None,
    limit: Annotated[int, typer.Option(min=1, max=200, help="Runs per page.")] = 50,
    before: BeforeOption = None,
    records: Annotated[int, typer.Option(min=1, max=100, help="Records per page.")] = 20,
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """GPUs the runs name, with their runs and #1 records; one GPU's with NAME."""
    from api.cli.service import local_service  # noqa: PLC0415 - the database, when it runs

    with local_service(home, db) as service:
        if name is None:
            every = service.registry.gpus()
            print_reply(every) if as_json else _summaries("GPU", every)
            return
        found = service.registry.gpu(name, cursor, limit, before, records)
    print_reply(found) if as_json else _page(found)


@app.command("implementations")
@handles_errors
def implementations(
    name: NameArgument = None,
    start: Annotated[int, typer.Option("--from", min=1, help="The list from this one.")] = 1,
    cursor: CursorOption = None,
    limit: Annotated[
        int | None,
        typer.Option(min=1, max=500, help="Authors (100) or runs (50, at most 200) per page."),
    ] = None,
    before: BeforeOption = None,
    records: Annotated[int, typer.Option(min=1, max=100, help="Records per page.")] = 20,
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Implementations by author, with their runs and #1 records; one author's with NAME."""
    _list_or_show("implementations", name, start, cursor, limit, before, records, home, db, as_json)


@app.command("projects")
@handles_errors
def projects(
    name: NameArgument = None,
    start: Annotated[int, typer.Option("--from", min=1, help="The list from this one.")] = 1,
    cursor: CursorOption = None,
    limit: Annotated[
        int | None,
        typer.Option(min=1, max=500, help="Projects (100) or runs (50, at most 200) per page."),
    ] = None,
    before: BeforeOption = None,
    records: Annotated[int, typer.Option(min=1, max=100, help="Records per page.")] = 20,
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """The KernelIndex catalog's projects, with their runs and #1 records; one's with NAME."""
    _list_or_show("projects", name, start, cursor, limit, before, records, home, db, as_json)


def _list_or_show(
    listing: Literal["implementations", "projects"],
    name: str | None,
    start: int,
    cursor: str | None,
    limit: int | None,
    before: int | None,
    records: int,
    home: Path | None,
    db: str | None,
    as_json: bool,
) -> None:
    """The list of authors or projects (paged from ``start``), or one's page with ``name``."""
    from api.cli.service import local_service  # noqa: PLC0415 - the database, when it runs
    from api.service.paging import MAX_PAGE  # noqa: PLC0415 - as the service, when it runs
    from api.service.registry import LIST_PAGE, RUNS_PAGE  # noqa: PLC0415

    authors = listing == "implementations"
    with local_service(home, db) as service:
        registry = service.registry
        if name is None:
            size = limit or LIST_PAGE
            listed = (
                registry.implementations(start, size) if authors else registry.projects(start, size)
            )
            print_reply(listed) if as_json else _summaries(
                "author" if authors else "project", listed.items
            )
            return
        runs = min(limit or RUNS_PAGE, MAX_PAGE)
        show = registry.implementation if authors else registry.project
        found = show(name, cursor, runs, before, records)
    print_reply(found) if as_json else _page(found)


@app.command("records")
@handles_errors
def records(
    group: Annotated[
        str | None, typer.Option("--group", help="One group's: its key or a unique prefix.")
    ] = None,
    before: BeforeOption = None,
    limit: Annotated[int, typer.Option(min=1, max=100, help="Records per page.")] = 100,
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Every time a group's #1 changed, newest first, dated by the source (else admission)."""
    from api.cli.service import local_service  # noqa: PLC0415 - the database, when it runs

    with local_service(home, db) as service:
        found = service.records.timeline(group, before, limit)
    print_reply(found) if as_json else _records(found)
