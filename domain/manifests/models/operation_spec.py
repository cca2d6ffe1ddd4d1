"""``OperationSpec``: the signature and semantics of an operation (a kernel's contract).

Mirrors ``kernelindex-schemas/operation-spec.v1alpha1.schema.json`` (Apache-2.0, KernelIndex).
"""

from typing import Annotated, Literal

from annotated_types import MinLen
from pydantic import StringConstraints

from domain.manifests.models.common import (
    ArtifactRef,
    Dimension,
    Identifier,
    Manifest,
    SafeInteger,
    Slug,
    StrictModel,
    Text2000,
)

AxisExpression = Annotated[str, StringConstraints(max_length=200, pattern=r"^[a-z0-9_+\-*%/() ]+$")]


class AxisDefinition(StrictModel):
    role: Literal["variable", "constant", "derived"]
    type: Literal["integer"]
    value: SafeInteger | None = None
    minimum: SafeInteger | None = None
    maximum: SafeInteger | None = None
    expression: AxisExpression | None = None


class TensorSignature(StrictModel):
    shape: Annotated[list[Dimension], MinLen(1)]
    dtype: Identifier
    layout: Literal["row_major", "col_major", "contiguous", "strided"] | None = None


class ScalarSignature(StrictModel):
    dtype: Identifier


class Parameter(StrictModel):
    """An input or output: a tensor, a scalar, or (as the schema allows) neither."""

    name: Identifier
    tensor: TensorSignature | None = None
    scalar: ScalarSignature | None = None


class Semantics(StrictModel):
    expression: Text2000 | None = None
    mutation: Literal["none", "in_place", "destination"]
    determinism: Literal["deterministic", "nondeterministic", "unspecified"]


class ReferenceImplementation(StrictModel):
    language: Identifier
    artifact: ArtifactRef | None = None


class OperationSpecSpec(StrictModel):
    family: Slug
    axes: dict[Identifier, AxisDefinition]
    inputs: Annotated[list[Parameter], MinLen(1)]
    outputs: Annotated[list[Parameter], MinLen(1)]
    semantics: Semantics
    reference: ReferenceImplementation | None = None


class OperationSpec(Manifest):
    kind: Literal["OperationSpec"]
    spec: OperationSpecSpec
