"""`kernelindex audit`: the stored log recomputed and checked against itself and against the
signed heads of bundles."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from api.cli.common import (
    EXIT_REJECTED,
    CheckpointOption,
    DbOption,
    HomeOption,
    JsonOption,
    handles_errors,
    print_json,
    progress_bar,
    read_notes,
)
from api.cli.local import open_ledger
from api.cli.report import print_report
from ledger.audit import audit_ledger
from ledger.errors import NotFoundError

app = typer.Typer()


def _heads_notes(path: Path) -> list[str]:
    """The heads notes of a bundle file (or the file itself, if it is a note)."""
    text = path.read_text("utf-8")
    if text.startswith("kernelindex-heads/"):
        return [text]
    found = []
    for line in text.splitlines():
        if '"type":"heads"' in line.replace(" ", ""):
            record = json.loads(line)
            if isinstance(record, dict) and isinstance(record.get("note"), str):
                found.append(record["note"])
    if not found:
        raise NotFoundError(f"{path} holds no heads (a scoped bundle does)")
    return found


@app.command("audit")
@handles_errors
def audit(
    checkpoint: CheckpointOption = None,
    heads: Annotated[
        list[Path] | None,
        typer.Option(
            "--heads",
            help="A bundle whose signed heads must say what the log says (repeatable).",
        ),
    ] = None,
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Recompute every leaf, the tree and every checkpoint from the stored events; and any
    bundle's signed heads given, from the log at their size."""
    ledger = open_ledger(home, db)
    notes = [note for path in heads or [] for note in _heads_notes(path)]
    with progress_bar("auditing") as bar:
        task = bar.add_task("audit", total=None)
        report = audit_ledger(
            ledger,
            known_checkpoints=read_notes(checkpoint),
            heads=notes,
            progress=lambda n: bar.update(task, completed=n),
        )
    if as_json:
        print_json(report.to_json())
    else:
        print_report(report)
    if not report.verified:
        raise typer.Exit(EXIT_REJECTED)
