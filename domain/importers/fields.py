"""Typed reads of parsed JSON, for the importers that write the catalog's shapes.

The FlashInfer-Bench, GPU MODE KernelBot and KernelIndex catalog importers read their
documents through these, so a rejection is worded the same whichever of them wrote it
(``<where> must be ...``). The SOL-ExecBench importers word theirs differently and keep their
own readers (:mod:`domain.importers.sol_execbench.fields`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

from domain.errors import DomainError

_IDENTIFIER: Final = re.compile(r"[a-z][a-z0-9_]*")


class MappingError(DomainError):
    """A source record lacks what the mapping needs, or holds a value it cannot accept."""

    code = "unmappable-record"


# What a per-record mapping may raise on bad input; caught so the other records still come out.
RECORD_ERRORS: Final = (DomainError, KeyError, TypeError, ValueError, ArithmeticError)


def reason(exc: Exception) -> str:
    """Why a record was rejected, from a domain error or an unexpected shape of input."""
    if isinstance(exc, DomainError):
        return exc.message
    return f"malformed record ({type(exc).__name__}: {exc})"


def as_object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MappingError(f"{where} must be an object")
    return value


def field(record: Mapping[str, Any], key: str, where: str) -> Any:
    """``record[key]``, which must be present and not null."""
    value = record.get(key)
    if value is None:
        raise MappingError(f"{where}.{key} is missing")
    return value


def text(value: object, where: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise MappingError(f"{where} must be a non-empty string")
    return value


def number(value: object, where: str, *, positive: bool = False) -> int | float:
    """A finite, non-negative JSON number (positive if asked); integral floats become ints."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MappingError(f"{where} must be a number, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise MappingError(f"{where} must be finite, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise MappingError(f"{where} must be {'positive' if positive else 'non-negative'}: {value}")
    return int(value) if isinstance(value, float) and value.is_integer() else value


def integer(value: object, where: str) -> int:
    if isinstance(value, bool) or not (
        isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    ):
        raise MappingError(f"{where} must be an integer, got {value!r}")
    return int(value)


def numeric_text(value: object, where: str, *, positive: bool = False) -> int | float:
    """A number, or a string holding one (KernelBot stores its results as strings)."""
    if isinstance(value, str):
        try:
            parsed = float(value)
        except ValueError:
            raise MappingError(f"{where} must be a number, got {value!r}") from None
        return number(parsed, where, positive=positive)
    return number(value, where, positive=positive)


def identifier(value: str, where: str) -> str:
    """Lower snake case, as the schemas' identifiers (dtype, language, generator...)."""
    result = re.sub(r"[^a-z0-9_]+", "_", value.strip().lower()).strip("_")
    if not _IDENTIFIER.fullmatch(result):
        raise MappingError(f"{where}: {value!r} cannot be written as an identifier")
    return result
