"""``ServingWorkload``: the request stream and service-level objectives of a serving run.

Mirrors ``kernelindex-schemas/serving-workload.v1alpha1.schema.json`` (Apache-2.0, KernelIndex).
"""

from typing import Annotated, Literal

from annotated_types import MaxLen

from domain.manifests.models.common import (
    Identifier,
    Manifest,
    Number,
    PositiveInteger,
    PositiveNumber,
    Sha256Digest,
    StrictModel,
    Text200,
)


class Dataset(StrictModel):
    name: Text200
    digest: Sha256Digest | None = None


class TokenDistribution(StrictModel):
    distribution: Identifier
    mean: PositiveNumber | None = None
    maximum: PositiveInteger | None = None
    artifact_digest: Sha256Digest | None = None


class Tokens(StrictModel):
    prompt: TokenDistribution | None = None
    output: TokenDistribution | None = None


class SloTarget(StrictModel):
    metric: Identifier
    statistic: Identifier
    operator: Literal["<=", "<"]
    value: PositiveNumber
    unit: Identifier


class Sampling(StrictModel):
    temperature: Number | None = None
    seeded: bool | None = None


class ServingWorkloadSpec(StrictModel):
    dataset: Dataset | None = None
    tokens: Tokens | None = None
    streaming: bool
    load_generation: Literal["open_loop", "closed_loop", "offline"]
    arrival: Identifier | None = None
    request_rate_per_second: PositiveNumber | None = None
    slo: Annotated[list[SloTarget], MaxLen(8)] | None = None
    sampling: Sampling | None = None
    duration_seconds: PositiveInteger | None = None
    request_count: PositiveInteger | None = None


class ServingWorkload(Manifest):
    kind: Literal["ServingWorkload"]
    spec: ServingWorkloadSpec
