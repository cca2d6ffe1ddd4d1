"""``ImplementationRevision``: one revision of a kernel implementing an operation.

Mirrors ``kernelindex-schemas/implementation-revision.v1alpha1.schema.json`` (Apache-2.0,
KernelIndex).
"""

from typing import Literal

from domain.manifests.models.common import (
    GitCommit,
    Identifier,
    Manifest,
    ObjectName,
    PositiveInteger,
    Sha256Digest,
    StrictModel,
    Text50,
    Text100,
    Text200,
    Text500,
    Text1000,
    Text2000,
)


class ProjectRevision(StrictModel):
    repository: Text2000 | None = None
    commit: GitCommit | None = None
    version: Text100 | None = None
    tree_digest: Sha256Digest | None = None


class OperationRef(StrictModel):
    spec_digest: Sha256Digest


class CallableEntry(StrictModel):
    """The schema's ``spec.callable``."""

    language: Identifier
    path: Text500 | None = None
    symbol: Text200 | None = None
    interface: Identifier | None = None


class Support(StrictModel):
    """Set-like lists (canonicalisation sorts and de-duplicates them; docs/design.md §4)."""

    hardware_architectures: list[Identifier]
    products_tested: list[Text100] | None = None
    axes: list[Text200] | None = None
    dtypes: list[Identifier]
    layouts: list[Text50] | None = None


class SourceFile(StrictModel):
    content_digest: Sha256Digest
    file_name: Text200 | None = None
    size_bytes: PositiveInteger | None = None


class Install(StrictModel):
    kind: Literal["git", "pip", "package", "container", "source"]
    repository: Text2000 | None = None
    commit: GitCommit | None = None
    package: Text200 | None = None
    version: Text100 | None = None
    command: Text1000 | None = None


class BuildVariant(StrictModel):
    name: ObjectName
    install: Install
    requirements: dict[Identifier, Text200] | None = None


class LicenseEvidence(StrictModel):
    path: Text500
    digest: Sha256Digest | None = None


class Licensing(StrictModel):
    declared: Text200 | None = None
    concluded: Text200 | None = None
    evidence: LicenseEvidence | None = None


class ImplementationRevisionSpec(StrictModel):
    project_revision: ProjectRevision
    operation: OperationRef
    callable: CallableEntry
    support: Support
    source: SourceFile | None = None
    build_variants: list[BuildVariant] | None = None
    licensing: Licensing


class ImplementationRevision(Manifest):
    kind: Literal["ImplementationRevision"]
    spec: ImplementationRevisionSpec
