"""The SOL Definition document: axes, input and output tensors, constraints, reference code.

Format: fixtures/sol-execbench/docs/definition.md. :func:`parse_definition` vets a document;
:meth:`Definition.resolve_axes` gives every axis value for one workload (consts, the
workload's vars, then exprs, checked against the constraints).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from gpu_agent import expressions
from gpu_agent.checks import DTYPES
from gpu_agent.expressions import LaunchSpecError
from gpu_agent.sol_parsing import (
    IDENTIFIER,
    SolutionError,
    UnsupportedSolution,
    int_range,
    require,
)


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[str, ...] | None  # None: a scalar passed by value (SOL "shape": null)
    dtype: str

    @property
    def numpy_dtype(self) -> np.dtype[np.generic]:
        return DTYPES[self.dtype]


@dataclass(frozen=True)
class Axis:
    kind: Literal["const", "var", "expr"]
    value: int | None = None
    expression: str | None = None


@dataclass(frozen=True)
class Definition:
    name: str
    axes: Mapping[str, Axis]
    inputs: tuple[TensorSpec, ...]  # in document order: the SOL argument order
    outputs: tuple[TensorSpec, ...]
    constraints: tuple[str, ...] = ()
    tolerance: Mapping[str, Any] = field(default_factory=dict)
    # SOL's PyTorch reference (a module defining ``run``), run only inside a case child, and
    # the name of its input generator for ``"custom"`` workload inputs.
    reference: str | None = None
    custom_inputs_entrypoint: str | None = None

    def tensor(self, name: str) -> TensorSpec:
        for spec in (*self.inputs, *self.outputs):
            if spec.name == name:
                return spec
        raise KeyError(name)

    def resolve_axes(self, given: Mapping[str, int]) -> dict[str, int]:
        """All axis values for one workload: consts, the workload's vars, then exprs."""
        for name in given:
            if name not in self.axes:
                raise SolutionError(f"workload axis {name!r} is not an axis of {self.name}")
        values = {
            name: _fixed_axis_value(name, axis, given)
            for name, axis in self.axes.items()
            if axis.kind != "expr"
        }
        pending = {n: a.expression for n, a in self.axes.items() if a.kind == "expr"}
        _resolve_expressions(pending, values)
        for constraint in self.constraints:
            _check_constraint(constraint, values)
        return values

    def shape(self, spec: TensorSpec, axes: Mapping[str, int]) -> tuple[int, ...]:
        if spec.shape is None:
            return ()
        return tuple(axes[name] for name in spec.shape)


def _fixed_axis_value(name: str, axis: Axis, given: Mapping[str, int]) -> int:
    """A const axis's value (which the workload may repeat) or a var axis's given value."""
    if axis.kind == "const":
        assert axis.value is not None
        if name in given and given[name] != axis.value:
            raise SolutionError(
                f"workload sets const axis {name!r} to {given[name]}, "
                f"the definition fixes {axis.value}"
            )
        return axis.value
    if name not in given:
        raise SolutionError(f"workload gives no value for var axis {name!r}")
    return given[name]


def _resolve_expressions(pending: dict[str, str | None], values: dict[str, int]) -> None:
    """Evaluate the expr axes into ``values``; consumes ``pending``."""
    # Exprs may refer to each other: resolve in passes; no progress means a cycle.
    while pending:
        progressed = False
        for name, text in list(pending.items()):
            if _evaluate_axis(name, text, pending, values):
                del pending[name]
                progressed = True
        if not progressed:
            raise SolutionError(f"axis expressions refer to each other: {sorted(pending)}")


def _evaluate_axis(
    name: str, text: str | None, pending: Mapping[str, str | None], values: dict[str, int]
) -> bool:
    """Evaluate one expr axis; False when it must wait for another pending one."""
    assert text is not None
    try:
        values[name] = expressions.evaluate(text, values, extended=True)
    except LaunchSpecError as exc:
        if "unknown name" in str(exc) and any(
            other in pending and other != name for other in _names_in(text)
        ):
            return False
        raise SolutionError(f"axis {name!r}: {exc}") from None
    return True


def _names_in(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


# Searched in this order, so that "<=" is found before "<".
_COMPARISONS: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}


def _check_constraint(text: str, values: Mapping[str, int]) -> None:
    for op, holds in _COMPARISONS.items():
        if op in text:
            left_text, right_text = text.split(op, 1)
            try:
                left = expressions.evaluate(left_text, values, extended=True)
                right = expressions.evaluate(right_text, values, extended=True)
            except LaunchSpecError as exc:
                raise SolutionError(f"constraint {text!r}: {exc}") from None
            if not holds(left, right):
                raise SolutionError(f"constraint {text!r} does not hold ({left} {op} {right})")
            return
    raise SolutionError(f"constraint {text!r} has no comparison operator")


