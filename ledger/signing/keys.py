"""Ed25519 signing keys: generation, PEM files, and key ids.

Key id = ``sha256:`` + hex SHA-256 of the raw 32-byte public key. Private keys are written
with mode 0600 and never overwrite an existing file.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
from pathlib import Path

import msgspec
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from domain.canonical import canonical_b64decode
from domain.errors import ManifestError
from ledger.signing.ed25519_strict import Weakness, key_weakness, signature_weakness

# cryptography's key-file formats (``serialization``, which loads its SSH and cipher modules)
# are imported by the functions that read or write key files: verifying a signature, all that
# `kernelindex verify` does with keys, needs none of them (start-up, issue 33).

PUBLIC_KEY_BYTES = 32


class KeyFileError(Exception):
    """A key file cannot be read, written or decrypted; the message says why."""


class WeakKeyError(ManifestError):
    """A public key the ledger will not trust: of small order or not canonically encoded
    (``ledger.signing.ed25519_strict``). Refused where a key enters (registration, trust
    roots); a key stored before this rule signs nothing (``PublicKey.verify``)."""

    code = "weak-key"


def key_id_of(public_raw: bytes) -> str:
    if len(public_raw) != PUBLIC_KEY_BYTES:
        raise ValueError(
            f"an Ed25519 public key is {PUBLIC_KEY_BYTES} bytes, got {len(public_raw)}"
        )
    return "sha256:" + hashlib.sha256(public_raw).hexdigest()


# dict=True: room for the cached properties; a Struct pickles its fields alone (the loaded
# key object, which does not pickle, stays behind).
class PublicKey(msgspec.Struct, frozen=True, dict=True):
    """A verification key with its derived id."""

    raw: bytes

    def __post_init__(self) -> None:
        if len(self.raw) != PUBLIC_KEY_BYTES:
            raise ValueError(f"an Ed25519 public key is {PUBLIC_KEY_BYTES} bytes")

    @functools.cached_property
    def key_id(self) -> str:
        # Asked for on every signature check (``signed_by``): hashed once per key object.
        return key_id_of(self.raw)

    @property
    def b64(self) -> str:
        return base64.b64encode(self.raw).decode("ascii")

    @classmethod
    def from_b64(cls, text: str) -> PublicKey:
        return cls(canonical_b64decode(text, "public key"))

    @functools.cached_property
    def weakness(self) -> Weakness | None:
        """Why no signature verifies under this key (``ed25519_strict``), or None."""
        return key_weakness(self.raw)

    def strong(self) -> PublicKey:
        """This key, if the ledger may trust it; else raise WeakKeyError saying why."""
        if self.weakness is not None:
            raise WeakKeyError(f"public key {self.b64} {self.weakness}")
        return self

    @functools.cached_property
    def _loaded(self) -> Ed25519PublicKey:
        # Loading costs about a tenth of a verification; keys verify many signatures.
        return Ed25519PublicKey.from_public_bytes(self.raw)

    def verify(self, signature: bytes, message: bytes) -> bool:
        """Whether ``signature`` is this key's over ``message``, under libsodium's strict
        rules whichever library checks it: a weak key or signature verifies nothing."""
        if self.weakness is not None or signature_weakness(signature) is not None:
            return False
        try:
            self._loaded.verify(signature, message)
        except InvalidSignature:
            return False
        return True


class SigningKey(msgspec.Struct, frozen=True):
    """An Ed25519 private key. ``repr`` never shows key material."""

    _private: Ed25519PrivateKey

    @classmethod
    def generate(cls) -> SigningKey:
        return cls(Ed25519PrivateKey.generate())

    @property
    def public(self) -> PublicKey:
        from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

        raw = self._private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        return PublicKey(raw)

    @property
    def key_id(self) -> str:
        return self.public.key_id

    def sign(self, message: bytes) -> bytes:
        return self._private.sign(message)

    def private_key(self) -> Ed25519PrivateKey:
        return self._private

    def __repr__(self) -> str:
        return f"SigningKey({self.key_id})"

    def to_pem(self, passphrase: bytes | None = None) -> bytes:
        from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(passphrase)
            if passphrase
            else serialization.NoEncryption()
        )
        return self._private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )

    def save(self, path: Path, passphrase: bytes | None = None) -> None:
        """Write the key as PKCS#8 PEM, mode 0600; refuses to overwrite."""
        data = self.to_pem(passphrase)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise KeyFileError(f"{path} already exists; refusing to overwrite a key") from None
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)

    @classmethod
    def load(cls, path: Path, passphrase: bytes | None = None) -> SigningKey:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise KeyFileError(f"cannot read key file {path}: {exc.strerror}") from None
        return cls.from_pem(data, passphrase, source=str(path))

    @classmethod
    def from_pem(
        cls, data: bytes, passphrase: bytes | None = None, source: str = "key"
    ) -> SigningKey:
        from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

        try:
            key = serialization.load_pem_private_key(data, password=passphrase or None)
        except TypeError:
            raise KeyFileError(
                f"{source} is encrypted and needs a passphrase"
                if not passphrase
                else f"{source} is not encrypted; do not pass a passphrase"
            ) from None
        except ValueError:
            raise KeyFileError(
                f"{source} is not a PEM private key, or the passphrase is wrong"
            ) from None
        if not isinstance(key, Ed25519PrivateKey):
            raise KeyFileError(f"{source} is not an Ed25519 key")
        return cls(key)


def save_public_key(path: Path, key: PublicKey) -> None:
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    pem = Ed25519PublicKey.from_public_bytes(key.raw).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    path.write_bytes(pem)


def load_public_key(path: Path) -> PublicKey:
    """Read a public key from SubjectPublicKeyInfo PEM, or derive it from a private key PEM."""
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise KeyFileError(f"cannot read key file {path}: {exc.strerror}") from None
    if b"PRIVATE KEY" in data:
        return SigningKey.from_pem(data, source=str(path)).public
    try:
        key = serialization.load_pem_public_key(data)
    except ValueError:
        raise KeyFileError(f"{path} is not a PEM public key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"{path} is not an Ed25519 key")
    return PublicKey(key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))
