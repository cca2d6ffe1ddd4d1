"""`kernelindex projections ...`: rebuild the read models from the log, and show how far they
have folded it."""

from __future__ import annotations

import time
from typing import Any

import typer

from api.cli.common import (
    DbOption,
    HomeOption,
    JsonOption,
    handles_errors,
    out,
    print_json,
    progress_bar,
)
from api.cli.local import open_ledger
from projections.runner import ProjectionRunner

projections_app = typer.Typer(help="Rebuild and inspect the read models.", no_args_is_help=True)
app = typer.Typer()
app.add_typer(projections_app, name="projections")


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
    with progress_bar("refolding") as bar:
        task = bar.add_task("", total=ledger.store.last_position())
        done = runner.rebuild(progress=lambda position: bar.update(task, completed=position))
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
    ledger = open_ledger(home, db, read_only=True)
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
