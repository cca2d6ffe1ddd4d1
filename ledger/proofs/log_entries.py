"""What a log leaf commits to (DESIGN.md §6), shared by the sequencer and offline verifiers.

Leaf data = JCS of ``{position, aggregate, version, topic, envelope, receivedAt}``; the leaf
hash is RFC 6962's ``SHA-256(0x00 ‖ data)``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from domain.canonical import canonical_json
from ledger.errors import CorruptRecordError
from ledger.proofs.hasher import leaf_hash


class LogEntry(msgspec.Struct, frozen=True):
    position: int
    aggregate: str
    version: int
    topic: str
    envelope: dict[str, Any]
    received_at: str

    def data(self) -> bytes:
        return canonical_json(
            {
                "position": self.position,
                "aggregate": self.aggregate,
                "version": self.version,
                "topic": self.topic,
                "envelope": self.envelope,
                "receivedAt": self.received_at,
            }
        )

    def leaf_hash(self) -> bytes:
        return leaf_hash(self.data())

    def data_given(self, envelope: bytes) -> bytes:
        """``data()`` where ``envelope`` is already the JCS bytes of ``self.envelope`` (the
        caller's to know: the writer has them from admission's envelope digest). JCS writes
        an object's members in key order, each as its key's and value's own JCS; these keys
        sort ``aggregate < envelope < position < receivedAt < topic < version``, so the
        envelope's bytes go between the first member and the rest (property-tested against
        ``data``). Spares re-canonicalising the envelope, most of an entry."""
        rest = canonical_json(
            {
                "position": self.position,
                "version": self.version,
                "topic": self.topic,
                "receivedAt": self.received_at,
            }
        )
        return b"".join(
            (
                b'{"aggregate":',
                canonical_json(self.aggregate),
                b',"envelope":',
                envelope,
                b",",
                memoryview(rest)[1:],
            )
        )

    @classmethod
    def from_stored(
        cls, position: int, aggregate: str, version: int, topic: str, state: bytes
    ) -> LogEntry:
        """Rebuild the entry from a stored event's bytes; fail closed if they do not decode."""
        try:
            stored = msgspec.json.decode(state)  # a third of json.loads' time
            envelope = stored["envelope"]
            received_at = stored["received_at"]
            if not isinstance(envelope, dict) or not isinstance(received_at, str):
                raise TypeError("envelope or received_at has the wrong type")
        except (msgspec.DecodeError, ValueError, KeyError, TypeError) as exc:
            raise CorruptRecordError(
                f"stored event at position {position} cannot be read: {exc}"
            ) from None
        return cls(position, aggregate, version, topic, envelope, received_at)
