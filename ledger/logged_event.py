"""What the ledger acknowledges for an accepted (or already stored) envelope: the event as
logged. (The HTTP reply that carries it is ``api``'s ``Receipt``.)"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from ledger.store.transparency_log import InclusionProof


@dataclass(frozen=True)
class LoggedEvent:
    """An admitted envelope's event as the log holds it: its place in the log, what it was
    admitted from, and its inclusion proof."""

    position: int
    aggregate_id: UUID
    version: int
    event: str
    subject_digest: str
    envelope_digest: str
    received_at: str
    duplicate: bool
    inclusion: InclusionProof | None = None
    signer: str = ""  # the key id whose signature admitted the event

    def to_json(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "aggregateId": str(self.aggregate_id),
            "version": self.version,
            "event": self.event,
            "subjectDigest": self.subject_digest,
            "envelopeDigest": self.envelope_digest,
            "receivedAt": self.received_at,
            "duplicate": self.duplicate,
            "signer": self.signer,
            "log": self.inclusion.to_json() if self.inclusion else None,
        }
