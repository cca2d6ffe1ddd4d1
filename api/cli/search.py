"""`kernelindex search`: comparison groups by words and filters, a page at a time.

It asks the service (``api.service.search``) what ``GET /v1/search`` and the ``/search``
page ask: ``--json`` prints the API's reply for the same query, byte for byte; the table,
the facets and the way to the next page are drawn from that reply.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from api.cli.common import DbOption, HomeOption, JsonOption, handles_errors, out, print_reply
from api.service.models.search import MAX_PER_PAGE, PER_PAGE, SORTS, SearchFilters, SearchPage
from domain.quantities import format_value

app = typer.Typer()
FACET_VALUES_SHOWN = 6  # per facet, in the summary under the table


@app.command("search")
@handles_errors
def search(
    words: Annotated[
        list[str] | None,
        typer.Argument(help="Words that must all match: B200 rmsnorm bf16 v1.1 ..."),
    ] = None,
    gpu: Annotated[
        str | None, typer.Option("--gpu", help="Only this GPU: 'B200' or 'NVIDIA B200'.")
    ] = None,
    source: Annotated[
        str | None, typer.Option("--source", help="Only runs from this source.")
    ] = None,
    dtype: Annotated[
        str | None, typer.Option("--dtype", help="Only workloads with this dtype (bf16).")
    ] = None,
    level: Annotated[
        str | None, typer.Option("--level", help="Only runs at this evidence level.")
    ] = None,
    license: Annotated[
        str | None,
        typer.Option(
            "--license", help="Only implementations under this license ('not stated': none)."
        ),
    ] = None,
    installable: Annotated[
        str | None,
        typer.Option("--installable", help="'yes': only implementations one can install."),
    ] = None,
    sort: Annotated[str, typer.Option("--sort", help=f"One of {', '.join(SORTS)}.")] = "relevance",
    page: Annotated[int, typer.Option("--page", help="Which page (1: the first).")] = 1,
    per_page: Annotated[
        int, typer.Option("--per-page", help=f"Groups per page, 1 to {MAX_PER_PAGE}.")
    ] = PER_PAGE,
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Find comparison groups: every word must match a run's operation, GPU, dtype or
    workload axes, source, stack version, evidence level, author, name or id; --gpu,
    --source, --dtype, --level, --license and --installable narrow to the runs with that
    value."""
    from api.cli.driver import quick_reads  # noqa: PLC0415 - only this command's door

    query = " ".join(words or [])
    filters = SearchFilters(
        gpu=gpu,
        source=source,
        dtype=dtype,
        level=level,
        license=license,
        installable=installable,
    )
    found: SearchPage | None = None
    # Through the driver where the views are fresh (issue 33), else through the full service
    # (which folds first): the same reads either way (api/service/search_pages.py).
    with quick_reads(home, db, views=True) as reads:
        if reads is not None:
            found = reads.search.groups(query, filters, sort=sort, page=page, per_page=per_page)
    if found is None:
        from api.cli.service import local_service  # noqa: PLC0415 - the database, when it runs

        with local_service(home, db) as service:
            found = service.search.groups(query, filters, sort=sort, page=page, per_page=per_page)
    if as_json:
        print_reply(found)
        return
    if not found.items:
        out.print(f"no comparison group matches {query!r}{_narrowed(found)}")
        raise typer.Exit(1)
    _print(found, query)


def _narrowed(found: SearchPage) -> str:
    chosen = [f"{name} {value}" for name, value in _chosen(found) if value]
    return f" with {', '.join(chosen)}" if chosen else ""


def _chosen(found: SearchPage) -> list[tuple[str, str | None]]:
    f = found.filters
    return [
        ("gpu", f.gpu),
        ("source", f.source),
        ("dtype", f.dtype),
        ("level", f.level),
        ("license", f.license),
        ("installable", f.installable),
    ]


def _print(found: SearchPage, query: str) -> None:
    table = Table(box=None, pad_edge=False)
    table.add_column("group", no_wrap=True)
    for column in ("benchmark · GPU", "runs", "#1", "apart from its lookalikes by"):
        table.add_column(column, overflow="fold")
    for g in found.items:
        top = g.top
        table.add_row(
            g.comparison_key[:19],
            escape(f"{g.benchmark} · {g.product}"),
            f"{g.matching_runs}/{g.runs}",
            escape(f"{top.name} {format_value(top.value, top.unit)}") if top.name else "—",
            escape(g.apart_by or ""),
        )
    noun = "group matches" if found.total == 1 else "groups match"
    out.print(
        f"[bold]{found.total} comparison {noun}[/] {escape(query)!r}{escape(_narrowed(found))}"
        f" · page {found.page} of {found.pages} · by {found.sort}"
    )
    out.print(table)
    for facet in found.facets:
        shown = ", ".join(
            f"{escape(v.value)} ({v.count})" for v in facet.values[:FACET_VALUES_SHOWN]
        )
        more = len(facet.values) - FACET_VALUES_SHOWN
        if shown:
            out.print(f"[dim]--{facet.name}[/] {shown}" + (f" and {more} more" if more > 0 else ""))
    if found.next is not None:
        out.print(f"next: add --page {found.next}")
