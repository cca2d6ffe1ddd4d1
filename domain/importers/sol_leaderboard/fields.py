"""Typed reads of the SOL-ExecBench leaderboard API's responses.

A submission's fields are named in reasons as ``submission: '<key>'``; the errors are the SOL
importers' :class:`~domain.importers.sol_execbench.fields.SolFormatError`, worded as
KernelIndex's leaderboard importer words them (not as the folder importer does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from domain.importers.sol_execbench.fields import SolFormatError


def json_object(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise SolFormatError(f"{where} must be a JSON object")
    return value


def required(submission: Mapping[str, Any], key: str) -> Any:
    """``submission[key]``, present and not null."""
    value = submission.get(key)
    if value is None:
        raise SolFormatError(f"submission: required field '{key}' is missing")
    return value


def required_string(submission: Mapping[str, Any], key: str) -> str:
    value = required(submission, key)
    if not isinstance(value, str) or not value:
        raise SolFormatError(f"submission: '{key}' must be a non-empty string")
    return value


def non_negative_id(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SolFormatError(f"{where} must be a non-negative integer")
    return value


def flag(submission: Mapping[str, Any], key: str, *, required: bool) -> bool:
    """A boolean field; an absent optional one is false."""
    value = submission.get(key)
    if value is None and not required:
        return False
    if not isinstance(value, bool):
        raise SolFormatError(
            f"submission: required field '{key}' is missing"
            if value is None
            else f"submission: '{key}' must be true or false"
        )
    return value
