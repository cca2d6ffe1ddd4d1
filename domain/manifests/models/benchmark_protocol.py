"""``BenchmarkProtocol``: how a harness measures, checks and compares results.

Mirrors ``kernelindex-schemas/benchmark-protocol.v1alpha1.schema.json`` (Apache-2.0,
KernelIndex).
"""

from typing import Literal

from domain.manifests.models.common import (
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
)


class Harness(StrictModel):
    name: Text200
    version: Text100 | None = None
    repository: Text2000 | None = None
    commit: GitCommit | None = None


class MeasurementProcedure(StrictModel):
    """The schema's ``spec.measurement``."""

    timer: Identifier
    synchronization: Identifier | None = None
    compile_included: bool | None = None
    setup_included: bool | None = None
    warmup_iterations: NonNegativeInteger | None = None
    warmup_duration: Duration | None = None
    measured_iterations: PositiveInteger | None = None
    samples: PositiveInteger | None = None
    input_regeneration: Identifier | None = None
    outlier_policy: Text500 | None = None
    primary_statistic: Identifier


class ProtocolCorrectness(StrictModel):
    reference: Text500
    comparator: Identifier


class DevicePolicy(StrictModel):
    clocks_locked: bool | None = None
    power_limit_watts: PositiveNumber | None = None
    persistence_mode: bool | None = None


class Comparability(StrictModel):
    family: Identifier
    notes: Text1000 | None = None


class BenchmarkProtocolSpec(StrictModel):
    harness: Harness
    measurement: MeasurementProcedure
    correctness: ProtocolCorrectness | None = None
    device_policy: DevicePolicy | None = None
    comparability: Comparability | None = None


class BenchmarkProtocol(Manifest):
    kind: Literal["BenchmarkProtocol"]
    spec: BenchmarkProtocolSpec
