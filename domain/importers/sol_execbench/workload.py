"""SOL-ExecBench workload entries → ``WorkloadCase`` and ``WorkloadSuite``.

One entry (a line of ``workload.jsonl``, a leaderboard kernel's workload, a trace's
``workload``) → ``WorkloadCase``: the entry's axes, the input tensors' concrete shapes
(constants bound from the definition, derived axes evaluated), tolerances when given. All
entries of a definition → ``WorkloadSuite`` (cases = external id + axes; aggregation
latency/mean).

A case's external id is the entry's ``uuid``, else the first 12 hex digits of the sha256 of
its axes as KernelIndex serialises them (JavaScript ``JSON.stringify`` with keys sorted by
``localeCompare``; emulated for ASCII names by :func:`_collation_key`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from domain import expressions
from domain.canonical import canonical_json
from domain.importers.names import MAX_TITLE, clip
from domain.importers.sol_execbench.fields import (
    JsonObject,
    SolFormatError,
    integer,
    json_object,
    optional_number,
    required_string,
)
from domain.importers.sol_execbench.operation import Argument, argument_key, arguments, axis_key
from domain.importers.sol_execbench.values import kebab
from domain.importers.sol_execbench.vocabulary import COMPARATOR, map_dtype
from domain.manifests.kinds import API_VERSION

# ICU root collation order of ASCII punctuation and symbols (all before digits and letters).
_PUNCTUATION: Final = " _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$"

_TOLERANCES: Final = (
    ("max_atol", "maxAbsoluteError"),
    ("max_rtol", "maxRelativeError"),
    ("required_matched_ratio", "requiredMatchedRatio"),
)


def evaluate_axis_expression(expression: str, bindings: Mapping[str, int]) -> int:
    """The integer value of a derived axis (names are looked up lower-cased), in the one
    expression language (``domain.expressions``, extended: ``**`` and exact ``/``, as SOL's
    docs allow), bounded by what a manifest's JSON number holds exactly."""
    try:
        return expressions.evaluate(
            expression.lower(), bindings, extended=True, bound=expressions.MAX_SAFE_INTEGER
        )
    except expressions.ExpressionError as exc:
        raise SolFormatError(exc.message) from None


# --- identity of a workload entry -----------------------------------------------------------------


def _collation_key(text: str) -> tuple[list[tuple[int, int]], list[int], str]:
    """Sort key emulating JavaScript ``localeCompare`` (ICU root collation) for ASCII names.

    Primary: punctuation < digits < letters, letters compared without case; then lower case
    before upper case; the raw string breaks any remaining tie. Non-ASCII characters sort
    after all of these by code point (an approximation; SOL axis names are ASCII).
    """
    primary: list[tuple[int, int]] = []
    tertiary: list[int] = []
    for char in text:
        if char.isascii() and char.isalpha():
            primary.append((3, ord(char.lower())))
            tertiary.append(1 if char.isupper() else 0)
        elif char.isascii() and char.isdigit():
            primary.append((2, ord(char)))
            tertiary.append(0)
        elif char in _PUNCTUATION:
            primary.append((1, _PUNCTUATION.index(char)))
            tertiary.append(0)
        else:
            primary.append((4, ord(char)))
            tertiary.append(0)
    return primary, tertiary, text


def entry_axes(entry: Mapping[str, Any], where: str) -> dict[str, int]:
    """The entry's ``axes``, as stated (names not normalised)."""
    axes = json_object(entry.get("axes"), f"{where}: 'axes'")
    return {str(name): integer(value, f"{where}: axis '{name}'") for name, value in axes.items()}


def workload_entry_key(entry: Mapping[str, Any], where: str = "workload") -> str:
    """The entry's ``uuid``; without one, 12 hex digits of the sha256 of its sorted axes."""
    uuid = entry.get("uuid")
    if isinstance(uuid, str) and uuid:
        return uuid
    axes = entry_axes(entry, where)
    ordered = sorted(axes.items(), key=lambda item: _collation_key(item[0]))
    text = b"{" + b",".join(canonical_json(k) + b":" + canonical_json(v) for k, v in ordered)
    return hashlib.sha256(text + b"}").hexdigest()[:12]


# --- axis values of one entry ---------------------------------------------------------------------


def _bind_constants(
    definition: Mapping[str, Any], bindings: dict[str, int], where: str
) -> dict[str, str]:
    """Binds the definition's constant axes into ``bindings``; returns the derived axes'
    expressions, by axis key."""
    axes = json_object(definition.get("axes"), "definition 'axes'")
    derived: dict[str, str] = {}
    for name, raw in axes.items():
        axis = json_object(raw, f"definition axis '{name}'")
        key = axis_key(name)
        if axis.get("type") == "const":
            value = integer(axis.get("value"), f"definition axis '{name}': 'value'")
            if key in bindings and bindings[key] != value:
                raise SolFormatError(
                    f"{where}: binds constant axis '{name}' to {bindings[key]}, "
                    f"but the definition fixes it at {value}"
                )
            bindings[key] = value
        elif axis.get("type") == "expr":
            derived[key] = required_string(axis, "expression", f"definition axis '{name}'")
    return derived


def _bind_derived(derived: Mapping[str, str], bindings: dict[str, int], where: str) -> None:
    """Evaluates the derived axes into ``bindings``; they may refer to each other, in any
    order, so each round evaluates what it can until none is left (or none can be)."""
    pending = dict(derived)
    while pending:
        progress = False
        for key, expression in list(pending.items()):
            try:
                value = evaluate_axis_expression(expression, bindings)
            except SolFormatError:
                continue
            del pending[key]
            progress = True
            if key in bindings and bindings[key] != value:
                raise SolFormatError(
                    f"{where}: axis '{key}' is {bindings[key]}, but its expression "
                    f"{expression!r} gives {value}"
                )
            bindings[key] = value
        if not progress:
            key, expression = next(iter(pending.items()))
            try:
                evaluate_axis_expression(expression, bindings)
            except SolFormatError as exc:
                raise SolFormatError(f"{where}: derived axis '{key}': {exc.message}") from None
            raise SolFormatError(f"{where}: derived axis '{key}' cannot be evaluated")


