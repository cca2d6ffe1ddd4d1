"""``BenchmarkProtocol``: how a harness measures, checks and compares results.

Mirrors ``kernelindex-schemas/benchmark-protocol.v1alpha1.schema.json`` (Apache-2.0,
KernelIndex).
"""

from typing import Literal

from domain.manifests.models.common import (
    UNSET,
    Duration,
    GitCommit,
    Identifier,
    Manifest,
    NonNegativeInteger,
    PositiveInteger,
    PositiveNumber,
    StrictModel,
    Text100,
    Text200,
    Text500,
    Text1000,
    Text2000,
    UnsetType,
)


class Harness(StrictModel, kw_only=True, frozen=True):
    name: Text200
    version: Text100 | UnsetType = UNSET
    repository: Text2000 | UnsetType = UNSET
    commit: GitCommit | UnsetType = UNSET


class MeasurementProcedure(StrictModel, kw_only=True, frozen=True):
    """The schema's ``spec.measurement``."""

    timer: Identifier
    synchronization: Identifier | UnsetType = UNSET
    compile_included: bool | UnsetType = UNSET
    setup_included: bool | UnsetType = UNSET
    warmup_iterations: NonNegativeInteger | UnsetType = UNSET
    warmup_duration: Duration | UnsetType = UNSET
    measured_iterations: PositiveInteger | UnsetType = UNSET
    samples: PositiveInteger | UnsetType = UNSET
    input_regeneration: Identifier | UnsetType = UNSET
    outlier_policy: Text500 | UnsetType = UNSET
    primary_statistic: Identifier


class ProtocolCorrectness(StrictModel, kw_only=True, frozen=True):
    reference: Text500
    comparator: Identifier


class DevicePolicy(StrictModel, kw_only=True, frozen=True):
    clocks_locked: bool | UnsetType = UNSET
    power_limit_watts: PositiveNumber | UnsetType = UNSET
    persistence_mode: bool | UnsetType = UNSET


class Comparability(StrictModel, kw_only=True, frozen=True):
    family: Identifier
    notes: Text1000 | UnsetType = UNSET


class BenchmarkProtocolSpec(StrictModel, kw_only=True, frozen=True):
    harness: Harness
    measurement: MeasurementProcedure
    correctness: ProtocolCorrectness | UnsetType = UNSET
    device_policy: DevicePolicy | UnsetType = UNSET
    comparability: Comparability | UnsetType = UNSET


class BenchmarkProtocol(Manifest, kw_only=True, frozen=True):
    kind: Literal["BenchmarkProtocol"]
    spec: BenchmarkProtocolSpec
