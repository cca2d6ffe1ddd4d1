"""``ModelRevision``: a served model at one revision.

Mirrors ``kernelindex-schemas/model-revision.v1alpha1.schema.json`` (Apache-2.0, KernelIndex).
"""

from typing import Literal

from domain.manifests.models.common import (
    UNSET,
    Identifier,
    Manifest,
    PositiveInteger,
    Sha256Digest,
    StrictModel,
    Text100,
    Text200,
    UnsetType,
)


class ModelRepository(StrictModel, kw_only=True, frozen=True):
    host: Literal["huggingface", "github", "other"]
    id: Text200
    revision: Text100 | UnsetType = UNSET


class Tokenizer(StrictModel, kw_only=True, frozen=True):
    name: Text200 | UnsetType = UNSET
    revision: Text100 | UnsetType = UNSET
    digest: Sha256Digest | UnsetType = UNSET


class ModelRevisionSpec(StrictModel, kw_only=True, frozen=True):
    model: Text200
    repository: ModelRepository | UnsetType = UNSET
    tokenizer: Tokenizer | UnsetType = UNSET
    architecture: Text100 | UnsetType = UNSET
    parameter_count: PositiveInteger | UnsetType = UNSET
    context_length: PositiveInteger | UnsetType = UNSET
    modality: Identifier | UnsetType = UNSET
    license: Text200 | UnsetType = UNSET


class ModelRevision(Manifest, kw_only=True, frozen=True):
    kind: Literal["ModelRevision"]
    spec: ModelRevisionSpec
