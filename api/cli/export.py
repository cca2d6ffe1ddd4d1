"""`kernelindex export`: a self-contained bundle of runs (or the whole ledger) for offline
verification.

Runs and groups are named as everywhere else, through the service (a digest, a unique prefix,
a name): ``--cohort sha256:5cd4617e`` is the group ``leaderboard sha256:5cd4617e`` shows. The
bundle is written whole or not at all (``api.cli.files``): a refusal leaves no file behind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from api.cli.common import DbOption, HomeOption, err, handles_errors, progress_bar
from api.cli.files import written_whole
from ledger.errors import NotFoundError

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
    # The service has no call that writes a bundle to a file with its progress, of the whole
    # ledger, or against checkpoints held as notes (``LedgerService.log.bundle`` answers a
    # run's or a group's as text): until it has, the export is made here from the service's
    # ledger, with the service's freshness (its views read through ``views.read_at``).
    from api.cli.service import local_service  # noqa: PLC0415 - the database, when it runs
    from ledger.store.log_queries import held_checkpoint_size  # noqa: PLC0415
    from projections.export import export_runs  # noqa: PLC0415

    with local_service(home, db, read_only=False) as service:
        runs = [service.runs.resolve(r) for r in run] if run else None
        group = service.boards.resolve(cohort) if cohort else None
        notes = [p.read_text("utf-8") for p in checkpoint or []]
        held = [held_checkpoint_size(service.ledger, note) for note in notes]
        held += list(size or [])
        with (
            written_whole(output) as partial,
            partial.open("w", encoding="utf-8") as handle,
            progress_bar("exporting") as bar,
        ):
            task = bar.add_task("export", total=None)
            summary = export_runs(
                service.ledger,
                handle,
                runs,
                cohort=group,
                held=held,
                progress=lambda n: bar.update(task, completed=n),
                read_views=service.views.read_at,
            )
    scope = "" if summary.runs is None else f" ({summary.runs} runs, {summary.keys} keys)"
    err.print(
        f"wrote {output}: {summary.events} events{scope}, proofs against a signed checkpoint of "
        f"{summary.tree_size} leaves"
    )
