"""``WorkloadCase``: concrete axis values, tensors and tolerances for one operation call.

Mirrors ``kernelindex-schemas/workload-case.v1alpha1.schema.json`` (Apache-2.0, KernelIndex).
"""

from typing import Annotated, Literal

from msgspec import Meta

from domain.manifests.models.common import (
    UNSET,
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
    UnsetType,
)

SpecialValuePolicy = Literal["reject", "exact_match", "ignore"]


class TensorData(StrictModel, kw_only=True, frozen=True):
    generator: Identifier
    seed: NonNegativeInteger | UnsetType = UNSET
    parameters: dict[Identifier, Number] | UnsetType = UNSET
    artifact: ArtifactRef | UnsetType = UNSET


class TensorInstance(StrictModel, kw_only=True, frozen=True):
    shape: Annotated[list[NonNegativeInteger], Meta(min_length=1)]
    dtype: Identifier
    strides: list[SafeInteger] | UnsetType = UNSET
    alignment_bytes: PositiveInteger | UnsetType = UNSET
    data: TensorData | UnsetType = UNSET


class ScalarInstance(StrictModel, kw_only=True, frozen=True):
    dtype: Identifier
    value: Number


class CaseCorrectness(StrictModel, kw_only=True, frozen=True):
    comparator: Identifier
    max_absolute_error: NonNegativeNumber | UnsetType = UNSET
    max_relative_error: NonNegativeNumber | UnsetType = UNSET
    required_matched_ratio: Fraction | UnsetType = UNSET
    nan_policy: SpecialValuePolicy | UnsetType = UNSET
    infinity_policy: SpecialValuePolicy | UnsetType = UNSET


class WorkloadCaseSpec(StrictModel, kw_only=True, frozen=True):
    operation_spec_digest: Sha256Digest
    axes: AxisValues
    tensors: dict[Identifier, TensorInstance]
    scalars: dict[Identifier, ScalarInstance] | UnsetType = UNSET
    correctness: CaseCorrectness


class WorkloadCase(Manifest, kw_only=True, frozen=True):
    kind: Literal["WorkloadCase"]
    spec: WorkloadCaseSpec
