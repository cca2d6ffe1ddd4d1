"""C2SP signed notes (https://c2sp.org/signed-note) with Ed25519, and C2SP transparency-log
checkpoints (https://c2sp.org/tlog-checkpoint).

A signed note is UTF-8 text ending in a newline, a blank line, then one or more signature
lines ``"\u2014 " + key name + " " + base64(key id || signature) + "\\n"``. The key id is
the first four bytes of ``SHA-256(name || 0x0A || 0x01 || public key)`` for Ed25519.

:func:`open_note` accepts a note only if at least one signature by a known key verifies;
signatures by unknown keys (name and key id not both matching a known key) are kept but
ignored, and a known key's signature that fails to verify rejects the whole note.
Every rejection raises a :class:`NoteError` subclass carrying a stable ``code``.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Sequence

import msgspec
from cryptography.exceptions import InvalidSignature as _CryptoInvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from domain.canonical import canonical_b64decode
from domain.errors import CanonicalizationError
from ledger.proofs.errors import CodedError
from ledger.signing.ed25519_strict import key_weakness, signature_weakness

__all__ = [
    "ALG_ED25519",
    "MAX_SIGNATURES",
    "Checkpoint",
    "InvalidKeyName",
    "InvalidSignature",
    "MalformedCheckpoint",
    "MalformedNote",
    "MalformedVerifierKey",
    "NoteError",
    "NoteSignature",
    "TooManySignatures",
    "UnverifiedNote",
    "VerifiedNote",
    "Verifier",
    "check_key_name",
    "format_checkpoint",
    "key_id",
    "open_checkpoint",
    "open_note",
    "parse_checkpoint",
    "parse_verifier_key",
    "sign_note",
    "split_note",
    "verifier_key_string",
]

ALG_ED25519 = 0x01
"""Signature type identifier byte of Ed25519 note signatures."""

MAX_SIGNATURES = 100
"""Most signature lines :func:`open_note` accepts (the spec requires at least 16)."""

_SIG_PREFIX = "\u2014 "  # em dash, space
_ED25519_KEY_SIZE = 32
_KEY_ID_SIZE = 4
_ROOT_SIZE = 32
_MAX_TREE_SIZE = (1 << 64) - 1

# ASCII control characters other than newline are forbidden anywhere in a note.
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f]")
_HEX8 = re.compile(r"[0-9a-fA-F]{8}")
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,19}")


# --------------------------------------------------------------------------------------------
# Errors


class NoteError(CodedError, ValueError):
    """A note, key string or checkpoint was rejected. ``code`` is a stable reason."""

    code = "invalid-note"


class MalformedNote(NoteError):
    """The note is not well-formed (encoding, control characters, layout, base64...)."""

    code = "malformed-note"


class TooManySignatures(MalformedNote):
    """The note has more than :data:`MAX_SIGNATURES` signature lines."""

    code = "too-many-signatures"


class InvalidKeyName(NoteError):
    """A key name is empty or contains whitespace or ``+``."""

    code = "invalid-key-name"


class MalformedVerifierKey(NoteError):
    """A verifier key string is malformed, of an unsupported type, or its key id is wrong."""

    code = "malformed-verifier-key"


class InvalidSignature(NoteError):
    """A signature by a known key does not verify."""

    code = "invalid-signature"


class UnverifiedNote(NoteError):
    """No signature on the note is by a known key."""

    code = "unverified-note"


class MalformedCheckpoint(NoteError):
    """A checkpoint body does not follow c2sp.org/tlog-checkpoint."""

    code = "malformed-checkpoint"


# --------------------------------------------------------------------------------------------
# Helpers


def _b64decode_strict(value: str, what: str, error: type[NoteError]) -> bytes:
    """Standard, padded, canonical base64 (RFC 4648 §4) or ``error``."""
    try:
        return canonical_b64decode(value, what)
    except CanonicalizationError as exc:
        raise error(f"{exc.message}: {value!r}") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def check_key_name(name: str) -> None:
    """Raise :class:`InvalidKeyName` unless ``name`` is a valid note key name: non-empty,
    no Unicode whitespace, no ``+``, no control characters."""
    if not name:
        raise InvalidKeyName("key name is empty")
    for ch in name:
        if ch.isspace() or ch == "+" or ord(ch) < 0x20 or ord(ch) == 0x7F:
            raise InvalidKeyName(f"key name {name!r} contains the forbidden character {ch!r}")


def key_id(name: str, public_key: bytes) -> bytes:
    """Ed25519 note key id: ``SHA-256(name || 0x0A || 0x01 || public_key)[:4]``."""
    check_key_name(name)
    if len(public_key) != _ED25519_KEY_SIZE:
        raise MalformedVerifierKey(
            f"Ed25519 public key is {len(public_key)} bytes, expected {_ED25519_KEY_SIZE}"
        )
    data = name.encode("utf-8") + b"\n" + bytes([ALG_ED25519]) + public_key
    return hashlib.sha256(data).digest()[:_KEY_ID_SIZE]


def _raw_public_key(private_key: Ed25519PrivateKey) -> bytes:
    # Imported here: only signing needs it, and cryptography's key-file formats load its SSH
    # and cipher modules, which checking a note (`kernelindex verify`) never uses.
    from cryptography.hazmat.primitives.serialization import (  # noqa: PLC0415
        Encoding,
        PublicFormat,
    )

    return private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


# --------------------------------------------------------------------------------------------
# Verifiers


class Verifier(msgspec.Struct, frozen=True):
    """An Ed25519 note verifier: key name, key id and raw 32-byte public key."""

    name: str
    key_id: bytes
    public_key: bytes

    @classmethod
    def from_public_key(cls, name: str, public_key: bytes) -> Verifier:
        return cls(name, key_id(name, public_key), bytes(public_key))

    @classmethod
    def from_private_key(cls, name: str, private_key: Ed25519PrivateKey) -> Verifier:
        return cls.from_public_key(name, _raw_public_key(private_key))

    def verify(self, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is a valid Ed25519 signature of ``message`` by this key."""
        # The ledger's one rule for weak keys and signatures, as for every envelope.
        if signature_weakness(signature) is not None or key_weakness(self.public_key) is not None:
            return False
        try:
            Ed25519PublicKey.from_public_bytes(self.public_key).verify(signature, message)
        except (_CryptoInvalidSignature, ValueError):
            return False
        return True

    def key_string(self) -> str:
        """The verifier key string ``<name>+<hex key id>+<base64(0x01 || key)>``."""
        return verifier_key_string(self.name, self.public_key)


