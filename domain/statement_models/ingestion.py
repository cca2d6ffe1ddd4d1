"""An importer's predicates: an ingestion (a run's manifest set) and an attachment."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StrictStr, model_validator

from domain.statement_models.common import (
    VISIBLE,
    Digest,
    SignedPredicate,
    Slug,
    StrictModel,
    Timestamp,
)


class ManifestSet(StrictModel):
    run: dict[str, Any]
    protocol: dict[str, Any]
    environment: dict[str, Any]
    implementation: dict[str, Any] | None = None
    workload: dict[str, Any] | None = None


class IngestionPredicate(SignedPredicate):
    source: Slug
    externalId: Annotated[StrictStr, Field(max_length=500), VISIBLE] | None = None
    fetchedAt: Timestamp
    manifests: ManifestSet
    sourceNative: dict[str, Any] | None = None
    # sha256 of the raw bytes the importer read (API response, file), so the mapping is auditable.
    snapshotDigest: Digest | None = None
    # When the source itself published the result, and the source's own name for itself
    # (the KernelIndex catalog states both): facts of the source, apart from ``fetchedAt``
    # (when the importer read it) and the ledger's own receipt time. Optional: runs signed
    # before these fields existed stay valid.
    publishedAt: Timestamp | None = None
    sourceName: Annotated[StrictStr, Field(min_length=1, max_length=200), VISIBLE] | None = None


class AttachedManifests(StrictModel):
    """Manifests a run names by digest but was ingested without (a leaderboard import often
    has only the digests; the catalog or a later import brings the documents)."""

    implementation: dict[str, Any] | None = None
    workload: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _not_empty(self) -> AttachedManifests:
        if self.implementation is None and self.workload is None:
            raise ValueError("an attachment carries an implementation or a workload manifest")
        return self


class AttachmentPredicate(SignedPredicate):
    manifests: AttachedManifests
