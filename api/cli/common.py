"""Shared pieces of the CLI: consoles, options, error handling and output.

Light on purpose: every command imports this module, ``kernelindex verify`` included, so it
imports nothing of the database stack (the local ledger's helpers are in ``api.cli.local``).
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec, Protocol, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from domain.errors import DomainError
from ledger.errors import store_error
from ledger.signing.keys import KeyFileError

if TYPE_CHECKING:
    from types import TracebackType

EXIT_REJECTED = 1

# emoji=False: a ``:name:`` in a run's title or a file name is printed as spelled, and the
# emoji table (~12 M instructions, a seventh of a bare interpreter's start) is never loaded.
out = Console(highlight=False, soft_wrap=True, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)

P = ParamSpec("P")
R = TypeVar("R")

HomeOption = Annotated[
    Path | None,
    typer.Option("--home", help="Ledger home (default $KERNELINDEX_HOME or ~/.kernelindex)."),
]
DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="SQLAlchemy URL of the event store (default $KERNELINDEX_DB or the home's SQLite).",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]
CheckpointOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--checkpoint", help="A signed checkpoint you hold (e.g. from a witness); repeatable."
    ),
]


def print_error(code: str, message: str) -> None:
    err.print(f"[bold red]error{escape('[' + code + ']')}[/]: {escape(message)}")


def fail(code: str, message: str, exit_code: int = EXIT_REJECTED) -> typer.Exit:
    print_error(code, message)
    return typer.Exit(exit_code)


def handles_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn every expected refusal into a clear message and a non-zero exit, never a traceback."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except DomainError as exc:
            raise fail(exc.code, exc.message) from None
        except KeyFileError as exc:
            raise fail("bad-key-file", str(exc)) from None
        except OSError as exc:
            raise fail("io", f"{exc.filename or ''}: {exc.strerror}") from None
        except Exception as exc:
            # The database's failures (full, read-only, unreachable) as a clear refusal; any
            # other exception is a bug and keeps its traceback.
            refused = store_error(exc)
            if refused is None:
                raise
            raise fail(refused.code, f"{refused.message} ({_first_line(exc)})") from None

    return wrapper


def _first_line(exc: BaseException) -> str:
    """The driver's own words (e.g. "database or disk is full"), without SQL or parameters."""
    cause: BaseException = exc
    seen = {id(exc)}
    while cause.__cause__ is not None and id(cause.__cause__) not in seen:  # a loop ends it
        cause = cause.__cause__
        seen.add(id(cause))
    orig = getattr(cause, "orig", None)
    text = str(orig if orig is not None else cause).strip().splitlines()
    return text[0][:200] if text else type(cause).__name__


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def print_reply(reply: object) -> None:
    """A service reply (``api.service.models``) as the HTTP API sends it, byte for byte, on
    one line: msgspec's JSON encoder, which Litestar's ``encode_json`` is (its ``enc_hook`` is
    asked only for types msgspec does not encode itself, and the reply models hold none).
    tests/cli/test_cli_json_is_the_apis.py holds the bytes equal."""
    import msgspec  # noqa: PLC0415 - only a command that prints a reply needs it

    sys.stdout.write(msgspec.json.encode(reply).decode("utf-8") + "\n")


def read_notes(paths: list[Path] | None) -> list[str]:
    """The signed notes (checkpoints) in the files given."""
    return [p.read_text("utf-8") for p in paths or []]


# ------------------------------------------------------------------ commands


ServerOption = Annotated[
    str | None,
    typer.Option(
        "--server",
        help="A KernelIndex server's base URL, e.g. http://127.0.0.1:8000 (not with --home/--db).",
    ),
]


def remote_server(server: str | None, home: Path | None, db: str | None) -> str | None:
    """The server to talk to, if any: a server and a local ledger are alternatives."""
    if server is not None and (home is not None or db is not None):
        raise typer.BadParameter("give --server or --home/--db, not both", param_hint="--server")
    return server


def print_remote_receipt(reply: dict[str, Any], as_json: bool, what: str) -> None:
    """A server's receipt (JSON), worded like a local one."""
    if as_json:
        print_json(reply)
        return
    verb = "already recorded" if reply.get("duplicate") else "appended"
    proof = reply.get("log") or {}
    leaf = (
        f" (leaf {proof['leafIndex']})" if isinstance(proof, dict) and "leafIndex" in proof else ""
    )
    out.print(f"{what} {verb}: {reply.get('event')} at position {reply.get('position')}{leaf}")


class Bar(Protocol):
    """What a command does with its progress bar (rich's ``Progress`` is one)."""

    def __enter__(self) -> Bar: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    def add_task(self, description: str, *, total: float | None = ...) -> Any: ...

    def update(self, task_id: Any, *, completed: float | None = ...) -> None: ...


class _NoBar:
    """The bar where none is drawn (stderr is not a terminal): what a disabled ``Progress``
    shows, without importing rich's live display (start-up: issue 33)."""

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def add_task(self, description: str, *, total: float | None = None) -> int:
        return 0

    def update(self, task_id: Any, *, completed: float | None = None) -> None:
        return None


def progress_bar(what: str) -> Bar:
    """A bar on stderr, only on a terminal (a pipe or a test sees none)."""
    if not err.is_terminal:
        return _NoBar()
    # Loaded here: only the long commands (export, verify, audit, rebuild) show one.
    from rich.progress import (  # noqa: PLC0415
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(
        TextColumn(f"[bold]{what}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )
