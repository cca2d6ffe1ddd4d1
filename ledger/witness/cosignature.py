"""C2SP ``cosignature/v1`` (https://c2sp.org/tlog-cosignature): a witness's timestamped Ed25519
signature over a checkpoint it has checked. Pure functions over text and bytes.

A cosignature is a note signature line ``"\u2014 " + name + " " + base64(key id || blob)``
where

- the key id is ``SHA-256(name || "\\n" || 0x04 || public key)[:4]`` (signature type 0x04, so
  a witness key never passes for a log's note key, type 0x01);
- the blob is an 8-byte big-endian POSIX timestamp followed by the 64-byte Ed25519 signature;
- the signed message is ``"cosignature/v1\\ntime <T>\\n"`` followed by the whole checkpoint
  body (origin, size, root and any extension lines, each ending in a newline).

Its meaning: at time T, the largest consistent tree the witness has seen for that origin has
that root. The message does not commit to the witness's name, so one key must not serve two
witnesses (the policy parser refuses that).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from domain.canonical import canonical_b64decode
from domain.errors import CanonicalizationError
from ledger.proofs.signed_note import (
    InvalidKeyName,
    MalformedVerifierKey,
    NoteSignature,
    Verifier,
    check_key_name,
    split_note,
)

__all__ = [
    "ALG_COSIGNATURE_V1",
    "Cosignature",
    "CosignerKey",
    "add_signature_lines",
    "cosigned_message",
    "cosigner_key_id",
    "parse_cosigner_key",
    "sign_cosignature",
    "signature_lines",
    "verify_cosignature",
]

ALG_COSIGNATURE_V1 = 0x04
"""Signature type identifier byte of timestamped Ed25519 checkpoint cosignatures."""

_HEADER = "cosignature/v1\n"
_KEY_SIZE = 32
_SIG_SIZE = 64
_TS_SIZE = 8
_MAX_TIMESTAMP = (1 << 63) - 1
_HEX8 = frozenset("0123456789abcdefABCDEF")


def cosigner_key_id(name: str, public_key: bytes) -> bytes:
    """``SHA-256(name || 0x0A || 0x04 || public key)[:4]``."""
    check_key_name(name)
    if len(public_key) != _KEY_SIZE:
        raise MalformedVerifierKey(
            f"Ed25519 public key is {len(public_key)} bytes, expected {_KEY_SIZE}"
        )
    data = name.encode("utf-8") + b"\n" + bytes([ALG_COSIGNATURE_V1]) + public_key
    return hashlib.sha256(data).digest()[:4]


@dataclass(frozen=True, slots=True)
class CosignerKey:
    """A witness's cosignature verifier: name, key id (type 0x04) and Ed25519 public key."""

    name: str
    key_id: bytes
    public_key: bytes

    @classmethod
    def from_public_key(cls, name: str, public_key: bytes) -> CosignerKey:
        return cls(name, cosigner_key_id(name, public_key), bytes(public_key))

    @classmethod
    def from_private_key(cls, name: str, private_key: Ed25519PrivateKey) -> CosignerKey:
        return cls.from_public_key(name, private_key.public_key().public_bytes_raw())

    def key_string(self) -> str:
        """The vkey ``<name>+<hex key id>+base64(0x04 || public key)``."""
        raw = bytes([ALG_COSIGNATURE_V1]) + self.public_key
        return f"{self.name}+{self.key_id.hex()}+{base64.b64encode(raw).decode('ascii')}"

    def matches(self, signature: NoteSignature) -> bool:
        """Whether a signature line is this key's (name and key id both match)."""
        return signature.name == self.name and signature.key_id == self.key_id

    def _note_verifier(self) -> Verifier:
        # The project's strict Ed25519 rule (weak keys and signatures refused) lives in
        # Verifier.verify; the key id there is irrelevant to a bare signature check.
        return Verifier(self.name, self.key_id, self.public_key)

    def verify_signature(self, message: bytes, signature: bytes) -> bool:
        return self._note_verifier().verify(message, signature)


def _split_vkey(text: str, what: str) -> tuple[str, bytes, bytes]:
    """A vkey's name, key id and decoded ``type || key``. Split at the first two ``+`` only:
    the base64 part may itself hold ``+``."""
    parts = text.split("+", 2)
    if len(parts) != 3:
        raise MalformedVerifierKey(f"{what} must be <name>+<hex key id>+<base64 key>, got {text!r}")
    name, kid_hex, key_b64 = parts
    try:
        check_key_name(name)
    except InvalidKeyName as exc:
        raise MalformedVerifierKey(f"{what} has an invalid name: {exc.message}") from exc
    if len(kid_hex) != 8 or not set(kid_hex) <= _HEX8:
        raise MalformedVerifierKey(f"{what} id must be 8 hex digits, got {kid_hex!r}")
    try:
        raw = canonical_b64decode(key_b64, what)
    except CanonicalizationError as exc:
        raise MalformedVerifierKey(exc.message) from None
    if len(raw) != 1 + _KEY_SIZE:
        raise MalformedVerifierKey(f"{what} {name} is not a type byte and a 32-byte Ed25519 key")
    return name, bytes.fromhex(kid_hex), raw


