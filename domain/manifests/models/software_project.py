"""``SoftwareProject``: a library, vendor or individual that publishes implementations.

Mirrors ``kernelindex-schemas/software-project.v1alpha1.schema.json`` (Apache-2.0, KernelIndex).
"""

from typing import Literal

from domain.manifests.models.common import (
    Identifier,
    Manifest,
    StrictModel,
    Text200,
    Text2000,
)


class ProjectHost(StrictModel):
    kind: Literal["github", "huggingface", "gitlab", "other"]
    id: Text200


class PackageRef(StrictModel):
    ecosystem: Identifier
    name: Text200


class SoftwareProjectSpec(StrictModel):
    name: Text200
    kind: Literal["library", "individual", "vendor"] | None = None
    repository: Text2000 | None = None
    homepage: Text2000 | None = None
    host: ProjectHost | None = None
    packages: list[PackageRef] | None = None


class SoftwareProject(Manifest):
    kind: Literal["SoftwareProject"]
    spec: SoftwareProjectSpec
