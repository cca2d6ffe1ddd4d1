"""``ExecutionEnvironment``: the hardware, software and settings a run executed on.

Mirrors ``kernelindex-schemas/execution-environment.v1alpha1.schema.json`` (Apache-2.0,
KernelIndex).
"""

from typing import Literal

from domain.manifests.models.common import (
    UNSET,
    Identifier,
    Manifest,
    PositiveInteger,
    PositiveNumber,
    Sha256Digest,
    StrictModel,
    Text100,
    Text200,
    Text500,
    UnsetType,
)


class Hardware(StrictModel, kw_only=True, frozen=True):
    vendor: Identifier
    product: Text200
    architecture: Identifier
    form_factor: Text100 | UnsetType = UNSET
    memory_bytes: PositiveInteger | UnsetType = UNSET
    count: PositiveInteger | UnsetType = UNSET
    interconnect: Text200 | UnsetType = UNSET


class Framework(StrictModel, kw_only=True, frozen=True):
    name: Identifier
    version: Text100


class Software(StrictModel, kw_only=True, frozen=True):
    operating_system: Text200 | UnsetType = UNSET
    kernel: Text200 | UnsetType = UNSET
    driver: Text100 | UnsetType = UNSET
    cuda_toolkit: Text100 | UnsetType = UNSET
    compiler: Text200 | UnsetType = UNSET
    framework: Framework | UnsetType = UNSET
    libraries: dict[Identifier, Text100] | UnsetType = UNSET


class Settings(StrictModel, kw_only=True, frozen=True):
    clocks_locked: bool | UnsetType = UNSET
    power_limit_watts: PositiveNumber | UnsetType = UNSET
    persistence_mode: bool | UnsetType = UNSET
    ecc_enabled: bool | UnsetType = UNSET
    environment_variables: dict[Text200, Text500] | UnsetType = UNSET


class ExecutionEnvironmentSpec(StrictModel, kw_only=True, frozen=True):
    hardware: Hardware
    software: Software
    settings: Settings | UnsetType = UNSET
    image_digest: Sha256Digest | UnsetType = UNSET


class ExecutionEnvironment(Manifest, kw_only=True, frozen=True):
    kind: Literal["ExecutionEnvironment"]
    spec: ExecutionEnvironmentSpec