def verifier_key_string(name: str, public_key: bytes) -> str:
    """``<name>+<8 hex digits of the key id>+<base64(0x01 || public key)>``."""
    kid = key_id(name, public_key)
    return f"{name}+{kid.hex()}+{_b64(bytes([ALG_ED25519]) + public_key)}"


def parse_verifier_key(text: str) -> Verifier:
    """Parse a verifier key string, checking the name, the key type and the key id.

    Split at the first two ``+`` only: a name holds none, the key id is hex, and the base64
    key after them may itself hold ``+`` (about half of all keys do)."""
    parts = text.split("+", 2)
    if len(parts) != 3:
        raise MalformedVerifierKey(
            f"verifier key must be <name>+<hex key id>+<base64 key>, got {text!r}"
        )
    name, kid_hex, key_b64 = parts
    try:
        check_key_name(name)
    except InvalidKeyName as exc:
        raise MalformedVerifierKey(f"verifier key has an invalid name: {exc.message}") from exc
    if not _HEX8.fullmatch(kid_hex):
        raise MalformedVerifierKey(f"verifier key id must be 8 hex digits, got {kid_hex!r}")
    raw = _b64decode_strict(key_b64, "verifier key", MalformedVerifierKey)
    if not raw or raw[0] != ALG_ED25519:
        alg = f"0x{raw[0]:02x}" if raw else "missing"
        raise MalformedVerifierKey(f"unsupported verifier key type {alg} (only Ed25519, 0x01)")
    public_key = raw[1:]
    if len(public_key) != _ED25519_KEY_SIZE:
        raise MalformedVerifierKey(
            f"Ed25519 public key is {len(public_key)} bytes, expected {_ED25519_KEY_SIZE}"
        )
    expected = key_id(name, public_key)
    if bytes.fromhex(kid_hex) != expected:
        raise MalformedVerifierKey(
            f"verifier key id {kid_hex.lower()} does not match the key (expected {expected.hex()})"
        )
    try:
        Ed25519PublicKey.from_public_bytes(public_key)
    except ValueError as exc:  # pragma: no cover - every 32-byte string is accepted today
        raise MalformedVerifierKey(f"invalid Ed25519 public key: {exc}") from exc
    return Verifier(name, expected, public_key)


# --------------------------------------------------------------------------------------------
# Notes


class NoteSignature(msgspec.Struct, frozen=True):
    """One signature line: key name, 4-byte key id and the signature bytes after it."""

    name: str
    key_id: bytes
    signature: bytes

    def line(self) -> str:
        return f"{_SIG_PREFIX}{self.name} {_b64(self.key_id + self.signature)}\n"


class VerifiedNote(msgspec.Struct, frozen=True):
    """A note with at least one verified signature.

    ``text`` is the signed text (ending in a newline); ``signatures`` are the verified
    signatures by known keys, ``unverified`` those by unknown keys (ignored).
    """

    text: str
    signatures: tuple[NoteSignature, ...]
    unverified: tuple[NoteSignature, ...]


def _check_text(text: str) -> bytes:
    """Validate a note text; return its UTF-8 encoding."""
    if not text:
        raise MalformedNote("note text is empty")
    if not text.endswith("\n"):
        raise MalformedNote("note text must end with a newline")
    match = _CONTROL.search(text)
    if match:
        raise MalformedNote(
            f"note text contains the control character {match.group()!r} at {match.start()}"
        )
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MalformedNote(f"note text is not encodable as UTF-8: {exc}") from exc


def sign_note(text: str, name: str, private_key: Ed25519PrivateKey) -> str:
    """Sign ``text`` (non-empty, ending in a newline, no control characters other than
    newline) with an Ed25519 key named ``name``; return the signed note.

    The text may itself contain blank lines and lines starting with an em dash: a reader
    splits the signatures off at the *last* blank line, which is the one added here.
    """
    message = _check_text(text)
    check_key_name(name)
    kid = key_id(name, _raw_public_key(private_key))
    signature = NoteSignature(name, kid, private_key.sign(message))
    return text + "\n" + signature.line()


def _parse_signature_line(line: str, number: int) -> NoteSignature:
    if not line.startswith(_SIG_PREFIX):
        raise MalformedNote(
            f"signature line {number} does not start with an em dash and a space: {line!r}"
        )
    fields = line[len(_SIG_PREFIX) :].split(" ")
    if len(fields) != 2:
        raise MalformedNote(
            f"signature line {number} must be '\u2014 <key name> <base64>', got {line!r}"
        )
    name, sig_b64 = fields
    try:
        check_key_name(name)
    except InvalidKeyName as exc:
        raise MalformedNote(f"signature line {number}: {exc.message}") from exc
    raw = _b64decode_strict(sig_b64, f"signature line {number}", MalformedNote)
    if len(raw) <= _KEY_ID_SIZE:
        raise MalformedNote(
            f"signature line {number} holds {len(raw)} bytes, too short for a key id and "
            "a signature"
        )
    return NoteSignature(name, raw[:_KEY_ID_SIZE], raw[_KEY_ID_SIZE:])


def split_note(note: str | bytes) -> tuple[str, list[NoteSignature]]:
    """A signed note's text and its signature lines, parsed but not verified (the text is
    everything up to the last blank line). Raises :class:`MalformedNote` (or
    :class:`TooManySignatures`) for a malformed note."""
    if isinstance(note, bytes | bytearray | memoryview):
        try:
            note = bytes(note).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedNote(f"note is not valid UTF-8: {exc}") from exc
    match = _CONTROL.search(note)
    if match:
        raise MalformedNote(
            f"note contains the control character {match.group()!r} at {match.start()}"
        )
    if not note.endswith("\n"):
        raise MalformedNote("note must end with a newline")
    sep = note.rfind("\n\n")
    if sep < 0:
        raise MalformedNote("note has no blank line between the text and the signatures")
    text = note[: sep + 1]
    block = note[sep + 2 :]
    if not block:
        raise MalformedNote("note has no signature lines after the last blank line")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise TooManySignatures(
            f"note has {len(lines)} signature lines, at most {MAX_SIGNATURES} are accepted"
        )
    return text, [_parse_signature_line(line, i + 1) for i, line in enumerate(lines)]


