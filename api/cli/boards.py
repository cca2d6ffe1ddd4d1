"""`kernelindex leaderboard`, `compare` and `search`: comparison groups and their rankings."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from api.cli.common import DbOption, HomeOption, JsonOption, handles_errors, out, print_json
from api.cli.local import open_ledger
from domain.evidence import EvidenceLevel
from domain.quantities import format_fixed, format_value
from domain.ranking import View
from ledger.errors import NotFoundError
from projections import queries
from projections.group_labels import group_labels
from projections.references import resolve_group, resolve_run_in
from projections.rows import BoardRow
from projections.run_record import compare_runs
from projections.runner import ProjectionRunner
from projections.search import search_groups, search_result

app = typer.Typer()
BAR_WIDTH = 40


def _print_board(key: str, view: View, rows: list[BoardRow]) -> None:
    """The ranking with a latency bar per run: shorter bar, faster kernel."""
    out.print(f"[bold]Leaderboard[/] {key} · {view} comparison · {len(rows)} ranked")
    if not rows:
        out.print("  (no run is ranked in this view)")
        return
    top = max(r.value for r in rows) or 1.0
    first = rows[0].value or 1.0
    table = Table(box=None, pad_edge=False)
    for column in ("rank", "run", "evidence", "value", "× #1", "latency"):
        table.add_column(column, no_wrap=column != "run", overflow="fold")
    for r in rows:
        # The ratio first: a value near the float's top (1e308) times the width overflows.
        filled = max(1, round(BAR_WIDTH * (r.value / top)))
        table.add_row(
            str(r.rank),
            f"{escape(r.name)} [dim]{r.run_digest[7:19]}[/]",
            r.evidence_level,
            format_value(r.value, r.unit if view is View.SOURCE_NATIVE else "ns"),
            format_fixed(r.value / first, 3),
            "[cyan]" + "█" * filled + "[/]",
        )
    out.print(table)


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
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """A comparison group's ranking, with a chart: by key (or a unique prefix), or every group
    of --definition and/or --gpu, each labelled by what separates it from the others."""
    ledger = open_ledger(home, db, read_only=True)
    ProjectionRunner(ledger).catch_up()
    floor = EvidenceLevel.parse(min_level) if min_level else None
    with ledger.store.transaction(commit=False) as session:
        if key is not None:
            keys = [resolve_group(session, key)]
        elif definition is None and gpu is None:
            raise NotFoundError("give a comparison key, or --definition and/or --gpu")
        else:
            keys = [g.comparison_key for g in queries.groups(session, definition, gpu)]
            if not keys:
                raise NotFoundError(
                    "no comparison group has "
                    + " on ".join(
                        f"{what} {value!r}"
                        for what, value in (("definition", definition), ("GPU", gpu))
                        if value
                    )
                )
        labels = group_labels(session, keys)
        boards = [(label, queries.leaderboard(session, label.key, view, floor)) for label in labels]
    if as_json:
        entries = [
            {
                "comparisonKey": label.key,
                "label": label.separated_by([o for o in labels if o is not label]),
                "view": str(view),
                "entries": [asdict(r) for r in rows],  # the board's columns, as stored
            }
            for label, rows in boards
        ]
        print_json(entries[0] if key is not None else {"groups": entries})
        return
    if len(boards) > 1:
        out.print(f"[bold]{len(boards)} comparison groups[/] match; each says what sets it apart")
    for label, rows in boards:
        others = [o for o in labels if o is not label]
        out.print(f"\n[dim]{escape(label.separated_by(others))}[/]")
        _print_board(label.key, view, rows)


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
    ledger = open_ledger(home, db, read_only=True)
    result = compare_runs(ledger, resolve_run_in(ledger, a), resolve_run_in(ledger, b))
    if as_json:
        print_json(result)
        return
    ratio = result["ratio"]
    out.print(
        f"{result['a']}\n  vs {result['b']}\n  primary {result['metric']}: "
        + (f"ratio {ratio:.4f}" if ratio is not None else "not comparable")
    )
    if not result["comparable"]:
        out.print(
            f"[yellow]not in one comparison group[/]: they differ in "
            f"{escape(str(result['notComparableBy']))}, so the ratio ranks nothing"
        )
    table = Table(box=None, pad_edge=False)
    for column in ("field", "a", "b"):
        table.add_column(column, overflow="fold")
    for d in result["differences"]:
        table.add_row(
            d["path"],
            escape(str(d["a"])) if d["inA"] else "[dim]absent[/]",
            escape(str(d["b"])) if d["inB"] else "[dim]absent[/]",
        )
    out.print(table)


@app.command("search")
@handles_errors
def search(
    words: Annotated[
        list[str], typer.Argument(help="Words that must all match: B200 rmsnorm bf16 v1.1 ...")
    ],
    limit: Annotated[int, typer.Option(min=1, max=500, help="Most groups to show.")] = 50,
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Find comparison groups: every word must match a run's operation, GPU, dtype or
    workload axes, source, stack version, evidence level, author, name or id."""
    ledger = open_ledger(home, db, read_only=True)
    runner = ProjectionRunner(ledger)
    runner.catch_up()
    query = " ".join(words)
    _, found = runner.snapshot(lambda session: search_groups(session, query, limit))
    if as_json:
        print_json(search_result(query, found))
        return
    if not found:
        out.print(f"no comparison group matches {query!r}")
        raise typer.Exit(1)
    labels = [f.label for f in found]
    table = Table(box=None, pad_edge=False)
    table.add_column("group", no_wrap=True)
    for column in ("benchmark · GPU", "runs", "#1", "apart from its lookalikes by"):
        table.add_column(column, overflow="fold")
    for f in found:
        alike = f.label.lookalikes(labels)
        table.add_row(
            f.label.key[:19],
            escape(f"{f.label.benchmark} · {f.label.product}"),
            f"{f.runs}/{f.label.runs}",
            escape(f"{f.top_name} {format_value(f.top_value, f.unit)}") if f.top_name else "—",
            escape(f.label.separated_by(alike)) if alike else "",
        )
    out.print(f"[bold]{len(found)} comparison groups[/] match {escape(query)!r}")
    out.print(table)