def _check_key_id(what: str, given: bytes, expected: bytes) -> None:
    if given != expected:
        raise MalformedVerifierKey(
            f"{what} id {given.hex()} does not match the key (expected {expected.hex()})"
        )


def parse_cosigner_key(text: str) -> CosignerKey:
    """Parse a cosigner vkey (signature type 0x04), checking its name, type and key id."""
    name, kid, raw = _split_vkey(text, "cosigner key")
    if raw[0] != ALG_COSIGNATURE_V1:
        raise MalformedVerifierKey(
            f"cosigner key {name} has signature type 0x{raw[0]:02x}; cosignature/v1 keys are 0x04"
        )
    key = CosignerKey.from_public_key(name, raw[1:])
    _check_key_id("cosigner key", kid, key.key_id)
    return key


def cosigned_message(checkpoint_text: str, timestamp: int) -> bytes:
    """``cosignature/v1\\ntime <timestamp>\\n`` followed by the checkpoint body."""
    _check_timestamp(timestamp)
    if not checkpoint_text.endswith("\n"):
        raise ValueError("a checkpoint body ends with a newline")
    return f"{_HEADER}time {timestamp}\n{checkpoint_text}".encode()


def _check_timestamp(timestamp: int) -> None:
    if isinstance(timestamp, bool) or not 0 <= timestamp <= _MAX_TIMESTAMP:
        raise ValueError(f"cosignature timestamp {timestamp!r} is outside 0..2^63-1")


@dataclass(frozen=True, slots=True)
class Cosignature:
    """One verified (or freshly made) ``cosignature/v1``: who, when, and the signature line."""

    name: str
    key_id: bytes
    timestamp: int
    signature: bytes

    def note_signature(self) -> NoteSignature:
        blob = self.timestamp.to_bytes(_TS_SIZE, "big") + self.signature
        return NoteSignature(self.name, self.key_id, blob)

    def line(self) -> str:
        """The note signature line, ending in a newline."""
        return self.note_signature().line()


def sign_cosignature(
    checkpoint_text: str, name: str, private_key: Ed25519PrivateKey, timestamp: int
) -> Cosignature:
    """Cosign a checkpoint body (the note text, without signature lines) at ``timestamp``."""
    key = CosignerKey.from_private_key(name, private_key)
    signature = private_key.sign(cosigned_message(checkpoint_text, timestamp))
    return Cosignature(name, key.key_id, timestamp, signature)


def verify_cosignature(
    checkpoint_text: str, signature: NoteSignature, key: CosignerKey
) -> Cosignature | None:
    """The cosignature if ``signature`` is ``key``'s valid ``cosignature/v1`` over the
    checkpoint body, else None. A line that is not ``key``'s (name or key id differ) is None
    too: callers match lines to keys first (:meth:`CosignerKey.matches`)."""
    if not key.matches(signature) or len(signature.signature) != _TS_SIZE + _SIG_SIZE:
        return None
    timestamp = int.from_bytes(signature.signature[:_TS_SIZE], "big")
    if timestamp > _MAX_TIMESTAMP:
        return None
    sig = signature.signature[_TS_SIZE:]
    if not key.verify_signature(cosigned_message(checkpoint_text, timestamp), sig):
        return None
    return Cosignature(key.name, key.key_id, timestamp, sig)


def signature_lines(checkpoint_text: str, body: str | bytes) -> list[NoteSignature]:
    """Parse a witness's reply (signature lines only) the way tlog-witness suggests: as the
    signature block of the checkpoint it answers. Raises ``MalformedNote``."""
    if isinstance(body, bytes | bytearray):
        body = bytes(body).decode("utf-8", errors="strict")
    _, signatures = split_note(checkpoint_text + "\n" + body)
    return signatures


def add_signature_lines(note: str, added: Iterable[NoteSignature]) -> str:
    """``note`` with ``added`` signature lines appended; a line by the same key (name and key
    id) already on the note is replaced, as a re-signature supersedes the old one."""
    text, existing = split_note(note)
    new = list(added)
    keys = {(s.name, s.key_id) for s in new}
    kept: Sequence[NoteSignature] = [s for s in existing if (s.name, s.key_id) not in keys]
    seen: set[tuple[str, bytes]] = set()
    lines: list[str] = [s.line() for s in kept]
    for s in new:
        if (s.name, s.key_id) not in seen:
            seen.add((s.name, s.key_id))
            lines.append(s.line())
    return text + "\n" + "".join(lines)
