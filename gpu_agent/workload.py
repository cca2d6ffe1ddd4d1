"""SOL workloads (the JSONL lines): one case's axis values, input sources and tolerance.

Format: fixtures/sol-execbench/docs/workload.md. A workload is parsed against its
:class:`~gpu_agent.definition.Definition`, whose tolerance it may override field by field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gpu_agent.checks import Tolerance
from gpu_agent.definition import Definition, TensorSpec
from gpu_agent.sol_parsing import SolutionError, UnsupportedSolution, require

_TOLERANCE_FIELDS = frozenset(
    {"max_atol", "max_rtol", "required_matched_ratio", "max_error_cap", "allow_negative_inf"}
)


@dataclass(frozen=True)
class InputSource:
    # "custom": made by the definition's reference ``custom_inputs_entrypoint`` (Python
    # solutions only: that code runs in the case child, never on the declarative path).
    kind: Literal["random", "scalar", "custom"]
    value: int | float | bool | None = None


@dataclass(frozen=True)
class Workload:
    uuid: str
    axes: Mapping[str, int]
    inputs: Mapping[str, InputSource]
    tolerance: Tolerance


def _tolerance(*layers: Mapping[str, Any]) -> Tolerance:
    """Later layers win (definition, then workload); SOL defaults fill the rest."""
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update({k: v for k, v in layer.items() if v is not None})
    unknown = set(merged) - _TOLERANCE_FIELDS
    if unknown:
        raise SolutionError(f"tolerance has unknown fields {sorted(unknown)}")
    numbers = {k: v for k, v in merged.items() if k != "allow_negative_inf"}
    for key, value in numbers.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise SolutionError(f"tolerance.{key} must be a non-negative number")
    ratio = float(merged.get("required_matched_ratio", Tolerance.required_matched_ratio))
    if ratio > 1:
        raise SolutionError("tolerance.required_matched_ratio must be at most 1")
    cap = merged.get("max_error_cap")
    allow = merged.get("allow_negative_inf", False)
    if not isinstance(allow, bool):
        raise SolutionError("tolerance.allow_negative_inf must be a boolean")
    return Tolerance(
        atol=float(merged.get("max_atol", Tolerance.atol)),
        rtol=float(merged.get("max_rtol", Tolerance.rtol)),
        required_matched_ratio=ratio,
        max_error_cap=None if cap is None else float(cap),
        allow_negative_inf=allow,
    )


def parse_workload(obj: object, definition: Definition) -> Workload:
    if not isinstance(obj, dict):
        raise SolutionError("workload must be a JSON object")
    uuid = require(obj, "uuid", str, "workload")
    if not 1 <= len(uuid) <= 200:
        raise SolutionError("workload.uuid must be 1..200 characters")
    where = f"workload {uuid}"
    raw_axes = require(obj, "axes", dict, where)
    for axis_name, value in raw_axes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise SolutionError(f"{where}: axis {axis_name!r} must be a non-negative integer")
    raw_inputs = require(obj, "inputs", dict, where)
    inputs: dict[str, InputSource] = {}
    for spec in definition.inputs:
        source = raw_inputs.get(spec.name)
        if source is None:
            raise SolutionError(f"{where}: no descriptor for input {spec.name!r}")
        inputs[spec.name] = _input_source(source, spec, where)
    extra = set(raw_inputs) - {s.name for s in definition.inputs}
    if extra:
        raise SolutionError(f"{where}: descriptors for unknown inputs {sorted(extra)}")
    tolerance = obj.get("tolerance") or {}
    if not isinstance(tolerance, dict):
        raise SolutionError(f"{where}: tolerance must be an object")
    workload = Workload(uuid, dict(raw_axes), inputs, _tolerance(definition.tolerance, tolerance))
    definition.resolve_axes(workload.axes)  # fail early on missing/unknown axes
    return workload


def _input_source(source: object, spec: TensorSpec, where: str) -> InputSource:
    if not isinstance(source, dict):
        raise SolutionError(f"{where}: input {spec.name!r} descriptor must be an object")
    kind = source.get("type")
    if kind == "random":
        if spec.shape is None:
            raise SolutionError(f"{where}: scalar input {spec.name!r} needs a scalar value")
        return InputSource("random")
    if kind == "scalar":
        value = source.get("value")
        if not isinstance(value, (int, float, bool)):
            raise SolutionError(f"{where}: scalar input {spec.name!r} needs a numeric value")
        return InputSource("scalar", value)
    if kind == "safetensors":
        raise UnsupportedSolution(
            f"{where}: input {spec.name!r} is loaded from a safetensors blob; the agent has no "
            "blob store, so such workloads cannot be rerun yet"
        )
    if kind == "custom":
        return InputSource("custom")
    raise SolutionError(f"{where}: input {spec.name!r} has unknown type {kind!r}")


def parse_workloads_jsonl(text: str, definition: Definition) -> list[Workload]:
    workloads = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SolutionError(f"workload line {number}: invalid JSON ({exc.msg})") from None
        workloads.append(parse_workload(obj, definition))
    if not workloads:
        raise SolutionError("no workloads")
    uuids = [w.uuid for w in workloads]
    if len(set(uuids)) != len(uuids):
        raise SolutionError("workload uuids must be distinct")
    return workloads


def refuse_custom_inputs(workload: Workload) -> None:
    """The declarative path makes every input itself; refuse ``custom`` ones."""
    custom = sorted(name for name, source in workload.inputs.items() if source.kind == "custom")
    if custom:
        raise UnsupportedSolution(
            f"workload {workload.uuid}: input(s) {custom} are generated by the definition's "
            "Python reference code (custom_inputs_entrypoint), which the declarative "
            "path never runs"
        )
