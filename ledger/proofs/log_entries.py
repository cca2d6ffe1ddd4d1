"""What a log leaf commits to (DESIGN.md §6), shared by the sequencer and offline verifiers.

Leaf data = JCS of ``{position, aggregate, version, topic, envelope, receivedAt}``; the leaf
hash is RFC 6962's ``SHA-256(0x00 ‖ data)``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from domain.canonical import MAX_SAFE_INTEGER, canonical_json, plain_json
from domain.errors import CanonicalizationError
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
        fast = self._plain_data()
        if fast is not None:
            return fast
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

    def _plain_data(self) -> bytes | None:
        """``data()`` of an entry of exact plain types with a DSSE-shaped envelope (an object
        of ASCII keys whose values are strings, or lists of objects of ASCII keys and string
        values: every envelope the log writes), or None. Such a value is one ``canonical_json``
        hands its C encoder after walking it (``_shape``): plain, no float. Asked of every
        leaf a verifier or audit recomputes, the walk cost ~1.9 of its ~5 µs; this is the
        same test for this one shape, unrolled (property-tested against ``canonical_json``).
        Anything else, and a lone surrogate the encoder refuses, takes ``canonical_json``."""
        return self._plain_encoded(proved=False)

    def _plain_encoded(self, proved: bool) -> bytes | None:
        """``plain_json`` of the entry's fields, where they are of exact plain types and the
        envelope is an object whose types ``_dsse_shaped`` walks for (``proved``: its
        caller proved them, unwalked here); else, or for a lone surrogate, None."""
        position, version, envelope = self.position, self.version, self.envelope
        if not (
            type(position) is int
            and type(version) is int
            and -MAX_SAFE_INTEGER <= position <= MAX_SAFE_INTEGER
            and -MAX_SAFE_INTEGER <= version <= MAX_SAFE_INTEGER
            and type(self.aggregate) is str
            and type(self.topic) is str
            and type(self.received_at) is str
            and type(envelope) is dict
            and (proved or _dsse_shaped(envelope))
        ):
            return None
        try:
            return plain_json(
                {
                    "position": position,
                    "aggregate": self.aggregate,
                    "version": version,
                    "topic": self.topic,
                    "envelope": envelope,
                    "receivedAt": self.received_at,
                }
            )
        except CanonicalizationError:  # a lone surrogate: canonical_json words the refusal
            return None

    def leaf_hash(self) -> bytes:
        return leaf_hash(self.data())

    def shaped_leaf_hash(self) -> bytes | None:
        """``leaf_hash()`` of an entry whose envelope its caller knows to be of the types
        ``_dsse_shaped`` asks for (a ``DSSE_SHAPED`` decode proved them in C), or None:
        then ``leaf_hash()`` decides. What ``_dsse_shaped`` walks the keys for, that each is
        ASCII, the encoder's text shows at once: a key is written as itself (or escaped, in
        ASCII), so text that is all ASCII has ASCII keys. Not all ASCII (a key, or any
        string, spelled otherwise), a lone surrogate, or other fields of other types: None.
        The envelope's types are the caller's to prove and are NOT checked here: an envelope
        holding a float, an integer or a nested object gets a hash that is not
        ``leaf_hash()``'s. Only a reader that decoded the envelope as ``DSSE_SHAPED`` may
        call it (``ledger.verify.events.read_worker_event``). Property-tested against
        ``leaf_hash`` over such envelopes (tests/ledger/test_leaf_shaped_road.py)."""
        data = self._plain_encoded(proved=True)
        return leaf_hash(data) if data is not None and data.isascii() else None

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


# The types ``_dsse_shaped`` asks an envelope's values to be, as a msgspec type: a decoder
# of it proves them while it reads (``shaped_leaf_hash``); ASCII keys it cannot say.
DSSE_SHAPED = dict[str, str | list[dict[str, str]]]


def _dsse_shaped(envelope: dict[Any, Any]) -> bool:
    """Whether every key of ``envelope`` is an ASCII string and every value a string or a
    list of objects whose keys are ASCII strings and whose values are strings."""
    for key, value in envelope.items():
        if type(key) is not str or not key.isascii():
            return False
        if type(value) is str:
            continue
        if type(value) is not list:
            return False
        for item in value:
            if type(item) is not dict:
                return False
            for name, text in item.items():
                if type(name) is not str or not name.isascii() or type(text) is not str:
                    return False
    return True
