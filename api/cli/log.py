"""`kernelindex log ...`: the transparency log's checkpoints, proofs and entries.

Each asks the service (``LedgerService.log``) and prints its reply as ``GET /v1/log/...``
sends it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from api.cli.common import DbOption, HomeOption, JsonOption, handles_errors, print_reply

if TYPE_CHECKING:
    from api.service.ledger_service import LedgerService

log_app = typer.Typer(
    help="The transparency log: checkpoints, proofs, entries.", no_args_is_help=True
)
app = typer.Typer()
app.add_typer(log_app, name="log")


@contextmanager
def _service(home: Path | None, db: str | None) -> Iterator[LedgerService]:
    from api.cli.service import local_service  # noqa: PLC0415 - the database, when it runs

    with local_service(home, db) as service:
        yield service


def _reply(home: Path | None, db: str | None, ask: Callable[[LedgerService], object]) -> None:
    with _service(home, db) as service:
        reply = ask(service)
    print_reply(reply)


@log_app.command("checkpoint")
@handles_errors
def log_checkpoint(
    home: HomeOption = None, db: DbOption = None, as_json: JsonOption = False
) -> None:
    """The log's signed checkpoint of the current tree (the note; --json: with its size,
    root and time)."""
    with _service(home, db) as service:
        signed = service.log.checkpoint()
    if as_json:
        print_reply(signed)
    else:
        sys.stdout.write(signed.note)


@log_app.command("proof")
@handles_errors
def log_proof(
    leaf: Annotated[int, typer.Argument(help="Leaf index.")],
    size: Annotated[int | None, typer.Option(help="Tree size (default: current).")] = None,
    home: HomeOption = None,
    db: DbOption = None,
) -> None:
    """Inclusion proof of a leaf (JSON)."""
    _reply(home, db, lambda service: service.log.inclusion(leaf, size))


@log_app.command("consistency")
@handles_errors
def log_consistency(
    old: Annotated[int, typer.Argument(help="Older tree size.")],
    new: Annotated[int, typer.Argument(help="Newer tree size.")],
    home: HomeOption = None,
    db: DbOption = None,
) -> None:
    """Consistency proof between two tree sizes (JSON)."""
    _reply(home, db, lambda service: service.log.consistency(old, new))


@log_app.command("entries")
@handles_errors
def log_entries(
    start: Annotated[int, typer.Argument(help="First leaf index.")],
    end: Annotated[int | None, typer.Argument(help="End leaf index (exclusive).")] = None,
    home: HomeOption = None,
    db: DbOption = None,
) -> None:
    """Log entries by leaf range: leaf index, event position, leaf hash (JSON)."""
    _reply(home, db, lambda service: service.log.entries(start, end))
