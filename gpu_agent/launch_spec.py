"""A solution's declarative ``spec.launch``, and its resolution for one workload.

``spec.launch`` is what KernelIndex adds to the SOL Solution format (see
``gpu_agent/solution.py``): grid, block and dynamic shared memory as integer expressions of
the definition's axes, and the kernel's arguments in order — tensors by name, scalars by
type and expression. :func:`parse_launch` vets it once per job; :func:`resolve_launch`
evaluates it for one workload's axis values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from gpu_agent import expressions
from gpu_agent.expressions import LaunchSpecError
from gpu_agent.sol_parsing import SolutionError, int_range, require

MAX_LAUNCH_ARGS = 64
_LAUNCH_FIELDS = frozenset({"grid", "block", "sharedMemBytes", "args"})

ScalarType = Literal["int32", "int64", "uint32", "uint64", "float32", "float64"]
SCALAR_TYPES: dict[str, np.dtype[np.generic]] = {
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "uint32": np.dtype(np.uint32),
    "uint64": np.dtype(np.uint64),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
}


@dataclass(frozen=True)
class LaunchArg:
    kind: Literal["input", "output", "scalar"]
    name: str | None = None  # the tensor, for input/output
    scalar_type: str | None = None
    value: str | int | float | None = None


@dataclass(frozen=True)
class LaunchSpec:
    grid: tuple[str | int, ...]
    block: tuple[str | int, ...]
    shared_mem_bytes: str | int
    args: tuple[LaunchArg, ...]


def _launch_arg(obj: object, where: str) -> LaunchArg:
    if not isinstance(obj, dict) or len(obj.keys() & {"input", "output", "scalar"}) != 1:
        raise SolutionError(f"{where}: must be {{input}}, {{output}} or {{scalar, value}}")
    if "input" in obj or "output" in obj:
        kind: Literal["input", "output"] = "input" if "input" in obj else "output"
        if set(obj) != {kind} or not isinstance(obj[kind], str):
            raise SolutionError(f"{where}: {{{kind!r}: <tensor name>}} takes nothing else")
        return LaunchArg(kind, name=obj[kind])
    if set(obj) != {"scalar", "value"}:
        raise SolutionError(f"{where}: a scalar argument is {{scalar: <type>, value: <expr>}}")
    scalar_type = obj["scalar"]
    if scalar_type not in SCALAR_TYPES:
        raise SolutionError(
            f"{where}: scalar type {scalar_type!r} not in {', '.join(SCALAR_TYPES)}"
        )
    value = obj["value"]
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise SolutionError(f"{where}: scalar value must be an expression string or a number")
    if isinstance(value, float) and not scalar_type.startswith("float"):
        raise SolutionError(f"{where}: {scalar_type} scalar value must be an integer")
    return LaunchArg("scalar", scalar_type=scalar_type, value=value)


def _expression_list(obj: object, where: str) -> tuple[str | int, ...]:
    if not isinstance(obj, list) or not 1 <= len(obj) <= 3:
        raise SolutionError(f"{where} must be a list of 1 to 3 expressions")
    for item in obj:
        if isinstance(item, bool) or not isinstance(item, (str, int)):
            raise SolutionError(f"{where}: each entry must be an expression string or integer")
    return tuple(obj)


def parse_launch(raw_launch: Mapping[str, Any]) -> LaunchSpec:
    """Vet a solution's ``spec.launch`` object (its expressions are evaluated later)."""
    unknown = set(raw_launch) - _LAUNCH_FIELDS
    if unknown:
        raise SolutionError(f"spec.launch has unknown fields {sorted(unknown)}")
    raw_args = require(raw_launch, "args", list, "spec.launch")
    if len(raw_args) > MAX_LAUNCH_ARGS:
        raise SolutionError(f"spec.launch.args has more than {MAX_LAUNCH_ARGS} entries")
    shared = raw_launch.get("sharedMemBytes", 0)
    if isinstance(shared, bool) or not isinstance(shared, (str, int)):
        raise SolutionError("spec.launch.sharedMemBytes must be an expression string or integer")
    return LaunchSpec(
        grid=_expression_list(raw_launch.get("grid"), "spec.launch.grid"),
        block=_expression_list(raw_launch.get("block"), "spec.launch.block"),
        shared_mem_bytes=shared,
        args=tuple(_launch_arg(a, f"spec.launch.args[{i}]") for i, a in enumerate(raw_args)),
    )


# --- a resolved launch for one workload -----------------------------------------------------


@dataclass(frozen=True)
class ResolvedLaunch:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem_bytes: int
    # ("input" | "output", tensor name) or ("scalar", numpy scalar of the declared type).
    args: tuple[tuple[str, Any], ...]


def _scalar(scalar_type: str, value: str | int | float, axes: Mapping[str, int]) -> np.generic:
    dtype = SCALAR_TYPES[scalar_type]
    number: int | float = expressions.evaluate(value, axes) if isinstance(value, str) else value
    if dtype.kind in "iu":
        low, high = int_range(dtype)
        if not low <= int(number) <= high:
            raise LaunchSpecError(f"{scalar_type} scalar {number} is out of range")
    result: np.generic = dtype.type(number)
    if dtype.kind == "f" and not np.isfinite(result):
        raise LaunchSpecError(f"{scalar_type} scalar {number} is not finite")
    return result


def resolve_launch(launch: LaunchSpec, axes: Mapping[str, int]) -> ResolvedLaunch:
    """Evaluate every expression of ``launch`` for one workload's axes (LaunchSpecError)."""
    args: list[tuple[str, Any]] = []
    for arg in launch.args:
        if arg.kind == "scalar":
            assert arg.scalar_type is not None and arg.value is not None
            args.append(("scalar", _scalar(arg.scalar_type, arg.value, axes)))
        else:
            args.append((arg.kind, arg.name))
    return ResolvedLaunch(
        grid=expressions.grid_dims(launch.grid, axes),
        block=expressions.block_dims(launch.block, axes),
        shared_mem_bytes=expressions.shared_mem_bytes(launch.shared_mem_bytes, axes),
        args=tuple(args),
    )
