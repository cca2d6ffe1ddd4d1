"""``ExecutionEnvironment``: the hardware, software and settings a run executed on.

Mirrors ``kernelindex-schemas/execution-environment.v1alpha1.schema.json`` (Apache-2.0,
KernelIndex).
"""

from typing import Literal

from domain.manifests.models.common import (
    Identifier,
    Manifest,
    PositiveInteger,
    PositiveNumber,
    Sha256Digest,
    StrictModel,
    Text100,
    Text200,
    Text500,
)


class Hardware(StrictModel):
    vendor: Identifier
    product: Text200
    architecture: Identifier
    form_factor: Text100 | None = None
    memory_bytes: PositiveInteger | None = None
    count: PositiveInteger | None = None
    interconnect: Text200 | None = None


class Framework(StrictModel):
    name: Identifier
    version: Text100


class Software(StrictModel):
    operating_system: Text200 | None = None
    kernel: Text200 | None = None
    driver: Text100 | None = None
    cuda_toolkit: Text100 | None = None
    compiler: Text200 | None = None
    framework: Framework | None = None
    libraries: dict[Identifier, Text100] | None = None


class Settings(StrictModel):
    clocks_locked: bool | None = None
    power_limit_watts: PositiveNumber | None = None
    persistence_mode: bool | None = None
    ecc_enabled: bool | None = None
    environment_variables: dict[Text200, Text500] | None = None


class ExecutionEnvironmentSpec(StrictModel):
    hardware: Hardware
    software: Software
    settings: Settings | None = None
    image_digest: Sha256Digest | None = None


class ExecutionEnvironment(Manifest):
    kind: Literal["ExecutionEnvironment"]
    spec: ExecutionEnvironmentSpec
