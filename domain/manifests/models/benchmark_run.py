"""``BenchmarkRun``: one measured result of an implementation on a workload.

Mirrors ``kernelindex-schemas/benchmark-run.v1alpha1.schema.json`` (Apache-2.0, KernelIndex).
"""

from typing import Literal

from domain.manifests.models.common import (
    UNSET,
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
    UnsetType,
    check_duration_prefix,
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


class RunCorrectness(StrictModel, kw_only=True, frozen=True):
    comparator: Identifier
    maximum_absolute_error: NonNegativeNumber | UnsetType = UNSET
    maximum_relative_error: NonNegativeNumber | UnsetType = UNSET
    matched_ratio: Fraction | UnsetType = UNSET


class LatencyNs(StrictModel, kw_only=True, frozen=True):
    """Latency statistics; each a duration (canonical form: integer nanoseconds)."""

    median: Duration | UnsetType = UNSET
    mean: Duration | UnsetType = UNSET
    p05: Duration | UnsetType = UNSET
    p95: Duration | UnsetType = UNSET
    minimum: Duration | UnsetType = UNSET
    maximum: Duration | UnsetType = UNSET
    mad: Duration | UnsetType = UNSET
    confidence95: DurationPrefixPair | UnsetType = UNSET

    def __post_init__(self) -> None:
        check_duration_prefix("confidence95", self.confidence95)


class Timing(StrictModel, kw_only=True, frozen=True):
    primary_statistic: Identifier
    samples: PositiveInteger | UnsetType = UNSET
    latency_ns: LatencyNs
    raw_samples: ArtifactRef | UnsetType = UNSET


class RunSourceNative(StrictModel, kw_only=True, frozen=True):
    """The result as the source published it."""

    source: Slug
    benchmark: Text200 | UnsetType = UNSET
    external_id: Text500 | UnsetType = UNSET
    metrics: dict[Identifier, Number] | UnsetType = UNSET


class HarnessCheckout(StrictModel, kw_only=True, frozen=True):
    repository: Text2000
    commit: GitCommit


class Evidence(StrictModel, kw_only=True, frozen=True):
    logs: ArtifactRef | UnsetType = UNSET
    raw_samples: ArtifactRef | UnsetType = UNSET
    harness: HarnessCheckout | UnsetType = UNSET


class BenchmarkRunSpec(StrictModel, kw_only=True, frozen=True):
    implementation_digest: Sha256Digest
    workload_digest: Sha256Digest
    protocol_digest: Sha256Digest
    environment_digest: Sha256Digest
    status: RunStatus
    correctness: RunCorrectness | UnsetType = UNSET
    timing: Timing | UnsetType = UNSET
    measurements: list[Measurement] | UnsetType = UNSET
    source_native: RunSourceNative | UnsetType = UNSET
    evidence: Evidence | UnsetType = UNSET
    observed_at: Timestamp


class BenchmarkRun(Manifest, kw_only=True, frozen=True):
    kind: Literal["BenchmarkRun"]
    spec: BenchmarkRunSpec
