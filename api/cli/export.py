"""`kernelindex export`: a self-contained bundle of runs (or the whole ledger) for offline
verification, or the whole registry as JSON Lines to mirror.

Runs and groups are named as everywhere else, by the service's one rule
(``LedgerService.log.scope``: a digest, a unique prefix, a name): ``--cohort sha256:5cd4617e``
is the group ``leaderboard sha256:5cd4617e`` shows. Every file is written whole or not at
all (``api.cli.files``): a refusal leaves no file behind.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from api.cli.common import DbOption, HomeOption, err, handles_errors, progress_bar
from api.cli.files import written_whole
from ledger.errors import NotFoundError

if TYPE_CHECKING:
    from api.service.ledger_service import LedgerService

app = typer.Typer()
NOTE_SUFFIX = ".checkpoint"  # the signed note beside a registry's JSON Lines


@app.command("export")
@handles_errors
def export(
    output: Annotated[
        Path, typer.Option("-o", "--output", help="Bundle file to write (JSON Lines).")
    ],
    run: Annotated[
        list[str] | None,
        typer.Option("--run", help="Run digest, prefix or name (as `show`); repeatable."),
    ] = None,
    cohort: Annotated[
        str | None,
        typer.Option(
            "--cohort", help="A comparison key or unique prefix (as `leaderboard`): its runs."
        ),
    ] = None,
    all_events: Annotated[
        bool, typer.Option("--all", help="The whole ledger (the registry, signed).")
    ] = False,
    jsonl: Annotated[
        bool,
        typer.Option(
            "--jsonl",
            help="With --all: the registry as JSON Lines, a run a line (as GET "
            "/v1/registry.jsonl), its signed checkpoint beside it in OUTPUT.checkpoint.",
        ),
    ] = False,
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
    --all --jsonl writes the registry instead: a run a line, read at one signed checkpoint.
    """
    if sum((bool(run), bool(cohort), all_events)) != 1:
        raise NotFoundError("give one of --run RUN (repeatable), --cohort KEY or --all")
    if jsonl and not all_events:
        raise NotFoundError("--jsonl goes with --all (the registry, a run a line)")
    if jsonl and (checkpoint or size):
        raise NotFoundError("--checkpoint and --size go with a bundle, not --jsonl")
    from api.cli.service import local_service  # noqa: PLC0415 - the database, when it runs

    with local_service(home, db, read_only=False) as service:
        if jsonl:
            _registry(service, output)
        else:
            _bundle(service, output, run, cohort, checkpoint, size)


def _bundle(
    service: LedgerService,
    output: Path,
    run: list[str] | None,
    cohort: str | None,
    checkpoint: list[Path] | None,
    size: list[int] | None,
) -> None:
    scope = service.log.scope(run, cohort)
    held = [service.log.held_size(p.read_text("utf-8")) for p in checkpoint or []]
    held += list(size or [])
    with (
        written_whole(output) as partial,
        partial.open("w", encoding="utf-8", newline="") as handle,
        progress_bar("exporting") as bar,
    ):
        task = bar.add_task("export", total=None)
        summary = service.log.export(
            handle, scope, held=held, progress=lambda n: bar.update(task, completed=n)
        )
    counted = "" if summary.runs is None else f" ({summary.runs} runs, {summary.keys} keys)"
    err.print(
        f"wrote {output}: {summary.events} events{counted}, proofs against a signed checkpoint "
        f"of {summary.tree_size} leaves"
    )


def _registry(service: LedgerService, output: Path) -> None:
    registry = service.log.registry()
    note = output.with_name(output.name + NOTE_SUFFIX)
    with written_whole(output) as partial, written_whole(note) as partial_note:
        with partial.open("wb") as handle:
            for piece in registry.chunks():
                handle.write(piece)
        partial_note.write_text(registry.note, "utf-8", newline="")
    err.print(
        f"wrote {output}: {registry.runs} runs at the signed checkpoint of "
        f"{registry.checkpoint.size} leaves (its note: {note})"
    )
