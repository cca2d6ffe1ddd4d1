"""`kernelindex leaderboard`, `compare` and `projections`: the read-model side of the CLI."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from api.cli_common import (
    DbOption,
    HomeOption,
    JsonOption,
    handles_errors,
    open_ledger,
    out,
    print_json,
)
from api.display import format_value
from domain.evidence import EvidenceLevel
from domain.ranking import View
from ledger.errors import AmbiguousReferenceError, NotFoundError
from projections import queries
from projections.run_record import compare_runs
from projections.runner import ProjectionRunner

projections_app = typer.Typer(help="Rebuild and inspect the read models.", no_args_is_help=True)
BAR_WIDTH = 40


def register_view_commands(app: typer.Typer) -> None:
    app.add_typer(projections_app, name="projections")
    app.command("leaderboard")(leaderboard)
    app.command("compare")(compare)


def _print_board(key: str, view: View, rows: list[dict[str, Any]]) -> None:
    """The ranking with a latency bar per run: shorter bar, faster kernel."""
    out.print(f"[bold]Leaderboard[/] {key} · {view} comparison · {len(rows)} ranked")
    if not rows:
        out.print("  (no run is ranked in this view)")
        return
    top = max(r["value"] for r in rows) or 1.0
    first = rows[0]["value"] or 1.0
    table = Table(box=None, pad_edge=False)
    for column in ("rank", "run", "evidence", "value", "× #1", "latency"):
        table.add_column(column, no_wrap=column != "run", overflow="fold")
    for r in rows:
        filled = max(1, round(BAR_WIDTH * r["value"] / top))
        table.add_row(
            str(r["rank"]),
            f"{escape(r['name'])} [dim]{r['run_digest'][7:19]}[/]",
            r["evidence_level"],
            format_value(r["value"], r["unit"] if view is View.SOURCE_NATIVE else "ns"),
            f"{r['value'] / first:.3f}",
            "[cyan]" + "█" * filled + "[/]",
        )
    out.print(table)


@handles_errors
def leaderboard(
    key: Annotated[str | None, typer.Argument(help="Comparison key (sha256:…).")] = None,
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
    """A comparison group's ranking (by key, or by --definition and --gpu), with a chart."""
    ledger = open_ledger(home, db)
    ProjectionRunner(ledger).catch_up()
    floor = EvidenceLevel.parse(min_level) if min_level else None
    with ledger.recorder.transaction(commit=False) as session:  # type: ignore[attr-defined]
        if key is None:
            if definition is None and gpu is None:
                raise NotFoundError("give a comparison key, or --definition and/or --gpu")
            found = queries.groups(session, definition, gpu)
            if not found:
                raise NotFoundError("no comparison group matches")
            if len(found) > 1:
                listing = "; ".join(
                    f"{g['comparison_key']} ({g['benchmark']} on {g['product']}, {g['runs']} runs)"
                    for g in found[:10]
                )
                raise AmbiguousReferenceError(f"{len(found)} groups match: {listing}")
            key = str(found[0]["comparison_key"])
        rows = queries.leaderboard(session, key, view, floor)
    if as_json:
        print_json({"comparisonKey": key, "view": str(view), "entries": rows})
        return
    _print_board(key, view, rows)


@handles_errors
def compare(
    a: Annotated[str, typer.Argument(help="Run digest or prefix.")],
    b: Annotated[str, typer.Argument(help="Run digest or prefix to compare with.")],
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Field-by-field differences between two runs and the ratio of their primary values."""
    ledger = open_ledger(home, db)
    result = compare_runs(ledger, ledger.resolve_run(a), ledger.resolve_run(b))
    if as_json:
        print_json(result)
        return
    ratio = result["ratio"]
    out.print(
        f"{result['a']}\n  vs {result['b']}\n  primary {result['metric']}: "
        + (f"ratio {ratio:.4f}" if ratio is not None else "not comparable")
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


@projections_app.command("rebuild")
@handles_errors
def projections_rebuild(
    home: HomeOption = None, db: DbOption = None, as_json: JsonOption = False
) -> None:
    """Drop every read model and rebuild it from the events; print each table's digest."""
    ledger = open_ledger(home, db)
    runner = ProjectionRunner(ledger)
    before = runner.table_digests()
    started = time.perf_counter()
    done = runner.rebuild()
    elapsed = time.perf_counter() - started
    after = runner.table_digests()
    result = {
        "events": done.events,
        "seconds": round(elapsed, 3),
        "eventsPerSecond": round(done.events / elapsed) if elapsed > 0 else None,
        "tables": after,
        "identicalToIncremental": before == after,
    }
    if as_json:
        print_json(result)
        return
    out.print(f"rebuilt from {done.events} events in {elapsed:.2f} s")
    for name, digest in after.items():
        same = "same as before" if before.get(name) == digest else "[yellow]CHANGED[/]"
        out.print(f"  {name:<28} {digest}  {same}")


@projections_app.command("status")
@handles_errors
def projections_status(
    home: HomeOption = None, db: DbOption = None, as_json: JsonOption = False
) -> None:
    """Catch up, then show how far the views have folded the log and their digests."""
    ledger = open_ledger(home, db)
    runner = ProjectionRunner(ledger)
    done = runner.catch_up()
    tables = runner.table_digests()
    result: dict[str, Any] = {"folded": done.events, "position": done.position, "tables": tables}
    if as_json:
        print_json(result)
    else:
        out.print(f"views at position {done.position} ({done.events} new events folded)")
        for name, digest in tables.items():
            out.print(f"  {name:<28} {digest}")
