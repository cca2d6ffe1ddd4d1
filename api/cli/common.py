"""Shared pieces of the CLI: consoles, options, error handling and output.

Light on purpose: every command imports this module, so it imports nothing of the database
stack (the local ledger's helpers are in ``api.cli.local``). The consoles, refusals and plain
output are ``api.cli.console``'s (re-exported here), which ``kernelindex verify``'s fast
start imports without this module's Typer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer

from api.cli.console import (
    EXIT_REJECTED,
    Bar,
    Refused,
    _first_line,
    err,
    out,
    print_error,
    print_json,
    print_reply,
    progress_bar,
    read_notes,
    refuses,
)
from api.cli.options import CHECKPOINT, JSON

# Every command imports its consoles and output helpers from here.
__all__ = [
    "EXIT_REJECTED",
    "Bar",
    "CheckpointOption",
    "DbOption",
    "HomeOption",
    "JsonOption",
    "ServerOption",
    "_first_line",
    "err",
    "fail",
    "handles_errors",
    "out",
    "print_error",
    "print_json",
    "print_remote_receipt",
    "print_reply",
    "progress_bar",
    "read_notes",
    "remote_server",
]

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
JsonOption = Annotated[bool, JSON.info()]
CheckpointOption = Annotated[list[Path] | None, CHECKPOINT.info()]


def fail(code: str, message: str, exit_code: int = EXIT_REJECTED) -> typer.Exit:
    print_error(code, message)
    return typer.Exit(exit_code)


def handles_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn every expected refusal into a clear message and a non-zero exit, never a traceback
    (the refusals are ``api.cli.console.refuses``')."""
    refusing = refuses(func)

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return refusing(*args, **kwargs)
        except Refused as exc:
            raise typer.Exit(exc.code) from None

    return wrapper


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
