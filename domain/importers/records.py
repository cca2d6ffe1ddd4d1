"""What an importer produces: one record per source result, or a rejection with a reason.

Mappers are pure functions from the source's raw bytes to these records; the ledger side
signs and appends them (``ledger.importing``). A record carries the exact bytes it was mapped
from, which are stored as a content-addressed artifact and named by digest in the ingestion
statement, so anyone can re-run the mapping and check it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Artifact:
    """Content the ledger keeps by digest (a solution's source, a raw source response)."""

    content: bytes
    media_type: str
    name: str = ""

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.content).hexdigest()


@dataclass(frozen=True)
class ImportRecord:
    """One run to ingest: its manifest set and where it came from."""

    source: str  # slug, e.g. "sol-execbench"; equals run.spec.sourceNative.source when present
    external_id: str  # the source's id of this result (stable across re-imports)
    manifests: dict[str, dict[str, Any]]  # run, protocol, environment, implementation?, workload?
    snapshot: Artifact  # the raw source document the record was mapped from
    artifacts: tuple[Artifact, ...] = field(default=())  # e.g. solution sources
    fetched_at: str | None = None  # RFC 3339, when the snapshot was fetched, if known


@dataclass(frozen=True)
class Rejection:
    """A source record that cannot be imported, and why. Nothing of it is written."""

    external_id: str | None
    reason: str


@dataclass(frozen=True)
class Skipped(Rejection):
    """Source input that yields no run by design, and why: a leaderboard listing, a folder
    with no traces, a submission repeated verbatim. Not an error; nothing of it is written.

    A subclass of :class:`Rejection` so that a consumer that does not know it still reports
    the reason; :class:`ledger.importing.Importer` counts it apart from the rejections.
    """
