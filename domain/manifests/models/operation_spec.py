"""``OperationSpec``: the signature and semantics of an operation (a kernel's contract).

Mirrors ``kernelindex-schemas/operation-spec.v1alpha1.schema.json`` (Apache-2.0, KernelIndex).
"""

from typing import Annotated, Literal

from msgspec import Meta

from domain.manifests.models.common import (
    UNSET,
    ArtifactRef,
    AxisExpression,
    Dimension,
    Identifier,
    Manifest,
    SafeInteger,
    Slug,
    StrictModel,
    Text2000,
    UnsetType,
)


class AxisDefinition(StrictModel, kw_only=True, frozen=True):
    role: Literal["variable", "constant", "derived"]
    type: Literal["integer"]
    value: SafeInteger | UnsetType = UNSET
    minimum: SafeInteger | UnsetType = UNSET
    maximum: SafeInteger | UnsetType = UNSET
    expression: AxisExpression | UnsetType = UNSET


class TensorSignature(StrictModel, kw_only=True, frozen=True):
    shape: Annotated[list[Dimension], Meta(min_length=1)]
    dtype: Identifier
    layout: Literal["row_major", "col_major", "contiguous", "strided"] | UnsetType = UNSET


class ScalarSignature(StrictModel, kw_only=True, frozen=True):
    dtype: Identifier


class Parameter(StrictModel, kw_only=True, frozen=True):
    """An input or output: a tensor, a scalar, or (as the schema allows) neither."""

    name: Identifier
    tensor: TensorSignature | UnsetType = UNSET
    scalar: ScalarSignature | UnsetType = UNSET


class Semantics(StrictModel, kw_only=True, frozen=True):
    expression: Text2000 | UnsetType = UNSET
    mutation: Literal["none", "in_place", "destination"]
    determinism: Literal["deterministic", "nondeterministic", "unspecified"]


class ReferenceImplementation(StrictModel, kw_only=True, frozen=True):
    language: Identifier
    artifact: ArtifactRef | UnsetType = UNSET


class OperationSpecSpec(StrictModel, kw_only=True, frozen=True):
    family: Slug
    axes: dict[Identifier, AxisDefinition]
    inputs: Annotated[list[Parameter], Meta(min_length=1)]
    outputs: Annotated[list[Parameter], Meta(min_length=1)]
    semantics: Semantics
    reference: ReferenceImplementation | UnsetType = UNSET


class OperationSpec(Manifest, kw_only=True, frozen=True):
    kind: Literal["OperationSpec"]
    spec: OperationSpecSpec
