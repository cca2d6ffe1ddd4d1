"""`kernelindex export`: a self-contained bundle of runs (or the whole ledger) for offline
verification."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from api.cli.common import DbOption, HomeOption, err, handles_errors, progress_bar
from api.cli.local import open_ledger
from ledger.errors import NotFoundError
from ledger.store.log_queries import held_checkpoint_size
from projections.export import export_runs
from projections.references import resolve_run_in

app = typer.Typer()


@app.command("export")
@handles_errors
def export(
    output: Annotated[
        Path, typer.Option("-o", "--output", help="Bundle file to write (JSON Lines).")
    ],
    run: Annotated[
        list[str] | None, typer.Option("--run", help="Run digest or prefix; repeatable.")
    ] = None,
    cohort: Annotated[
        str | None, typer.Option("--cohort", help="A comparison key: every run of the group.")
    ] = None,
    all_events: Annotated[bool, typer.Option("--all", help="The whole ledger.")] = False,
    checkpoint: Annotated[
        list[Path] | None,
        typer.Option(
            "--checkpoint",
            help="A signed checkpoint you hold: the bundle proves its log extends it "
            "(consistency proof). Repeatable.",
        ),
    ] = None,
    size: Annotated[
        list[int] | None,
        typer.Option("--size", min=0, help="The size of a checkpoint you hold (as --checkpoint)."),
    ] = None,
    home: HomeOption = None,
    db: DbOption = None,
) -> None:
    """Write a self-contained bundle that `kernelindex verify` checks offline.

    A run's bundle holds every event of the run, every run of its comparison group and every
    key event behind their signatures, with the log's signed heads proving it is all of them.
    """
    if sum((bool(run), bool(cohort), all_events)) != 1:
        raise NotFoundError("give one of --run RUN (repeatable), --cohort KEY or --all")
    ledger = open_ledger(home, db)
    runs = [resolve_run_in(ledger, r) for r in run] if run else None
    held = [held_checkpoint_size(ledger, p.read_text("utf-8")) for p in checkpoint or []]
    held += list(size or [])
    with output.open("w", encoding="utf-8") as handle, progress_bar("exporting") as bar:
        task = bar.add_task("export", total=None)
        summary = export_runs(
            ledger,
            handle,
            runs,
            cohort=cohort,
            held=held,
            progress=lambda n: bar.update(task, completed=n),
        )
    scope = "" if summary.runs is None else f" ({summary.runs} runs, {summary.keys} keys)"
    err.print(
        f"wrote {output}: {summary.events} events{scope}, proofs against a signed checkpoint of "
        f"{summary.tree_size} leaves"
    )
