"""``ServingStackRevision``: one release of an inference-serving software stack.

Mirrors ``kernelindex-schemas/serving-stack-revision.v1alpha1.schema.json`` (Apache-2.0,
KernelIndex).
"""

from typing import Annotated, Literal

from msgspec import Meta

from domain.manifests.models.common import (
    UNSET,
    GitCommit,
    Identifier,
    Manifest,
    Sha256Digest,
    StrictModel,
    Text120,
    Text200,
    Text2000,
    UnsetType,
)


class StackProject(StrictModel, kw_only=True, frozen=True):
    name: Text200
    repository: Text2000 | UnsetType = UNSET


class StackRevision(StrictModel, kw_only=True, frozen=True):
    version: Text120 | UnsetType = UNSET
    commit: GitCommit | UnsetType = UNSET
    container_digest: Sha256Digest | UnsetType = UNSET


class ServingStackRevisionSpec(StrictModel, kw_only=True, frozen=True):
    project: StackProject
    revision: StackRevision
    backends: Annotated[list[Identifier], Meta(max_length=8)] | UnsetType = UNSET
    api_protocol: Identifier | UnsetType = UNSET
    license: Text200 | UnsetType = UNSET


class ServingStackRevision(Manifest, kw_only=True, frozen=True):
    kind: Literal["ServingStackRevision"]
    spec: ServingStackRevisionSpec
