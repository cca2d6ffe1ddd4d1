"""``ModelRevision``: a served model at one revision.

Mirrors ``kernelindex-schemas/model-revision.v1alpha1.schema.json`` (Apache-2.0, KernelIndex).
"""

from typing import Literal

from domain.manifests.models.common import (
    Identifier,
    Manifest,
    PositiveInteger,
    Sha256Digest,
    StrictModel,
    Text100,
    Text200,
)


class ModelRepository(StrictModel):
    host: Literal["huggingface", "github", "other"]
    id: Text200
    revision: Text100 | None = None


class Tokenizer(StrictModel):
    name: Text200 | None = None
    revision: Text100 | None = None
    digest: Sha256Digest | None = None


class ModelRevisionSpec(StrictModel):
    model: Text200
    repository: ModelRepository | None = None
    tokenizer: Tokenizer | None = None
    architecture: Text100 | None = None
    parameter_count: PositiveInteger | None = None
    context_length: PositiveInteger | None = None
    modality: Identifier | None = None
    license: Text200 | None = None


class ModelRevision(Manifest):
    kind: Literal["ModelRevision"]
    spec: ModelRevisionSpec
