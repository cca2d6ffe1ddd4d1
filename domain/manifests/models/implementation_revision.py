"""``ImplementationRevision``: one revision of a kernel implementing an operation.

Mirrors ``kernelindex-schemas/implementation-revision.v1alpha1.schema.json`` (Apache-2.0,
KernelIndex).
"""

from typing import Literal

from domain.manifests.models.common import (
    UNSET,
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
    UnsetType,
)


class ProjectRevision(StrictModel, kw_only=True, frozen=True):
    repository: Text2000 | UnsetType = UNSET
    commit: GitCommit | UnsetType = UNSET
    version: Text100 | UnsetType = UNSET
    tree_digest: Sha256Digest | UnsetType = UNSET


class OperationRef(StrictModel, kw_only=True, frozen=True):
    spec_digest: Sha256Digest


class CallableEntry(StrictModel, kw_only=True, frozen=True):
    """The schema's ``spec.callable``."""

    language: Identifier
    path: Text500 | UnsetType = UNSET
    symbol: Text200 | UnsetType = UNSET
    interface: Identifier | UnsetType = UNSET


class Support(StrictModel, kw_only=True, frozen=True):
    """Set-like lists (canonicalisation sorts and de-duplicates them; docs/design.md §4)."""

    hardware_architectures: list[Identifier]
    products_tested: list[Text100] | UnsetType = UNSET
    axes: list[Text200] | UnsetType = UNSET
    dtypes: list[Identifier]
    layouts: list[Text50] | UnsetType = UNSET


class SourceFile(StrictModel, kw_only=True, frozen=True):
    content_digest: Sha256Digest
    file_name: Text200 | UnsetType = UNSET
    size_bytes: PositiveInteger | UnsetType = UNSET


class Install(StrictModel, kw_only=True, frozen=True):
    kind: Literal["git", "pip", "package", "container", "source"]
    repository: Text2000 | UnsetType = UNSET
    commit: GitCommit | UnsetType = UNSET
    package: Text200 | UnsetType = UNSET
    version: Text100 | UnsetType = UNSET
    command: Text1000 | UnsetType = UNSET


class BuildVariant(StrictModel, kw_only=True, frozen=True):
    name: ObjectName
    install: Install
    requirements: dict[Identifier, Text200] | UnsetType = UNSET


class LicenseEvidence(StrictModel, kw_only=True, frozen=True):
    path: Text500
    digest: Sha256Digest | UnsetType = UNSET


class Licensing(StrictModel, kw_only=True, frozen=True):
    declared: Text200 | UnsetType = UNSET
    concluded: Text200 | UnsetType = UNSET
    evidence: LicenseEvidence | UnsetType = UNSET


class ImplementationRevisionSpec(StrictModel, kw_only=True, frozen=True):
    project_revision: ProjectRevision
    operation: OperationRef
    callable: CallableEntry
    support: Support
    source: SourceFile | UnsetType = UNSET
    build_variants: list[BuildVariant] | UnsetType = UNSET
    licensing: Licensing


class ImplementationRevision(Manifest, kw_only=True, frozen=True):
    kind: Literal["ImplementationRevision"]
    spec: ImplementationRevisionSpec
