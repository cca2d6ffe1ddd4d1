"""A signature verdict: one process's word that an envelope's signature verified, bound to
exactly what it checked, so another process (the writer) may take it instead of verifying.

The binding is (key id, sha256 of the public-key bytes verified against, the envelope's
signed digest, the signature bytes). The signed digest covers the payload type, payload and
key id but not the signature, so the signature itself is bound too: a verdict never vouches
for an envelope carrying other signature bytes than those checked. The bytes themselves, not
their sha256: 64 of them compare for less than hashing them again per envelope (~9 k
instructions in the writer, callgrind), and equal bytes bind at least as tightly as a hash.
Whoever takes a verdict compares it with the key *it* holds for that key id and with digests
it computes itself from the envelope it holds (``matches``); on any difference it verifies.
"""

from __future__ import annotations

import msgspec

from ledger.signing.dsse import Envelope, signed_by
from ledger.signing.keys import PublicKey

__all__ = ["SignatureVerdict"]


def _fresh_signed_digest(envelope: Envelope) -> str:
    # The envelope's cached value is this process's own, made from the payload it holds: an
    # envelope's pickle carries its fields, never its cache (``Envelope.__setstate__``
    # refuses one that tries). Read from the cache, the writer hashes the payload once per
    # envelope, not once here and once for admission's matching.
    return envelope.signed_digest


class SignatureVerdict(msgspec.Struct, frozen=True):
    """The envelope's one signature verified under the key whose bytes hash to ``key_sha256``
    (a key id is that hash: ``ledger.signing.keys.key_id_of``)."""

    keyid: str
    key_sha256: str
    signed_digest: str
    signature: bytes  # the envelope's one signature, as verified

    @classmethod
    def of(cls, envelope: Envelope, key: PublicKey) -> SignatureVerdict | None:
        """Verify ``envelope`` under ``key``: the verdict if it verifies, else None."""
        if not signed_by(envelope, key):
            return None
        return cls(
            envelope.keyid,
            key.key_id,
            _fresh_signed_digest(envelope),
            envelope.signatures[0][1],
        )

    def matches(self, envelope: Envelope, key: PublicKey) -> bool:
        """Whether this verdict is about exactly ``envelope`` signed by exactly ``key``."""
        return (
            self.keyid == envelope.keyid
            and self.key_sha256 == key.key_id  # the hash of the bytes this process holds
            and self.signed_digest == _fresh_signed_digest(envelope)
            and self.signature == envelope.signatures[0][1]
        )
