"""Command-line values coerced without building a pydantic validator for each parameter.

Typer 0.29 (what this was written against) coerces every parameter's value through a
pydantic ``TypeAdapter`` it builds as it parses: a command with a parameter imports pydantic
(about 55 ms of CPU on a quiet core, 1.5-2x ``python -c pass``) and builds a dozen adapters
before it does anything, whether or not anything else it does needs pydantic. The commands'
parameters are of a few plain kinds (str, int and float with bounds, bool, Path, an Enum, a
list of one of those), and the well-formed value of each has one obvious result.
:func:`fast_parameters` gives each parameter of a loaded command a coercion that takes that
result directly for a well-formed value, and hands anything else to Typer's own coercion
(built only then): what a command accepts, what it makes of it and every refusal's message
are Typer's. tests/cli/test_cli_parameters.py holds the fast path to Typer's answer over
generated values, for every parameter of every command.

The parameters stay Typer's, declared once on each command; only who turns a well-formed
string into its value changes. On a Typer without this coercion layer (click's types did the
work) there is nothing to replace and :func:`fast_parameters` leaves the command alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import Enum
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, get_args, get_origin

from api.cli.options import INTEGER as _INTEGER

try:
    from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
    from typer._param_types import coerce_cli_choice, coerce_cli_path
    from typer.core import _TyperParameter

    COERCES = True
except ImportError:  # a Typer that coerces with click's types: nothing to replace
    COERCES = False

if TYPE_CHECKING:
    from typer import _click as click
    from typer.models import ParameterInfo

# A value the fast path does not take: Typer's own coercion decides it.
_MISS: Final = object()

# Decimal integers (api/cli/options.py's, which reads them for a command's fast start) and
# fractions as a user types them: the values whose Python reading (int(), float()) is
# pydantic's too. Anything else (signs, spaces, underscores, exponents, "nan", other
# scripts' digits) goes to pydantic. Both read a plain decimal correctly rounded; the
# bounded lengths keep int() and float() far from their limits.
_DECIMAL = re.compile(r"-?[0-9]{1,15}(?:\.[0-9]{1,15})?", re.ASCII)

Leaf = Callable[[Any, "click.Context", Any], Any]


def _choice(info: ParameterInfo, annotation: type[Enum]) -> Leaf:
    choices = tuple(annotation)

    def choice(value: Any, ctx: click.Context, _param: Any) -> Any:
        try:
            return coerce_cli_choice(
                value, choices=choices, case_sensitive=info.case_sensitive, ctx=ctx
            )
        except ValueError:
            return _MISS  # Typer says why, in its words

    return choice


def _number(info: ParameterInfo, annotation: type[float]) -> Leaf | None:
    if info.clamp:
        return None
    low, high = info.min, info.max
    pattern = _INTEGER if annotation is int else _DECIMAL

    def number(value: Any, _ctx: click.Context, _param: Any) -> Any:
        if isinstance(value, str) and pattern.fullmatch(value):
            read = annotation(value)
        elif type(value) is annotation:
            read = value
        else:
            return _MISS
        # Written so that NaN (a caller's float, never argv's) is out of every bound.
        if (low is not None and not read >= low) or (high is not None and not read <= high):
            return _MISS  # out of bounds: Typer's message
        return read

    return number


def _flag(value: Any, _ctx: click.Context, _param: Any) -> Any:
    return value if isinstance(value, bool) else _MISS


def _text(value: Any, _ctx: click.Context, _param: Any) -> Any:
    return str(value) if isinstance(value, str) else _MISS


def _path(info: ParameterInfo, annotation: type[Path]) -> Leaf | None:
    if info.path_type is not None:
        return None

    def path(value: Any, ctx: click.Context, param: Any) -> Any:
        if not isinstance(value, str) or "\x00" in value:
            # NUL (no argv carries one; a caller's Python value can): Typer's own answer.
            return _MISS
        # Typer's own checks (exists, file or directory, readable), on the path made.
        return coerce_cli_path(annotation(value), info, path_type=annotation, param=param, ctx=ctx)

    return path


def _leaf(descriptor: TypeDescriptor, annotation: Any) -> Leaf | None:
    """The fast coercion of one value of ``annotation``, or None where there is none."""
    info = descriptor.parameter_info
    if info.parser is not None or descriptor.file_annotation is not None:
        return None
    if annotation is bool:
        return _flag
    if annotation is str:
        return _text
    if annotation is int or annotation is float:
        return _number(info, annotation)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return _choice(info, annotation)
    if isinstance(annotation, type) and issubclass(annotation, Path):
        return _path(info, annotation)
    return None


if COERCES:

    class FastParam(RuntimeParam):
        """A parameter's coercion: the fast path where it takes the value, else Typer's.

        Typer's ``RuntimeParam`` (a frozen dataclass) holds the parameter and annotation;
        this subclass is no dataclass of its own (making one costs ~4 M instructions on
        3.11, at every command's start)."""

        def __init__(self, descriptor: TypeDescriptor, fast: Leaf, many: bool) -> None:
            super().__init__(descriptor.parameter_info, descriptor.annotation)
            self.descriptor = descriptor
            self.fast = fast
            self.many = many

        @cached_property
        def typers(self) -> RuntimeParam:
            return build_runtime_param(self.descriptor)

        def _coerce_value(self, value: Any, param: Any, ctx: click.Context) -> Any:
            if self.many:
                if isinstance(value, (list, tuple)):
                    items = [self.fast(item, ctx, param) for item in value]
                    if all(item is not _MISS for item in items):
                        return items
            else:
                read = self.fast(value, ctx, param)
                if read is not _MISS:
                    return read
            return self.typers._coerce_value(value, param=param, ctx=ctx)


def fast_param(descriptor: TypeDescriptor) -> RuntimeParam | None:
    """The fast coercion for a parameter of ``descriptor``'s kind, if it has one."""
    annotation: Any = descriptor.annotation
    many = get_origin(annotation) is list
    if many:
        (annotation,) = get_args(annotation)
    elif get_origin(annotation) is not None:
        return None  # a tuple or another generic: Typer's
    leaf = _leaf(descriptor, annotation)
    if leaf is None:
        return None
    return FastParam(descriptor, leaf, many)


def fast_parameters(command: click.Command, ctx: click.Context) -> None:
    """Give each Typer parameter of ``command`` (run in ``ctx``) the fast coercion, its help
    option's included (Click makes that one on first use: made here, in ``ctx``), and those
    of its subcommands, each in a context under ``ctx``."""
    if not COERCES:
        return
    for param in command.get_params(ctx):
        # Only where Typer has made none yet (and still keeps it where this looks).
        if isinstance(param, _TyperParameter) and getattr(param, "_runtime_param", 0) is None:
            param._runtime_param = fast_param(param.type_descriptor)
    for name, sub in getattr(command, "commands", {}).items():
        fast_parameters(sub, type(ctx)(sub, parent=ctx, info_name=name))
