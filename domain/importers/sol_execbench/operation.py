"""A SOL-ExecBench ``Definition`` (or leaderboard kernel) → ``OperationSpec``.

Axes ``var``/``const``/``expr`` → roles ``variable``/``constant``/``derived`` (axis names and
expressions lower-cased); inputs and outputs become argument lists in definition order (names
normalised to ``[a-z][a-z0-9_]*``; a ``null`` or empty shape is a scalar); dtypes normalised
(``bfloat16`` → ``bf16`` ...); family = the kebab-cased ``op_type``, else the first tag that
is not a subset marker (``L1``, ``L2``, ``Quant``, ``FlashInfer-Bench``) or ``model:``
provenance, else ``uncategorized``; ``reference: {language: python}`` when the definition
carries a reference; semantics ``{mutation: none, determinism: unspecified}`` (SOL states
neither).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from domain.importers.names import MAX_DESCRIPTION, MAX_TITLE, clip
from domain.importers.sol_execbench.fields import (
    JsonObject,
    SolFormatError,
    integer,
    json_object,
    optional_string,
    required_string,
)
from domain.importers.sol_execbench.values import kebab
from domain.importers.sol_execbench.vocabulary import identifier_like, map_dtype
from domain.manifests.kinds import API_VERSION

_SUBSET_TAGS: Final = frozenset({"L1", "L2", "Quant", "FlashInfer-Bench"})


def axis_key(name: str) -> str:
    """An axis name as the manifests write it."""
    return name.lower()


def argument_key(name: str) -> str:
    """An input or output name as the manifests write it (``[a-z][a-z0-9_]*``)."""
    lowered = identifier_like(name)
    return lowered if re.match(r"[a-z]", lowered) else f"x_{lowered}"


def _dimension(value: object, where: str) -> int | str:
    if isinstance(value, str):
        if re.fullmatch(r"\d+", value):
            # More than 17 digits is beyond ±(2^53−1) anyway: rejected as such without
            # converting an arbitrarily long string.
            return integer(int(value) if len(value) <= 17 else 2**63, where)
        return axis_key(value)
    return integer(value, where)


@dataclass(frozen=True)
class Argument:
    """One input or output of a definition, as SOL states it."""

    name: str
    shape: tuple[int | str, ...] | None  # None: a scalar
    dtype: str


def arguments(definition: Mapping[str, Any], key: str) -> list[Argument]:
    """The definition's ``inputs`` or ``outputs`` (``key``), in definition order."""
    where = f"definition '{key}'"
    record = json_object(definition.get(key), where)
    found = []
    for name, raw in record.items():
        tensor = json_object(raw, f"{where}: '{name}'")
        dtype = required_string(tensor, "dtype", f"{where}: '{name}'")
        shape = tensor.get("shape")
        if shape is not None and not isinstance(shape, list):
            raise SolFormatError(f"{where}: '{name}' shape must be an array or null")
        dims = (
            None
            if not shape
            else tuple(_dimension(d, f"{where}: '{name}' shape[{i}]") for i, d in enumerate(shape))
        )
        found.append(Argument(str(name), dims, dtype))
    return found


def _argument_spec(argument: Argument) -> JsonObject:
    if argument.shape is None:
        return {
            "name": argument_key(argument.name),
            "scalar": {"dtype": map_dtype(argument.dtype)},
        }
    return {
        "name": argument_key(argument.name),
        "tensor": {"shape": list(argument.shape), "dtype": map_dtype(argument.dtype)},
    }


def _family(definition: Mapping[str, Any]) -> str:
    op_type = definition.get("op_type")
    if isinstance(op_type, str) and op_type:
        return kebab(op_type)
    tags = definition.get("tags")
    for tag in tags if isinstance(tags, list) else []:
        if isinstance(tag, str) and tag not in _SUBSET_TAGS and not tag.startswith("model:"):
            return kebab(tag)
    return "uncategorized"


def _axes_spec(definition: Mapping[str, Any]) -> JsonObject:
    axes = json_object(definition.get("axes"), "definition 'axes'")
    result: JsonObject = {}
    for name, raw in axes.items():
        where = f"definition axis '{name}'"
        axis = json_object(raw, where)
        kind = axis.get("type")
        if kind == "const":
            value = integer(axis.get("value"), f"{where}: 'value'")
            result[axis_key(name)] = {"role": "constant", "type": "integer", "value": value}
        elif kind == "var":
            result[axis_key(name)] = {"role": "variable", "type": "integer"}
        elif kind == "expr":
            expression = required_string(axis, "expression", where).lower()
            result[axis_key(name)] = {
                "role": "derived",
                "type": "integer",
                "expression": expression,
            }
        else:
            raise SolFormatError(f"{where}: type must be const, var or expr, got {kind!r}")
    return result


def operation_from_definition(
    definition: Mapping[str, Any], *, source_url: str | None = None
) -> JsonObject:
    """A SOL Definition (or leaderboard kernel) → ``OperationSpec`` manifest (unvalidated)."""
    name = required_string(definition, "name", "definition")
    metadata: JsonObject = {"name": kebab(name) or "operation", "title": clip(name, MAX_TITLE)}
    description = optional_string(definition, "description", "definition")
    if description:
        metadata["description"] = clip(description, MAX_DESCRIPTION)
    if source_url is not None:
        metadata["sourceRefs"] = [{"url": source_url}]
    spec: JsonObject = {
        "family": _family(definition),
        "axes": _axes_spec(definition),
        "inputs": [_argument_spec(a) for a in arguments(definition, "inputs")],
        "outputs": [_argument_spec(a) for a in arguments(definition, "outputs")],
        "semantics": {"mutation": "none", "determinism": "unspecified"},
    }
    if definition.get("reference"):
        spec["reference"] = {"language": "python"}
    return {"apiVersion": API_VERSION, "kind": "OperationSpec", "metadata": metadata, "spec": spec}
