"""A command's parameters as one table: Typer's declaration of them, and a parse without Typer.

``kernelindex verify`` must start within 5x ``python -c pass`` (issue 33), and Typer with its
Click is about a quarter of that start. A command that declares its parameters here (each a
:class:`Param`) gets both from the one table: :meth:`Param.annotated` is the ``Annotated``
type Typer reads (its help, usage and refusals are Typer's, built only when it runs), and
:func:`parse` reads a plain, well-formed argument vector into the same values without
importing Typer at all. :func:`parse` takes only what it fully understands (known long
options, each given as ``--name VALUE`` or a flag, values it reads as Typer would, the
arguments in number) and answers None for anything else: ``--help``, ``--``, ``--name=VALUE``,
a value that starts with ``-``, an unknown option, a value Typer might refuse. The caller
then runs Typer, which says what it says today. tests/cli/test_cli_start.py holds the two
to the same output over a sweep of argument vectors.

Imports neither Typer nor rich: the command's fast start imports this.
"""

from __future__ import annotations

import os
import re
from enum import Enum
from pathlib import Path
from types import NoneType, UnionType
from typing import Annotated, Any, Final, Union, get_args, get_origin

# Decimal integers as a user types them: the values whose Python reading (int()) is Typer's
# (pydantic's) too. Anything else (signs, spaces, underscores, other scripts' digits) goes to
# Typer. The bounded length keeps int() far from its digit limit.
INTEGER: Final = re.compile(r"-?[0-9]{1,18}", re.ASCII)

# What :func:`parse` gives back for a value it does not take.
_MISS: Final = object()


class Param:
    """One parameter of a command: its Python name, type, default, flags (none: an
    argument), help and lower bound, as Typer's ``Option``/``Argument`` takes them.

    A plain class (a dataclass costs ~4 M instructions to make on 3.11, every start)."""

    __slots__ = ("annotation", "decls", "default", "help", "min", "name")

    def __init__(
        self,
        name: str,
        annotation: Any,
        *decls: str,
        default: Any = None,
        help: str,
        min: int | None = None,
    ) -> None:
        self.name = name
        self.annotation = annotation
        self.decls = decls
        self.default = default
        self.help = help
        self.min = min

    def info(self) -> Any:
        """Typer's ``Option`` (or ``Argument``) for this parameter."""
        import typer  # noqa: PLC0415 - only the command Typer runs needs it

        if not self.decls:
            return typer.Argument(help=self.help, min=self.min)
        return typer.Option(*self.decls, help=self.help, min=self.min)

    def annotated(self) -> Any:
        """The annotation Typer reads the parameter from."""
        return Annotated[self.annotation, self.info()]

    def _kind(self) -> tuple[Any, bool]:
        """The type of one value, and whether the option repeats (a list)."""
        kind = self.annotation
        if get_origin(kind) in (Union, UnionType):
            rest = [arg for arg in get_args(kind) if arg is not NoneType]
            kind = rest[0] if len(rest) == 1 else None
        many = get_origin(kind) is list
        if many:
            (kind,) = get_args(kind)
        return kind, many

    def read(self, value: str) -> Any:
        """``value`` as Typer reads it, or ``_MISS`` where Typer might read it otherwise or
        refuse it (Typer then decides)."""
        kind, _many = self._kind()
        if not value or "\x00" in value:
            return _MISS
        if kind is str:
            return value
        if kind is int:
            if not INTEGER.fullmatch(value) or (self.min is not None and int(value) < self.min):
                return _MISS
            return int(value)
        if isinstance(kind, type) and issubclass(kind, Enum):
            return next((member for member in kind if member.value == value), _MISS)
        if kind is Path:
            # Typer refuses a path that is there but unreadable: only one this process can
            # read is taken here.
            return Path(value) if os.access(value, os.R_OK) else _MISS
        return _MISS


def signature(params: tuple[Param, ...]) -> tuple[Any, dict[str, Any]]:
    """The ``inspect.Signature`` and ``__annotations__`` Typer reads a command from."""
    import inspect  # noqa: PLC0415 - Typer's path only

    annotations = {param.name: param.annotated() for param in params}
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return inspect.Signature(
        [
            inspect.Parameter(
                param.name,
                kind,
                annotation=annotations[param.name],
                **({} if not param.decls else {"default": param.default}),
            )
            for param in params
        ]
    ), annotations


def parse(params: tuple[Param, ...], args: list[str]) -> dict[str, Any] | None:
    """The values of a command's parameters in ``args`` (after the command's name), or None
    for anything this does not fully understand (Typer then parses it)."""
    if any(name.startswith("_") and name.endswith("_COMPLETE") for name in os.environ):
        return None  # a shell asking Click to complete the command line
    options = {decl: param for param in params for decl in param.decls}
    arguments = [param for param in params if not param.decls]
    values = {param.name: param.default for param in params if param.decls}
    given: list[str] = []
    rest = iter(args)
    for token in rest:
        if not token.startswith("-"):
            given.append(token)
            continue
        param = options.get(token)
        if param is None:  # --help, --, -x, --name=VALUE, an unknown option, "-"
            return None
        kind, many = param._kind()
        if kind is bool:
            values[param.name] = True
            continue
        value = next(rest, None)
        if value is None or value.startswith("-"):
            return None
        read = param.read(value)
        if read is _MISS:
            return None
        values[param.name] = [*(values[param.name] or []), read] if many else read
    if len(given) != len(arguments):
        return None
    for param, value in zip(arguments, given, strict=True):
        read = param.read(value)
        if read is _MISS:
            return None
        values[param.name] = read
    return values


# Options more than one command takes (``api.cli.common`` gives Typer's commands them as
# ``JsonOption`` and ``CheckpointOption``).
JSON: Final = Param(
    "as_json", bool, "--json", default=False, help="Machine-readable JSON on stdout."
)
CHECKPOINT: Final = Param(
    "checkpoint",
    list[Path] | None,
    "--checkpoint",
    help="A signed checkpoint you hold (e.g. from a witness); repeatable.",
)