def open_note(note: str | bytes, verifiers: Iterable[Verifier]) -> VerifiedNote:
    """Parse and verify a signed note.

    Raises :class:`MalformedNote` (or :class:`TooManySignatures`) for a malformed note,
    :class:`InvalidSignature` if a signature by a known key (same name *and* key id) does
    not verify, and :class:`UnverifiedNote` if no signature is by a known key.
    """
    text, signatures = split_note(note)
    known: dict[tuple[str, bytes], Verifier] = {(v.name, v.key_id): v for v in verifiers}
    message = text.encode("utf-8")
    verified: list[NoteSignature] = []
    unknown: list[NoteSignature] = []
    for sig in signatures:
        verifier = known.get((sig.name, sig.key_id))
        if verifier is None:
            unknown.append(sig)
            continue
        if not verifier.verify(message, sig.signature):
            raise InvalidSignature(
                f"signature by {sig.name}+{sig.key_id.hex()} does not verify over the note text"
            )
        if sig not in verified:
            verified.append(sig)
    if not verified:
        names = ", ".join(f"{s.name}+{s.key_id.hex()}" for s in unknown) or "none"
        raise UnverifiedNote(f"note has no signature by a known key (signed by: {names})")
    return VerifiedNote(text, tuple(verified), tuple(unknown))


# --------------------------------------------------------------------------------------------
# Checkpoints (c2sp.org/tlog-checkpoint)


class Checkpoint(msgspec.Struct, frozen=True):
    """A transparency-log checkpoint body: origin, tree size, root hash, extension lines."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def text(self) -> str:
        """The checkpoint note text (see :func:`format_checkpoint`)."""
        return format_checkpoint(self.origin, self.size, self.root, self.extensions)


def _check_line(value: str, what: str) -> None:
    if not value:
        raise MalformedCheckpoint(f"checkpoint {what} is empty")
    if "\n" in value or _CONTROL.search(value):
        raise MalformedCheckpoint(f"checkpoint {what} contains a control character: {value!r}")


def format_checkpoint(origin: str, size: int, root: bytes, extensions: Sequence[str] = ()) -> str:
    """``origin\\nsize\\nbase64(root)\\n`` followed by one line per extension."""
    _check_line(origin, "origin")
    if isinstance(size, bool) or not 0 <= size <= _MAX_TREE_SIZE:
        raise MalformedCheckpoint(f"checkpoint tree size {size!r} is out of range")
    if len(root) != _ROOT_SIZE:
        raise MalformedCheckpoint(f"checkpoint root is {len(root)} bytes, expected {_ROOT_SIZE}")
    for i, ext in enumerate(extensions):
        _check_line(ext, f"extension line {i + 1}")
    lines = [origin, str(size), _b64(root), *extensions]
    return "".join(line + "\n" for line in lines)


def parse_checkpoint(text: str) -> Checkpoint:
    """Strictly parse a checkpoint note text (as returned in :attr:`VerifiedNote.text`)."""
    if not text.endswith("\n"):
        raise MalformedCheckpoint("checkpoint text must end with a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise MalformedCheckpoint(
            f"checkpoint needs origin, size and root lines, got {len(lines)} line(s)"
        )
    origin, size_line, root_line, *extensions = lines
    _check_line(origin, "origin")
    if not _DECIMAL.fullmatch(size_line):
        raise MalformedCheckpoint(
            f"checkpoint tree size must be decimal without leading zeros, got {size_line!r}"
        )
    size = int(size_line)
    if size > _MAX_TREE_SIZE:
        raise MalformedCheckpoint(f"checkpoint tree size {size} does not fit in 64 bits")
    root = _b64decode_strict(root_line, "checkpoint root", MalformedCheckpoint)
    if len(root) != _ROOT_SIZE:
        raise MalformedCheckpoint(f"checkpoint root is {len(root)} bytes, expected {_ROOT_SIZE}")
    for i, ext in enumerate(extensions):
        _check_line(ext, f"extension line {i + 1}")
    return Checkpoint(origin, size, root, tuple(extensions))


def open_checkpoint(
    note: str | bytes, verifiers: Iterable[Verifier], origin: str | None = None
) -> tuple[Checkpoint, VerifiedNote]:
    """Verify a signed checkpoint note and parse its body; if ``origin`` is given, the
    checkpoint's origin line must equal it."""
    verified = open_note(note, verifiers)
    checkpoint = parse_checkpoint(verified.text)
    if origin is not None and checkpoint.origin != origin:
        raise MalformedCheckpoint(
            f"checkpoint origin {checkpoint.origin!r} is not the expected {origin!r}"
        )
    return checkpoint, verified