def _tensor_specs(obj: object, where: str) -> tuple[TensorSpec, ...]:
    if not isinstance(obj, dict):
        raise SolutionError(f"{where} must be an object")
    specs = []
    for name, spec in obj.items():
        if not isinstance(spec, dict) or not IDENTIFIER.match(name):
            raise SolutionError(f"{where}.{name}: must be an object named by an identifier")
        shape = spec.get("shape")
        if shape is not None and (
            not isinstance(shape, list) or not all(isinstance(s, str) for s in shape)
        ):
            raise SolutionError(f"{where}.{name}.shape must be a list of axis names or null")
        dtype = require(spec, "dtype", str, f"{where}.{name}")
        if dtype not in DTYPES:
            raise UnsupportedSolution(
                f"{where}.{name}: dtype {dtype!r} is not supported by the agent "
                f"(supported: {', '.join(DTYPES)})"
            )
        specs.append(TensorSpec(name, None if shape is None else tuple(shape), dtype))
    return tuple(specs)


def _parse_axis(axis_name: str, axis: object) -> Axis:
    where = f"definition.axes.{axis_name}"
    if not isinstance(axis, dict) or not IDENTIFIER.match(axis_name):
        raise SolutionError(f"{where}: must be an object named by an identifier")
    kind = axis.get("type")
    if kind == "const":
        return Axis("const", value=require(axis, "value", int, where))
    if kind == "var":
        return Axis("var")
    if kind == "expr":
        return Axis("expr", expression=require(axis, "expression", str, where))
    raise SolutionError(f"{where}.type must be const, var or expr, got {kind!r}")


def _check_tensors(
    axes: Mapping[str, Axis], inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec]
) -> None:
    """Tensors use known axes, outputs are tensors, and every name is distinct."""
    for spec in (*inputs, *outputs):
        for axis_name in spec.shape or ():
            if axis_name not in axes:
                raise SolutionError(f"tensor {spec.name!r} uses unknown axis {axis_name!r}")
    for spec in outputs:
        if spec.shape is None:
            raise SolutionError(f"output {spec.name!r} must be a tensor (shape null is a scalar)")
    names = [s.name for s in (*inputs, *outputs)]
    if len(set(names)) != len(names):
        raise SolutionError("definition inputs and outputs must have distinct names")


def parse_definition(obj: object) -> Definition:
    if not isinstance(obj, dict):
        raise SolutionError("definition must be a JSON object")
    name = require(obj, "name", str, "definition")
    raw_axes = require(obj, "axes", dict, "definition")
    axes = {axis_name: _parse_axis(axis_name, axis) for axis_name, axis in raw_axes.items()}
    inputs = _tensor_specs(require(obj, "inputs", dict, "definition"), "definition.inputs")
    outputs = _tensor_specs(require(obj, "outputs", dict, "definition"), "definition.outputs")
    _check_tensors(axes, inputs, outputs)
    constraints = obj.get("constraints") or []
    if not isinstance(constraints, list) or not all(isinstance(c, str) for c in constraints):
        raise SolutionError("definition.constraints must be a list of strings")
    tolerance = obj.get("tolerance") or {}
    if not isinstance(tolerance, dict):
        raise SolutionError("definition.tolerance must be an object")
    reference, custom = _reference_fields(obj)
    return Definition(name, axes, inputs, outputs, tuple(constraints), tolerance, reference, custom)


MAX_REFERENCE_BYTES = 1024 * 1024


def _reference_fields(obj: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """``(reference code, custom inputs entry point)``, each optional."""
    reference = obj.get("reference")
    if reference is not None and (
        not isinstance(reference, str) or len(reference.encode("utf-8")) > MAX_REFERENCE_BYTES
    ):
        raise SolutionError(f"definition.reference must be a string of ≤ {MAX_REFERENCE_BYTES} B")
    custom = obj.get("custom_inputs_entrypoint")
    if custom is not None and (not isinstance(custom, str) or not IDENTIFIER.match(custom)):
        raise SolutionError("definition.custom_inputs_entrypoint must be a function name")
    return reference or None, custom


def scalar_input(spec: TensorSpec, value: int | float | bool) -> np.generic:
    """A definition scalar input (shape null) as a numpy scalar of its dtype."""
    dtype = spec.numpy_dtype
    if dtype.kind in "iu":
        if isinstance(value, float) and not float(value).is_integer():
            raise SolutionError(f"scalar {spec.name!r} ({spec.dtype}) got non-integer {value}")
        low, high = int_range(dtype)
        if not low <= int(value) <= high:
            raise SolutionError(f"scalar {spec.name!r} ({spec.dtype}) out of range: {value}")
        return dtype.type(int(value))
    return dtype.type(value)


def tensor_names(specs: Sequence[TensorSpec]) -> list[str]:
    return [s.name for s in specs]
