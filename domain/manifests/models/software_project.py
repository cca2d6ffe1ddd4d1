"""``SoftwareProject``: a library, vendor or individual that publishes implementations.

Mirrors ``kernelindex-schemas/software-project.v1alpha1.schema.json`` (Apache-2.0, KernelIndex).
"""

from typing import Literal

from domain.manifests.models.common import (
    UNSET,
    Identifier,
    Manifest,
    StrictModel,
    Text200,
    Text2000,
    UnsetType,
)


class ProjectHost(StrictModel, kw_only=True, frozen=True):
    kind: Literal["github", "huggingface", "gitlab", "other"]
    id: Text200


class PackageRef(StrictModel, kw_only=True, frozen=True):
    ecosystem: Identifier
    name: Text200


class SoftwareProjectSpec(StrictModel, kw_only=True, frozen=True):
    name: Text200
    kind: Literal["library", "individual", "vendor"] | UnsetType = UNSET
    repository: Text2000 | UnsetType = UNSET
    homepage: Text2000 | UnsetType = UNSET
    host: ProjectHost | UnsetType = UNSET
    packages: list[PackageRef] | UnsetType = UNSET


class SoftwareProject(Manifest, kw_only=True, frozen=True):
    kind: Literal["SoftwareProject"]
    spec: SoftwareProjectSpec
