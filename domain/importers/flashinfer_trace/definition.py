"""A FlashInfer-Bench definition → ``OperationSpec``, in the catalog's shape.

``var``/``const``/``expr`` axes become variable/constant/derived, ``op_type`` the family, a
scalar input has ``shape: null``, a reference gives ``{language: python}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from domain.importers.catalog_form import manifest
from domain.importers.fields import MappingError, as_object, field, identifier, integer, text
from domain.importers.flashinfer_trace.dataset import DATASET_REPOSITORY
from domain.importers.names import MAX_DESCRIPTION, MAX_TITLE, clip, object_name, slug

# FlashInfer (torch) dtype names → KernelIndex dtype identifiers.
DTYPES: Final[Mapping[str, str]] = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "float": "fp32",
    "float64": "fp64",
    "double": "fp64",
    "float8_e4m3fn": "fp8_e4m3",
    "float8_e4m3fnuz": "fp8_e4m3fnuz",
    "float8_e5m2": "fp8_e5m2",
    "float8_e5m2fnuz": "fp8_e5m2fnuz",
}


def _dtype(value: object, where: str) -> str:
    name = text(value, where)
    return DTYPES.get(name.lower(), identifier(name, where))


def _axes(definition: Mapping[str, Any], where: str) -> dict[str, Any]:
    axes: dict[str, Any] = {}
    for axis_name, raw_axis in as_object(field(definition, "axes", where), f"{where}.axes").items():
        axis = as_object(raw_axis, f"{where}.axes.{axis_name}")
        kind = axis.get("type")
        key = identifier(axis_name, f"{where}.axes")
        if kind == "var":
            axes[key] = {"role": "variable", "type": "integer"}
        elif kind == "const":
            value = integer(axis.get("value"), f"{where}.axes.{axis_name}.value")
            axes[key] = {"role": "constant", "type": "integer", "value": value}
        elif kind == "expr":
            expression = text(axis.get("expression"), f"{where}.axes.{axis_name}.expression")
            axes[key] = {"role": "derived", "type": "integer", "expression": expression}
        else:
            raise MappingError(f"{where}: axis {axis_name!r} has unknown type {kind!r}")
    return axes


def _arguments(definition: Mapping[str, Any], group: str, where: str) -> list[dict[str, Any]]:
    """The ``inputs`` or ``outputs`` of a definition as the OperationSpec's argument list."""
    items: list[dict[str, Any]] = []
    block = as_object(field(definition, group, where), f"{where}.{group}")
    for tensor_name, raw in block.items():
        body = as_object(raw, f"{where}.{group}.{tensor_name}")
        dtype = _dtype(body.get("dtype"), f"{where}.{group}.{tensor_name}.dtype")
        shape = body.get("shape")
        entry: dict[str, Any] = {"name": identifier(tensor_name, f"{where}.{group}")}
        if shape is None:
            entry["scalar"] = {"dtype": dtype}
        elif isinstance(shape, list) and shape:
            dims = [d if isinstance(d, str) else integer(d, f"{where}.{group}") for d in shape]
            entry["tensor"] = {"dtype": dtype, "shape": dims}
        else:
            raise MappingError(f"{where}.{group}.{tensor_name}.shape must be a list or null")
        items.append(entry)
    return items


def operation_spec(definition: Mapping[str, Any], revision: str | None = None) -> dict[str, Any]:
    """A FlashInfer definition as an ``OperationSpec`` manifest (the catalog's shape)."""
    name = text(definition.get("name"), "definition.name")
    where = f"definition {name}"
    axes = _axes(definition, where)
    spec: dict[str, Any] = {
        "family": slug(text(definition.get("op_type"), f"{where}.op_type")),
        "axes": axes,
        "inputs": _arguments(definition, "inputs", where),
        "outputs": _arguments(definition, "outputs", where),
        "semantics": {"mutation": "none", "determinism": "unspecified"},
    }
    if definition.get("reference") is not None:
        spec["reference"] = {"language": "python"}
    metadata: dict[str, Any] = {"name": object_name(name), "title": clip(name, MAX_TITLE)}
    description = definition.get("description")
    if isinstance(description, str) and description:
        metadata["description"] = clip(description, MAX_DESCRIPTION)
    if revision is not None:
        metadata["sourceRefs"] = [{"url": f"{DATASET_REPOSITORY}/blob/{revision}/definitions"}]
    return manifest("OperationSpec", metadata, spec)