def _bindings(
    definition: Mapping[str, Any], stated: Mapping[str, int], where: str
) -> dict[str, int]:
    """Every axis value of one workload: the entry's, the constants, the derived ones."""
    bindings = {axis_key(k): v for k, v in stated.items()}
    derived = _bind_constants(definition, bindings, where)
    _bind_derived(derived, bindings, where)
    return bindings


# --- entries → case and suite ---------------------------------------------------------------------


def _tolerance(entry: Mapping[str, Any], where: str) -> JsonObject:
    correctness: JsonObject = {"comparator": COMPARATOR}
    raw = entry.get("tolerance")
    if raw is None:
        return correctness
    tolerance = json_object(raw, f"{where}: 'tolerance'")
    for source_key, target_key in _TOLERANCES:
        value = optional_number(tolerance, source_key, f"{where}: tolerance")
        if value is not None:
            correctness[target_key] = value
    return correctness


def _bound_shape(
    argument: Argument, shape: tuple[int | str, ...], bindings: Mapping[str, int], where: str
) -> list[int]:
    bound = []
    for dim in shape:
        if isinstance(dim, int):
            bound.append(dim)
        elif dim in bindings:
            bound.append(bindings[dim])
        else:
            raise SolFormatError(f"{where}: input '{argument.name}' uses unbound axis '{dim}'")
    return bound


def _inputs(
    definition: Mapping[str, Any], entry: Mapping[str, Any], bindings: Mapping[str, int], where: str
) -> tuple[JsonObject, JsonObject]:
    """``(tensors, scalars)`` of the case: each tensor input with its concrete shape (and its
    data generator when the entry describes it), each scalar input the entry gives a value."""
    raw_inputs = entry.get("inputs")
    descriptors = json_object(raw_inputs, f"{where}: 'inputs'") if raw_inputs is not None else {}
    tensors: JsonObject = {}
    scalars: JsonObject = {}
    for argument in arguments(definition, "inputs"):
        dtype = map_dtype(argument.dtype)
        raw = descriptors.get(argument.name)
        descriptor = (
            json_object(raw, f"{where}: input '{argument.name}'") if raw is not None else None
        )
        kind = descriptor.get("type") if descriptor is not None else None
        if descriptor is not None and kind == "scalar":
            value = descriptor.get("value")
            if isinstance(value, int | float) and not isinstance(value, bool):
                scalars[argument_key(argument.name)] = {"dtype": dtype, "value": value}
                continue
        if argument.shape is None:
            continue
        shape = _bound_shape(argument, argument.shape, bindings, where)
        tensor: JsonObject = {"shape": shape, "dtype": dtype}
        if descriptor is not None:
            generator = kind if kind in ("safetensors", "custom") else "random"
            tensor["data"] = {"generator": generator}
        tensors[argument_key(argument.name)] = tensor
    return tensors, scalars


def case_from_entry(
    definition: Mapping[str, Any], operation_digest: str, entry: Mapping[str, Any]
) -> JsonObject:
    """One workload entry → ``WorkloadCase`` manifest (unvalidated)."""
    name = required_string(definition, "name", "definition")
    key = workload_entry_key(entry)
    where = f"workload {key}"
    axes = entry_axes(entry, where)
    bindings = _bindings(definition, axes, where)
    tensors, scalars = _inputs(definition, entry, bindings, where)
    title = f"{name} · " + ", ".join(f"{k}={v}" for k, v in axes.items())
    spec: JsonObject = {
        "operationSpecDigest": operation_digest,
        "axes": {axis_key(k): v for k, v in axes.items()},
        "tensors": tensors,
        "correctness": _tolerance(entry, where),
    }
    if scalars:
        spec["scalars"] = scalars
    return {
        "apiVersion": API_VERSION,
        "kind": "WorkloadCase",
        "metadata": {
            "name": f"{kebab(name) or 'workload'}-{kebab(key[:8]) or 'case'}",
            "title": clip(title, MAX_TITLE),
        },
        "spec": spec,
    }


def suite_from_entries(
    definition: Mapping[str, Any], operation_digest: str, entries: Sequence[Mapping[str, Any]]
) -> JsonObject:
    """All workload entries of a definition → ``WorkloadSuite`` (aggregation latency/mean)."""
    name = required_string(definition, "name", "definition")
    if not entries:
        raise SolFormatError(f"definition '{name}' has no workloads, so it has no suite")
    cases = []
    for index, entry in enumerate(entries):
        where = f"workload #{index + 1}"
        cases.append(
            {
                "externalId": workload_entry_key(entry, where),
                "axes": {axis_key(k): v for k, v in entry_axes(entry, where).items()},
            }
        )
    return {
        "apiVersion": API_VERSION,
        "kind": "WorkloadSuite",
        "metadata": {
            "name": f"{kebab(name) or 'workload'}-suite",
            "title": clip(f"SOL workload suite: {name}", MAX_TITLE),
        },
        "spec": {
            "operationSpecDigest": operation_digest,
            "cases": cases,
            "correctness": {
                "comparator": COMPARATOR,
                "description": "Correctness must pass on every case in the SOL evaluation stack.",
            },
            "aggregation": {"metric": "latency", "statistic": "mean"},
        },
    }
