"""What the ledger acknowledges for an accepted (or already stored) envelope: the event as
logged. (The HTTP reply that carries it is ``api``'s ``Receipt``.)"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID, SafeUUID

from ledger.ids import uuid_of_int
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

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled as one flat tuple of its fields, the id as its integer and the proof as its
        fields (the writer process pickles every receipt it answers a worker with): the
        default pickles two instance dicts by name and calls UUID's Python-level
        ``__getstate__``, ~2x the bytes and instructions. What is not of the exact types the
        ledger makes goes as itself. Equal once loaded: tests/ledger/test_receipt_pickle.py."""
        aggregate: object = self.aggregate_id
        if type(aggregate) is UUID and aggregate.is_safe is SafeUUID.unknown:
            aggregate = aggregate.int
        proof: object = self.inclusion
        if type(proof) is InclusionProof:
            proof = (proof.leaf_index, proof.tree_size, proof.root, proof.hashes)
        fields = (self.position, aggregate, self.version, self.event, self.subject_digest)
        rest = (self.envelope_digest, self.received_at, self.duplicate, proof, self.signer)
        return _logged_event, (fields + rest,)


def _logged_event(fields: tuple[Any, ...]) -> LoggedEvent:
    """A pickled ``LoggedEvent`` loaded (``LoggedEvent.__reduce__``)."""
    position, aggregate, version, event, subject, envelope, received, duplicate, proof, signer = (
        fields
    )
    return LoggedEvent(
        position,
        # The int of a UUID pickled here: in range (a hand-made pickle runs code anyway).
        uuid_of_int(aggregate) if isinstance(aggregate, int) else aggregate,
        version,
        event,
        subject,
        envelope,
        received,
        duplicate,
        InclusionProof(*proof) if isinstance(proof, tuple) else proof,
        signer,
    )
