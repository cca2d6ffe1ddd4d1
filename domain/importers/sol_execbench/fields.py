"""Typed reads of SOL-ExecBench documents, with the SOL importers' error wording.

Every reader raises :class:`SolFormatError` naming where the value sits and what it is
(``definition 'axes' must be a JSON object, got an array``). The SOL-ExecBench leaderboard
importer shares the error type; the catalog-shaped importers word theirs differently and read
through :mod:`domain.importers.fields`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from domain.errors import DomainError
from domain.expressions import MAX_SAFE_INTEGER

JsonObject = dict[str, Any]


class SolFormatError(DomainError):
    """A SOL-ExecBench document lacks a field, has a wrong type or an impossible value."""

    code = "malformed-source"


def json_type(value: object) -> str:
    """The JSON type of a parsed value, as a reason names it (``a string``, ``null``...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def json_object(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise SolFormatError(f"{where} must be a JSON object, got {json_type(value)}")
    return value


def required_string(obj: Mapping[str, Any], key: str, where: str) -> str:
    """``obj[key]``, a non-empty string."""
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        missing = key not in obj or value is None
        raise SolFormatError(
            f"{where}: '{key}' is missing"
            if missing
            else f"{where}: '{key}' must be a non-empty string, got {json_type(value)}"
        )
    return value


def optional_string(obj: Mapping[str, Any], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise SolFormatError(f"{where}: '{key}' must be a string, got {json_type(value)}")
    return value


def integer(value: object, where: str) -> int:
    """A whole JSON number that a manifest's JSON number holds exactly (within ±(2^53−1))."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SolFormatError(f"{where} must be an integer, got {json_type(value)}")
    if isinstance(value, float) and not value.is_integer():
        raise SolFormatError(f"{where} must be an integer, got {value!r}")
    whole = int(value)
    if abs(whole) > MAX_SAFE_INTEGER:
        raise SolFormatError(f"{where} is beyond ±(2^53−1)")
    return whole


def number(value: object, where: str) -> int | float:
    """A finite JSON number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SolFormatError(f"{where} must be a number, got {json_type(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise SolFormatError(f"{where} must be finite")
    return value


def optional_number(obj: Mapping[str, Any], key: str, where: str) -> int | float | None:
    value = obj.get(key)
    return None if value is None else number(value, f"{where}: '{key}'")
