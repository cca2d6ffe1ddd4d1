"""The CLI's consoles, refusals and plain output: what a command prints, without Typer.

``api.cli.common`` re-exports all of it for the commands Typer runs; ``kernelindex verify``'s
fast start (api/cli/options.py) imports this alone, so it imports no Typer and no Click.
Light on purpose: it imports nothing of the database stack.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

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


class Refused(Exception):
    """A refusal already said on stderr: the command ends with ``code``."""

    def __init__(self, code: int = EXIT_REJECTED) -> None:
        super().__init__(code)
        self.code = code


class UsageProblem(Exception):
    """The arguments, well-formed one by one, do not go together: a usage error (exit 2),
    which Typer words (``typer.BadParameter``)."""


def print_error(code: str, message: str) -> None:
    err.print(f"[bold red]error{escape('[' + code + ']')}[/]: {escape(message)}")


def refuses(func: Callable[P, R]) -> Callable[P, R]:
    """Turn every expected refusal into a clear message and :class:`Refused`, never a
    traceback (``api.cli.common.handles_errors`` makes that Typer's exit)."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except DomainError as exc:
            print_error(exc.code, exc.message)
        except KeyFileError as exc:
            print_error("bad-key-file", str(exc))
        except OSError as exc:
            print_error("io", f"{exc.filename or ''}: {exc.strerror}")
        except Exception as exc:
            # The database's failures (full, read-only, unreachable) as a clear refusal; any
            # other exception is a bug and keeps its traceback.
            refused = store_error(exc)
            if refused is None:
                raise
            print_error(refused.code, f"{refused.message} ({_first_line(exc)})")
        raise Refused(EXIT_REJECTED) from None

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

    return _Drawn(
        Progress(
            TextColumn(f"[bold]{what}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
            # Drawn from the command's own thread (``_Drawn``): rich's refresh thread would
            # make ``verify`` start its workers cold (a process with threads does not fork).
            auto_refresh=False,
        )
    )


class _Drawn:
    """A rich ``Progress`` redrawn by its updates, at most ten times a second."""

    _EVERY = 0.1

    def __init__(self, progress: Any) -> None:
        self._progress = progress
        self._drawn = 0.0

    def __enter__(self) -> _Drawn:
        self._progress.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._progress.__exit__(exc_type, exc, tb)

    def add_task(self, description: str, *, total: float | None = None) -> Any:
        return self._progress.add_task(description, total=total)

    def update(self, task_id: Any, *, completed: float | None = None) -> None:
        self._progress.update(task_id, completed=completed)
        now = time.monotonic()
        if now - self._drawn >= self._EVERY:
            self._drawn = now
            self._progress.refresh()
