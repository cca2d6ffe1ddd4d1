"""A FlashInfer-Bench trace's workload → ``WorkloadCase``, in the catalog's shape.

Named ``<definition>-<uuid[:8]>``: the variable axes, one tensor per tensor input (shape
resolved, ``data.generator`` = the input's ``type``), scalar inputs under ``scalars``, and
the comparator the catalog writes on FlashInfer workloads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from domain.importers.catalog_form import manifest
from domain.importers.fields import MappingError, as_object, field, identifier, integer, text
from domain.importers.flashinfer_trace.dataset import RUN_COMPARATOR
from domain.importers.flashinfer_trace.definition import operation_spec
from domain.importers.names import MAX_TITLE, clip, object_name
from domain.importers.operations import axis_values, resolve_shape
from domain.manifests.canonical_form import manifest_digest


def _variables(
    raw_workload: Mapping[str, Any], op_axes: Mapping[str, Any], definition_name: str
) -> dict[str, int]:
    """The workload's axes: each a variable axis of the operation, and every one given."""
    raw_axes = as_object(field(raw_workload, "axes", "workload"), "workload.axes")
    variables: dict[str, int] = {}
    for axis_name, value in raw_axes.items():
        if op_axes.get(axis_name, {}).get("role") != "variable":
            raise MappingError(
                f"workload axis {axis_name!r} is not a variable axis of {definition_name}"
            )
        variables[axis_name] = integer(value, f"workload.axes.{axis_name}")
    missing = [
        a for a, body in op_axes.items() if body["role"] == "variable" and a not in variables
    ]
    if missing:
        raise MappingError(f"workload gives no value for axes {', '.join(missing)}")
    return variables


def workload_case(
    definition: Mapping[str, Any],
    operation: Mapping[str, Any],
    operation_digest: str,
    raw_workload: Mapping[str, Any],
) -> dict[str, Any]:
    """A trace's ``workload`` on the definition's operation as a ``WorkloadCase`` manifest."""
    name = definition["name"]
    uuid = text(raw_workload.get("uuid"), "workload.uuid")
    op_axes = operation["spec"]["axes"]
    variables = _variables(raw_workload, op_axes, name)
    axes = axis_values(op_axes, variables, f"workload of {name}")
    inputs = as_object(field(raw_workload, "inputs", "workload"), "workload.inputs")
    tensors: dict[str, Any] = {}
    scalars: dict[str, Any] = {}
    for item in operation["spec"]["inputs"]:
        input_name = item["name"]
        given = as_object(field(inputs, input_name, "workload.inputs"), f"input {input_name}")
        kind = text(given.get("type"), f"workload.inputs.{input_name}.type")
        if "scalar" in item:
            if kind != "scalar":
                raise MappingError(f"input {input_name} is a scalar but the trace gives {kind!r}")
            value = given.get("value")
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise MappingError(f"workload.inputs.{input_name}.value must be a number")
            scalars[input_name] = {"dtype": item["scalar"]["dtype"], "value": value}
            continue
        tensor = item["tensor"]
        tensors[input_name] = {
            "shape": resolve_shape(tensor["shape"], axes, f"input {input_name}"),
            "dtype": tensor["dtype"],
            "data": {"generator": identifier(kind, f"workload.inputs.{input_name}.type")},
        }
    spec: dict[str, Any] = {
        "operationSpecDigest": operation_digest,
        "axes": variables,
        "tensors": tensors,
        "correctness": {"comparator": RUN_COMPARATOR},
    }
    if scalars:
        spec["scalars"] = scalars
    summary = ", ".join(f"{key}={value}" for key, value in variables.items())
    metadata = {
        "name": object_name(name, uuid[:8]),
        "title": clip(f"{name} · {summary}" if summary else name, MAX_TITLE),
    }
    return manifest("WorkloadCase", metadata, spec)


def workload_case_digests(
    definition: Mapping[str, Any], workloads: Sequence[Mapping[str, Any]]
) -> set[str]:
    """The digests of the ``WorkloadCase`` each trace workload maps to on ``definition``.

    What a rerun workload artifact of a FlashInfer run describes (a rerun request checks the
    run's workload is among them). Raises on a definition or workload that cannot be mapped.
    """
    operation = operation_spec(definition)
    digest = manifest_digest(operation)
    return {
        manifest_digest(workload_case(definition, operation, digest, as_object(w, "workload")))
        for w in workloads
    }
