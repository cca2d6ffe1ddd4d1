"""Reading an ``OperationSpec`` manifest: axis values, resolved tensor shapes, input dtypes.

Used by the importers that hold an operation in KernelIndex's form before they map a workload
onto it (FlashInfer-Bench definitions, the GPU MODE problems).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from domain import expressions
from domain.importers.catalog_form import sorted_unique
from domain.importers.fields import MappingError, integer, text


def evaluate(expression: str, lookup: Callable[[str], int], where: str) -> int:
    """An integer axis expression (``k // 128``, ``a + b``) in the one expression language
    (``domain.expressions``, extended: ``/`` must divide exactly); ``lookup`` gives each
    axis's value and says itself what is wrong with one it lacks."""
    try:
        return expressions.evaluate(
            expression, lookup, extended=True, bound=expressions.MAX_SAFE_INTEGER
        )
    except expressions.ExpressionError as exc:
        raise MappingError(f"{where}: {exc.message}") from None


def axis_values(
    operation_axes: Mapping[str, Any], variables: Mapping[str, int], where: str
) -> dict[str, int]:
    """Every axis of an OperationSpec: variables given, constants stated, derived computed."""
    values: dict[str, int] = {}
    resolving: set[str] = set()

    def lookup(name: str) -> int:
        if name in values:
            return values[name]
        axis = operation_axes.get(name)
        if axis is None:
            raise MappingError(f"{where}: unknown axis {name!r}")
        role = axis.get("role")
        if role == "variable":
            if name not in variables:
                raise MappingError(f"{where}: variable axis {name!r} has no value")
            values[name] = variables[name]
        elif role == "constant":
            values[name] = integer(axis.get("value"), f"{where}: axis {name}")
        else:
            if name in resolving:
                raise MappingError(f"{where}: axis {name!r} is defined in terms of itself")
            resolving.add(name)
            values[name] = evaluate(text(axis.get("expression"), name), lookup, where)
            resolving.discard(name)
        return values[name]

    for name in operation_axes:
        lookup(name)
    return values


def resolve_shape(shape: Iterable[int | str], axes: Mapping[str, int], where: str) -> list[int]:
    resolved: list[int] = []
    for dimension in shape:
        value = axes.get(dimension) if isinstance(dimension, str) else dimension
        if value is None:
            raise MappingError(f"{where}: shape names unknown axis {dimension!r}")
        if value < 0:
            raise MappingError(f"{where}: dimension {dimension!r} is negative ({value})")
        resolved.append(value)
    return resolved


def input_dtypes(operation: Mapping[str, Any]) -> list[str]:
    """The dtypes of an OperationSpec's inputs (the catalog's ``support.dtypes``)."""
    found: list[str] = []
    for item in operation["spec"]["inputs"]:
        body = item.get("tensor") or item.get("scalar") or {}
        if "dtype" in body:
            found.append(body["dtype"])
    return sorted_unique(found)
