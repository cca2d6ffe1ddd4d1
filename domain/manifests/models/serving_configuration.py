"""``ServingConfiguration``: how a serving stack is configured for a run.

Mirrors ``kernelindex-schemas/serving-configuration.v1alpha1.schema.json`` (Apache-2.0,
KernelIndex).
"""

from typing import Literal

from domain.manifests.models.common import (
    Identifier,
    Manifest,
    PositiveInteger,
    Sha256Digest,
    StrictModel,
    Text200,
    Text500,
)


class Parallelism(StrictModel):
    tensor: PositiveInteger | None = None
    pipeline: PositiveInteger | None = None
    data: PositiveInteger | None = None
    expert: PositiveInteger | None = None
    context: PositiveInteger | None = None


class KvCache(StrictModel):
    dtype: Identifier | None = None
    capacity_tokens: PositiveInteger | None = None


class Limits(StrictModel):
    max_sequence_length: PositiveInteger | None = None
    max_batch_size: PositiveInteger | None = None
    max_num_tokens: PositiveInteger | None = None


class Speculative(StrictModel):
    method: Identifier
    draft_model: Text200 | None = None


class ServingConfigurationSpec(StrictModel):
    stack_digest: Sha256Digest
    dtype: Identifier | None = None
    quantization: Identifier | None = None
    parallelism: Parallelism | None = None
    attention_backend: Identifier | None = None
    kv_cache: KvCache | None = None
    limits: Limits | None = None
    speculative: Speculative | None = None
    options: dict[Identifier, Text500] | None = None


class ServingConfiguration(Manifest):
    kind: Literal["ServingConfiguration"]
    spec: ServingConfigurationSpec
