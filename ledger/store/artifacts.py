"""Content-addressed artifacts: raw source documents and solution sources, kept by digest.

Events name artifacts by ``sha256:`` digest; the bytes live here, beside the events. Every
read re-hashes the content, so a damaged artifact is reported, never served.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Column, LargeBinary, MetaData, String, Table, Text, select

from domain.importers.records import Artifact
from domain.timestamps import format_time, utc_now
from ledger.store.artifact_reads import (
    ArtifactError,
    ArtifactNotFound,
    StoredArtifact,
    artifact_facts,
    stored_artifact,
)
from ledger.store.event_store import EventStore, connection_of
from ledger.store.read_door import SessionRows

__all__ = ["ArtifactError", "ArtifactNotFound", "ArtifactStore", "StoredArtifact", "artifacts"]

MAX_ARTIFACT_BYTES = 16 * 1024 * 1024

metadata = MetaData()
artifacts = Table(
    "kernelindex_artifacts",
    metadata,
    Column("digest", String(71), primary_key=True),
    Column("media_type", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("content", LargeBinary, nullable=False),
    Column("stored_at", Text, nullable=False),
)


class ArtifactStore:
    def __init__(self, store: EventStore) -> None:
        self.store = store

    def put(self, artifact: Artifact) -> str:
        """Store once by digest (idempotent); return the digest."""
        if len(artifact.content) > MAX_ARTIFACT_BYTES:
            raise ArtifactError(
                f"artifact is {len(artifact.content)} bytes; the limit is {MAX_ARTIFACT_BYTES}"
            )
        digest = artifact.digest
        with self.store.transaction(commit=True) as session:
            present = session.execute(
                select(artifacts.c.digest).where(artifacts.c.digest == digest)
            ).scalar()
            if present is None:
                session.execute(
                    artifacts.insert().values(
                        digest=digest,
                        media_type=artifact.media_type,
                        name=artifact.name,
                        size=len(artifact.content),
                        content=artifact.content,
                        stored_at=format_time(utc_now()),
                    )
                )
        return digest

    def put_many(self, items: list[Artifact]) -> int:
        """Store several in one transaction (bulk imports); return how many were new."""
        for artifact in items:
            if len(artifact.content) > MAX_ARTIFACT_BYTES:
                raise ArtifactError(
                    f"artifact {artifact.name!r} exceeds {MAX_ARTIFACT_BYTES} bytes"
                )
        unique = {a.digest: a for a in items}
        with self.store.transaction(commit=True) as session:
            present = set(
                session.execute(
                    select(artifacts.c.digest).where(artifacts.c.digest.in_(list(unique)))
                ).scalars()
            )
            stored_at = format_time(utc_now())
            rows = [
                {
                    "digest": digest,
                    "media_type": a.media_type,
                    "name": a.name,
                    "size": len(a.content),
                    "content": a.content,
                    "stored_at": stored_at,
                }
                for digest, a in unique.items()
                if digest not in present
            ]
            if rows:
                session.execute(artifacts.insert(), rows)
        return len(rows)

    def get(self, digest: str) -> StoredArtifact:
        with self.store.transaction(commit=False) as session:
            return stored_artifact(SessionRows(connection_of(session)), digest)

    def facts(self, digests: list[str]) -> list[dict[str, Any]]:
        """Digest, name, media type and size of those of ``digests`` stored here, read
        without their content."""
        with self.store.transaction(commit=False) as session:
            return artifact_facts(SessionRows(connection_of(session)), digests)

    def has(self, digest: str) -> bool:
        with self.store.transaction(commit=False) as session:
            found = session.execute(
                select(artifacts.c.digest).where(artifacts.c.digest == digest)
            ).scalar()
        return found is not None
