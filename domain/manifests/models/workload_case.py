"""``WorkloadCase``: concrete axis values, tensors and tolerances for one operation call.

Mirrors ``kernelindex-schemas/workload-case.v1alpha1.schema.json`` (Apache-2.0, KernelIndex).
"""

from typing import Annotated, Literal

from annotated_types import MinLen

from domain.manifests.models.common import (
    ArtifactRef,
    AxisValues,
    Fraction,
    Identifier,
    Manifest,
    NonNegativeInteger,
    NonNegativeNumber,
    Number,
    PositiveInteger,
    SafeInteger,
    Sha256Digest,
    StrictModel,
)

SpecialValuePolicy = Literal["reject", "exact_match", "ignore"]


class TensorData(StrictModel):
    generator: Identifier
    seed: NonNegativeInteger | None = None
    parameters: dict[Identifier, Number] | None = None
    artifact: ArtifactRef | None = None


class TensorInstance(StrictModel):
    shape: Annotated[list[NonNegativeInteger], MinLen(1)]
    dtype: Identifier
    strides: list[SafeInteger] | None = None
    alignment_bytes: PositiveInteger | None = None
    data: TensorData | None = None


class ScalarInstance(StrictModel):
    dtype: Identifier
    value: Number


class CaseCorrectness(StrictModel):
    comparator: Identifier
    max_absolute_error: NonNegativeNumber | None = None
    max_relative_error: NonNegativeNumber | None = None
    required_matched_ratio: Fraction | None = None
    nan_policy: SpecialValuePolicy | None = None
    infinity_policy: SpecialValuePolicy | None = None


class WorkloadCaseSpec(StrictModel):
    operation_spec_digest: Sha256Digest
    axes: AxisValues
    tensors: dict[Identifier, TensorInstance]
    scalars: dict[Identifier, ScalarInstance] | None = None
    correctness: CaseCorrectness


class WorkloadCase(Manifest):
    kind: Literal["WorkloadCase"]
    spec: WorkloadCaseSpec
