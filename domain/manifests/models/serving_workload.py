"""``ServingWorkload``: the request stream and service-level objectives of a serving run.

Mirrors ``kernelindex-schemas/serving-workload.v1alpha1.schema.json`` (Apache-2.0, KernelIndex).
"""

from typing import Annotated, Literal

from msgspec import Meta

from domain.manifests.models.common import (
    UNSET,
    Identifier,
    Manifest,
    Number,
    PositiveInteger,
    PositiveNumber,
    Sha256Digest,
    StrictModel,
    Text200,
    UnsetType,
)


class Dataset(StrictModel, kw_only=True, frozen=True):
    name: Text200
    digest: Sha256Digest | UnsetType = UNSET


class TokenDistribution(StrictModel, kw_only=True, frozen=True):
    distribution: Identifier
    mean: PositiveNumber | UnsetType = UNSET
    maximum: PositiveInteger | UnsetType = UNSET
    artifact_digest: Sha256Digest | UnsetType = UNSET


class Tokens(StrictModel, kw_only=True, frozen=True):
    prompt: TokenDistribution | UnsetType = UNSET
    output: TokenDistribution | UnsetType = UNSET


class SloTarget(StrictModel, kw_only=True, frozen=True):
    metric: Identifier
    statistic: Identifier
    operator: Literal["<=", "<"]
    value: PositiveNumber
    unit: Identifier


class Sampling(StrictModel, kw_only=True, frozen=True):
    temperature: Number | UnsetType = UNSET
    seeded: bool | UnsetType = UNSET


class ServingWorkloadSpec(StrictModel, kw_only=True, frozen=True):
    dataset: Dataset | UnsetType = UNSET
    tokens: Tokens | UnsetType = UNSET
    streaming: bool
    load_generation: Literal["open_loop", "closed_loop", "offline"]
    arrival: Identifier | UnsetType = UNSET
    request_rate_per_second: PositiveNumber | UnsetType = UNSET
    slo: Annotated[list[SloTarget], Meta(max_length=8)] | UnsetType = UNSET
    sampling: Sampling | UnsetType = UNSET
    duration_seconds: PositiveInteger | UnsetType = UNSET
    request_count: PositiveInteger | UnsetType = UNSET


class ServingWorkload(Manifest, kw_only=True, frozen=True):
    kind: Literal["ServingWorkload"]
    spec: ServingWorkloadSpec
