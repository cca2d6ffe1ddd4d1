"""``BenchmarkRun``: one measured result of an implementation on a workload.

Mirrors ``kernelindex-schemas/benchmark-run.v1alpha1.schema.json`` (Apache-2.0, KernelIndex).
"""

from typing import Literal

from domain.manifests.models.common import (
    ArtifactRef,
    Duration,
    DurationPrefixPair,
    Fraction,
    GitCommit,
    Identifier,
    Manifest,
    Measurement,
    NonNegativeNumber,
    Number,
    PositiveInteger,
    Sha256Digest,
    Slug,
    StrictModel,
    Text200,
    Text500,
    Text2000,
    Timestamp,
)

RunStatus = Literal[
    "passed",
    "incorrect_shape",
    "incorrect_dtype",
    "incorrect_numerical",
    "compile_error",
    "runtime_error",
    "timeout",
    "resource_exceeded",
    "invalid_reference",
    "policy_violation",
    "suspected_reward_hack",
    "incomplete_evidence",
    "revoked",
]


class RunCorrectness(StrictModel):
    comparator: Identifier
    maximum_absolute_error: NonNegativeNumber | None = None
    maximum_relative_error: NonNegativeNumber | None = None
    matched_ratio: Fraction | None = None


class LatencyNs(StrictModel):
    """Latency statistics; each a duration (canonical form: integer nanoseconds)."""

    median: Duration | None = None
    mean: Duration | None = None
    p05: Duration | None = None
    p95: Duration | None = None
    minimum: Duration | None = None
    maximum: Duration | None = None
    mad: Duration | None = None
    confidence95: DurationPrefixPair | None = None


class Timing(StrictModel):
    primary_statistic: Identifier
    samples: PositiveInteger | None = None
    latency_ns: LatencyNs
    raw_samples: ArtifactRef | None = None


class RunSourceNative(StrictModel):
    """The result as the source published it."""

    source: Slug
    benchmark: Text200 | None = None
    external_id: Text500 | None = None
    metrics: dict[Identifier, Number] | None = None


class HarnessCheckout(StrictModel):
    repository: Text2000
    commit: GitCommit


class Evidence(StrictModel):
    logs: ArtifactRef | None = None
    raw_samples: ArtifactRef | None = None
    harness: HarnessCheckout | None = None


class BenchmarkRunSpec(StrictModel):
    implementation_digest: Sha256Digest
    workload_digest: Sha256Digest
    protocol_digest: Sha256Digest
    environment_digest: Sha256Digest
    status: RunStatus
    correctness: RunCorrectness | None = None
    timing: Timing | None = None
    measurements: list[Measurement] | None = None
    source_native: RunSourceNative | None = None
    evidence: Evidence | None = None
    observed_at: Timestamp


class BenchmarkRun(Manifest):
    kind: Literal["BenchmarkRun"]
    spec: BenchmarkRunSpec
