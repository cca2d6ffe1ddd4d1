"""``ServingStackRevision``: one release of an inference-serving software stack.

Mirrors ``kernelindex-schemas/serving-stack-revision.v1alpha1.schema.json`` (Apache-2.0,
KernelIndex).
"""

from typing import Annotated, Literal

from annotated_types import MaxLen

from domain.manifests.models.common import (
    GitCommit,
    Identifier,
    Manifest,
    Sha256Digest,
    StrictModel,
    Text120,
    Text200,
    Text2000,
)


class StackProject(StrictModel):
    name: Text200
    repository: Text2000 | None = None


class StackRevision(StrictModel):
    version: Text120 | None = None
    commit: GitCommit | None = None
    container_digest: Sha256Digest | None = None


class ServingStackRevisionSpec(StrictModel):
    project: StackProject
    revision: StackRevision
    backends: Annotated[list[Identifier], MaxLen(8)] | None = None
    api_protocol: Identifier | None = None
    license: Text200 | None = None


class ServingStackRevision(Manifest):
    kind: Literal["ServingStackRevision"]
    spec: ServingStackRevisionSpec
