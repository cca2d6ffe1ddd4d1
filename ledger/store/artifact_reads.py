"""Reading stored artifacts on any door (``ledger.store.read_door``): ``ArtifactStore`` on
its session's connection, a short command on its driver's (issue 33). Every read of the
content re-hashes it, so a damaged artifact is reported, never served.

Loads no SQLAlchemy: the statements are ``ledger.store.read_statements``'.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from domain.errors import DomainError
from ledger.store.read_door import Rows

_CHUNK = 500  # digests per IN list


class ArtifactError(DomainError):
    code = "bad-artifact"
    status = 422


class ArtifactNotFound(ArtifactError):
    code = "not-found"
    status = 404


@dataclass(frozen=True)
class StoredArtifact:
    digest: str
    media_type: str
    name: str
    content: bytes


def artifact_digest(content: bytes) -> str:
    return "sha256:" + hashlib.sha256(content).hexdigest()


def artifact_facts(rows: Rows, digests: list[str]) -> list[dict[str, Any]]:
    """Digest, name, media type and size of those of ``digests`` stored here, read
    without their content."""
    found: list[dict[str, Any]] = []
    for at in range(0, len(digests), _CHUNK):
        chunk = digests[at : at + _CHUNK]
        found += [
            {"digest": d, "name": n, "media_type": m, "size": int(z)}
            for d, n, m, z in rows.rows("artifact_facts", digests=chunk)
        ]
    return found


def stored_artifact(rows: Rows, digest: str) -> StoredArtifact:
    """The artifact stored under ``digest``, its content checked against it."""
    found = rows.rows("artifact", digest=digest)
    if not found:
        raise ArtifactNotFound(f"no artifact {digest}")
    media_type, name, content = found[0]
    content = bytes(content)
    if artifact_digest(content) != digest:
        raise ArtifactError(f"artifact {digest} is damaged: its content hashes differently")
    return StoredArtifact(digest, media_type, name, content)
