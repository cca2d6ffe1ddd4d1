"""What the SOL document parsers share: their error types and typed field access.

Used by ``gpu_agent/definition.py``, ``gpu_agent/workload.py``, ``gpu_agent/launch_spec.py``
and ``gpu_agent/solution.py``; importers outside them take the errors from
``gpu_agent.solution``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, cast

import numpy as np

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


class SolutionError(ValueError):
    """A solution, definition or workload document is malformed or inconsistent."""


class UnsupportedSolution(SolutionError):
    """A well-formed solution of a kind the agent refuses to run (the message says why)."""


def require(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """``obj[key]``, which must be present and of ``kind`` (a bool is no int here)."""
    if key not in obj:
        raise SolutionError(f"{where}: missing {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise SolutionError(f"{where}.{key}: wrong type {type(value).__name__}")
    return value


def int_range(dtype: np.dtype[np.generic]) -> tuple[int, int]:
    """The smallest and largest value of an integer dtype."""
    info = np.iinfo(cast(Any, dtype))
    return int(info.min), int(info.max)
