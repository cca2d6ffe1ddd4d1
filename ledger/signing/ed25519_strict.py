"""Which Ed25519 public keys and signatures the ledger accepts: libsodium's strict rules.

RFC 8032 leaves verifiers room, and libraries use it differently ("Taming the many EdDSAs",
Chalkias, Garillot and Nikolaenko, 2020). OpenSSL (``cryptography``) and Go accept a public
key of small order: under the identity point (``01`` then 31 zero bytes) the signature R =
identity, S = 0 verifies for *every* message, so the key signs nothing in particular.
libsodium refuses it. This module is the ledger's one rule, checked before any signature is
(``PublicKey.verify``), so that what the ledger accepts verifies under both libraries:

- a public key, and a signature's R, must be the canonical encoding of a point (y < p) that is
  not of small order (the 8 points of order 1, 2, 4 or 8, in any encoding);
- a signature's S must be reduced (S < L).

Points of *mixed* order (a prime-order point plus a small-order one) are accepted, as
libsodium's verification accepts them: both libraries check the same cofactorless equation
over the same bytes, so they agree on such keys (the speccheck vectors, case 3).

Nothing here is curve arithmetic: a blocklist of y-coordinates and integer comparisons over
the encodings, cheap next to the verification they guard (tests/ledger/test_ed25519_strict.py
holds both libraries to this).
"""

from __future__ import annotations

from enum import StrEnum

P = 2**255 - 19  # the field's prime
L = 2**252 + 27742317777372353535851937790883648493  # the prime order of the base point
_Y_BITS = (1 << 255) - 1  # an encoding's low 255 bits are y; the top bit is the sign of x

# y of a point of order 8 (the other order-8 points have y = P - _Y8, and either sign of x).
_Y8 = 0x05FC536D880238B13933C6D305ACDFD5F098EFF289F4C345B027B2C28F95E826
# The y-coordinates of the 8 small-order points (identity: 1; order 2: P - 1; order 4: 0;
# order 8: _Y8 and P - _Y8), and the two that also have a non-canonical spelling below 2^255
# (P + 0 and P + 1): libsodium's blocklist, compared without the sign bit as it does.
_SMALL_ORDER_Y = frozenset({0, 1, P - 1, _Y8, P - _Y8, P, P + 1})

KEY_BYTES = 32
SIGNATURE_BYTES = 64


class Weakness(StrEnum):
    """Why a key or a signature is refused: each a named edge case of Ed25519 verification."""

    LENGTH = "has the wrong length"
    SMALL_ORDER = "is a point of small order (signatures under it bind to no message)"
    NON_CANONICAL = "is not a canonical point encoding (y is not below 2^255 - 19)"
    UNREDUCED_S = "has S not reduced below the group order L"


def _point_weakness(encoded: bytes) -> Weakness | None:
    y = int.from_bytes(encoded, "little") & _Y_BITS
    if y in _SMALL_ORDER_Y:
        return Weakness.SMALL_ORDER
    if y >= P:
        return Weakness.NON_CANONICAL
    return None


def key_weakness(public_key: bytes) -> Weakness | None:
    """Why the ledger refuses this raw public key, or None if it accepts it."""
    if len(public_key) != KEY_BYTES:
        return Weakness.LENGTH
    return _point_weakness(public_key)


def signature_weakness(signature: bytes) -> Weakness | None:
    """Why the ledger refuses this raw signature (R || S) whatever it signs, or None."""
    if len(signature) != SIGNATURE_BYTES:
        return Weakness.LENGTH
    if int.from_bytes(signature[32:], "little") >= L:
        return Weakness.UNREDUCED_S
    return _point_weakness(signature[:32])
