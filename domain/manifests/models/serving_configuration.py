"""``ServingConfiguration``: how a serving stack is configured for a run.

Mirrors ``kernelindex-schemas/serving-configuration.v1alpha1.schema.json`` (Apache-2.0,
KernelIndex).
"""

from typing import Literal

from domain.manifests.models.common import (
    UNSET,
    Identifier,
    Manifest,
    PositiveInteger,
    Sha256Digest,
    StrictModel,
    Text200,
    Text500,
    UnsetType,
)


class Parallelism(StrictModel, kw_only=True, frozen=True):
    tensor: PositiveInteger | UnsetType = UNSET
    pipeline: PositiveInteger | UnsetType = UNSET
    data: PositiveInteger | UnsetType = UNSET
    expert: PositiveInteger | UnsetType = UNSET
    context: PositiveInteger | UnsetType = UNSET


class KvCache(StrictModel, kw_only=True, frozen=True):
    dtype: Identifier | UnsetType = UNSET
    capacity_tokens: PositiveInteger | UnsetType = UNSET


class Limits(StrictModel, kw_only=True, frozen=True):
    max_sequence_length: PositiveInteger | UnsetType = UNSET
    max_batch_size: PositiveInteger | UnsetType = UNSET
    max_num_tokens: PositiveInteger | UnsetType = UNSET


class Speculative(StrictModel, kw_only=True, frozen=True):
    method: Identifier
    draft_model: Text200 | UnsetType = UNSET


class ServingConfigurationSpec(StrictModel, kw_only=True, frozen=True):
    stack_digest: Sha256Digest
    dtype: Identifier | UnsetType = UNSET
    quantization: Identifier | UnsetType = UNSET
    parallelism: Parallelism | UnsetType = UNSET
    attention_backend: Identifier | UnsetType = UNSET
    kv_cache: KvCache | UnsetType = UNSET
    limits: Limits | UnsetType = UNSET
    speculative: Speculative | UnsetType = UNSET
    options: dict[Identifier, Text500] | UnsetType = UNSET


class ServingConfiguration(Manifest, kw_only=True, frozen=True):
    kind: Literal["ServingConfiguration"]
    spec: ServingConfigurationSpec
