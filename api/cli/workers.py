"""`kernelindex projector` and `kernelindex sequencer`: the ledger's background processes.

Both are optional beside the API. Every write already sequences its own events into the log
in its own transaction, and every read folds new events into the views first; these
processes keep the views and the signed checkpoint fresh when nobody is reading or writing
(events written by other processes, after a crash, for monitors that fetch the checkpoint).
Any number may run: on PostgreSQL each step takes the same advisory lock as the in-process
work, so they never fold or sequence the same events twice, and a process killed mid-batch
leaves nothing of that batch (each batch is one transaction).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer
from eventsourcing.persistence import PersistenceError
from sqlalchemy.exc import DBAPIError

from api.cli.common import DbOption, HomeOption, err, handles_errors, out
from api.service.admin import DEFAULT_BATCH
from ledger.errors import StoreError, is_outage

IntervalOption = Annotated[
    float, typer.Option(min=0.05, help="Seconds to wait when there is nothing new.")
]
MAX_BACKOFF = 30.0  # seconds between attempts while the store is down
OnceOption = Annotated[bool, typer.Option("--once", help="Catch up once, then exit.")]


class _Stop:
    """SIGTERM/SIGINT end the loop between batches, never inside one (handlers restored
    when the command returns)."""

    def __init__(self) -> None:
        self.requested = False
        self._previous = {
            sig: signal.signal(sig, self._handle) for sig in (signal.SIGTERM, signal.SIGINT)
        }

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def _loop(step: Callable[[], int], interval: float, once: bool, what: str, stop: _Stop) -> None:
    """Run `step` (returns how much it did) until stopped; wait out store outages, with
    backoff, and stop with a clear error on anything retrying cannot fix."""
    if not once:
        out.print(f"{what}: running (Ctrl-C or SIGTERM stops it between batches)")
    failures = 0
    while not stop.requested:
        try:
            done = step()
            failures = 0
        except (DBAPIError, PersistenceError) as exc:
            first_line = str(exc).splitlines()[0]
            if once or not is_outage(exc):
                # A missing table, a schema from another release, bad SQL: an operator's
                # problem, so exit non-zero for the supervisor to notice.
                raise StoreError(
                    f"{what}: the store failed in a way retrying cannot fix ({first_line}); "
                    "check 'kernelindex db status'"
                ) from exc
            # The batch rolled back; the next attempt starts from the committed position.
            failures += 1
            err.print(f"[yellow]{what}: store unavailable (attempt {failures}): {first_line}")
            _sleep(min(interval * 2**failures, MAX_BACKOFF), stop)
            continue
        if once and done == 0:
            return
        if done == 0:
            _sleep(interval, stop)


def _sleep(seconds: float, stop: _Stop) -> None:
    deadline = time.monotonic() + seconds
    while not stop.requested and time.monotonic() < deadline:
        time.sleep(min(0.05, seconds))


@handles_errors
def projector(
    home: HomeOption = None,
    db: DbOption = None,
    interval: IntervalOption = 1.0,
    batch: Annotated[int, typer.Option(min=1, help="Events per transaction.")] = DEFAULT_BATCH,
    once: OnceOption = False,
) -> None:
    """Fold new events into the read models, batch by batch, until stopped (SIGTERM/SIGINT)."""
    stop = _Stop()  # before opening the store: a stop during start-up is honoured too
    try:
        _project(home, db, interval, batch, once, stop)
    finally:
        stop.restore()


def _project(
    home: Path | None, db: str | None, interval: float, batch: int, once: bool, stop: _Stop
) -> None:
    from api.cli.service import local_service  # noqa: PLC0415 - the database, when it runs

    with local_service(home, db, read_only=False) as service:

        def step() -> int:
            done = service.admin.fold(batch)
            if done.events:
                out.print(
                    f"projector: folded {done.events} events (views at position {done.position})"
                )
            return done.events

        _loop(step, interval, once, "projector", stop)


@handles_errors
def sequencer(
    home: HomeOption = None,
    db: DbOption = None,
    interval: IntervalOption = 1.0,
    checkpoint_every: Annotated[
        float,
        typer.Option(min=0.0, help="Sign a checkpoint this often when the tree grew (0: never)."),
    ] = 10.0,
    once: OnceOption = False,
) -> None:
    """Sequence events stored without a log leaf and sign checkpoints as the tree grows."""
    stop = _Stop()
    try:
        _sequence(home, db, interval, checkpoint_every, once, stop)
    finally:
        stop.restore()


def _sequence(
    home: Path | None,
    db: str | None,
    interval: float,
    checkpoint_every: float,
    once: bool,
    stop: _Stop,
) -> None:
    from api.cli.service import local_service  # noqa: PLC0415 - the database, when it runs

    with local_service(home, db, read_only=False) as service:
        admin = service.admin
        signed_size = -1
        last_signed = 0.0

        def step() -> int:
            nonlocal signed_size, last_signed
            added = admin.sequence()
            if added:
                out.print(f"sequencer: sequenced {added} events")
            due = checkpoint_every > 0 and time.monotonic() - last_signed >= checkpoint_every
            if (due or once) and admin.can_sign():
                size = admin.sign_checkpoint()
                last_signed = time.monotonic()
                if size != signed_size:
                    signed_size = size
                    out.print(f"sequencer: checkpoint at tree size {size}")
            return added

        _loop(step, interval, once, "sequencer", stop)


# What this module adds to `kernelindex` (api/cli/main.py lists it).
app = typer.Typer()
app.command("projector")(projector)
app.command("sequencer")(sequencer)
