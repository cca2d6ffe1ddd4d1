"""`kernelindex log ...`: the transparency log's checkpoints, proofs and entries."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from api.cli.common import DbOption, HomeOption, JsonOption, handles_errors, print_json
from api.cli.local import open_ledger
from ledger.store.log_queries import (
    checkpoint_json,
    consistency_json,
    entries_json,
    inclusion_json,
)

log_app = typer.Typer(
    help="The transparency log: checkpoints, proofs, entries.", no_args_is_help=True
)
app = typer.Typer()
app.add_typer(log_app, name="log")


@log_app.command("checkpoint")
@handles_errors
def log_checkpoint(
    home: HomeOption = None, db: DbOption = None, as_json: JsonOption = False
) -> None:
    """Sign (or show the already signed) checkpoint of the current tree."""
    signed = checkpoint_json(open_ledger(home, db))
    if as_json:
        print_json({k: signed[k] for k in ("size", "rootHash", "note", "signedAt")})
    else:
        sys.stdout.write(signed["note"])


@log_app.command("proof")
@handles_errors
def log_proof(
    leaf: Annotated[int, typer.Argument(help="Leaf index.")],
    size: Annotated[int | None, typer.Option(help="Tree size (default: current).")] = None,
    home: HomeOption = None,
    db: DbOption = None,
) -> None:
    """Inclusion proof of a leaf (JSON)."""
    print_json(inclusion_json(open_ledger(home, db), leaf, size))


@log_app.command("consistency")
@handles_errors
def log_consistency(
    old: Annotated[int, typer.Argument(help="Older tree size.")],
    new: Annotated[int, typer.Argument(help="Newer tree size.")],
    home: HomeOption = None,
    db: DbOption = None,
) -> None:
    """Consistency proof between two tree sizes (JSON)."""
    print_json(consistency_json(open_ledger(home, db), old, new))


@log_app.command("entries")
@handles_errors
def log_entries(
    start: Annotated[int, typer.Argument(help="First leaf index.")],
    end: Annotated[int | None, typer.Argument(help="End leaf index (exclusive).")] = None,
    home: HomeOption = None,
    db: DbOption = None,
) -> None:
    """Log entries by leaf range: leaf index, event position, leaf hash (JSON)."""
    print_json(entries_json(open_ledger(home, db), start, end))
