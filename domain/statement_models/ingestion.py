"""An importer's predicates: an ingestion (a run's manifest set) and an attachment."""

# No ``from __future__ import annotations``: msgspec reads these Structs' annotations as
# objects, not strings it would compile and evaluate when each is first used (issue 33).

from typing import Annotated, Any

from msgspec import Meta

from domain.statement_models.common import (
    Digest,
    SignedPredicate,
    Slug,
    StrictModel,
    rfc3339,
    visible,
)


class ManifestSet(StrictModel, kw_only=True, frozen=True):
    run: dict[str, Any]
    protocol: dict[str, Any]
    environment: dict[str, Any]
    implementation: dict[str, Any] | None = None
    workload: dict[str, Any] | None = None


class IngestionPredicate(SignedPredicate, kw_only=True, frozen=True):
    source: Slug
    externalId: Annotated[str, Meta(max_length=500)] | None = None
    fetchedAt: str
    manifests: ManifestSet
    sourceNative: dict[str, Any] | None = None
    # sha256 of the raw bytes the importer read (API response, file), so the mapping is auditable.
    snapshotDigest: Digest | None = None
    # When the source itself published the result, and the source's own name for itself
    # (the KernelIndex catalog states both): facts of the source, apart from ``fetchedAt``
    # (when the importer read it) and the ledger's own receipt time. Optional: runs signed
    # before these fields existed stay valid.
    publishedAt: str | None = None
    sourceName: Annotated[str, Meta(min_length=1, max_length=200)] | None = None

    _field_checks = (
        *SignedPredicate._field_checks,
        ("externalId", visible),
        ("fetchedAt", rfc3339),
        ("publishedAt", rfc3339),
        ("sourceName", visible),
    )


class AttachedManifests(StrictModel, kw_only=True, frozen=True):
    """Manifests a run names by digest but was ingested without (a leaderboard import often
    has only the digests; the catalog or a later import brings the documents)."""

    implementation: dict[str, Any] | None = None
    workload: dict[str, Any] | None = None

    def validate(self) -> None:
        if self.implementation is None and self.workload is None:
            raise ValueError("an attachment carries an implementation or a workload manifest")


class AttachmentPredicate(SignedPredicate, kw_only=True, frozen=True):
    manifests: AttachedManifests
