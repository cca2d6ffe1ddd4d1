"""ledger.signing.keys: Ed25519 key generation, PEM files (0600, no overwrite, passphrase)
and key ids."""

from __future__ import annotations

import base64
import hashlib
import os
import pickle
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ledger.signing.ed25519_strict import L as ED25519_L
from ledger.signing.keys import (
    KeyFileError,
    PublicKey,
    SigningKey,
    WeakKeyError,
    key_id_of,
    load_public_key,
    save_public_key,
)

# RFC 8032 §7.1, TEST 1
RFC8032_SECRET = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
RFC8032_PUBLIC = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
RFC8032_SIGNATURE = bytes.fromhex(
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
    "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
)


@pytest.fixture
def umask() -> Iterator[None]:
    """Run with a permissive umask so the test sees the mode save() asks for."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def _private_raw(key: SigningKey) -> bytes:
    return key.private_key().private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )


def _rfc8032_key() -> SigningKey:
    return SigningKey(Ed25519PrivateKey.from_private_bytes(RFC8032_SECRET))


# --- key ids ------------------------------------------------------------------------------------


def test_key_id_is_sha256_of_raw_public_key() -> None:
    key = SigningKey.generate()
    raw = key.public.raw
    assert len(raw) == 32
    expected = "sha256:" + hashlib.sha256(raw).hexdigest()
    assert key_id_of(raw) == expected
    assert key.public.key_id == expected
    assert key.key_id == expected


def test_key_id_of_rfc8032_key() -> None:
    key = _rfc8032_key()
    assert key.public.raw == RFC8032_PUBLIC
    assert key.key_id == "sha256:" + hashlib.sha256(RFC8032_PUBLIC).hexdigest()
    assert key.sign(b"") == RFC8032_SIGNATURE
    assert key.public.verify(RFC8032_SIGNATURE, b"")
    assert not key.public.verify(RFC8032_SIGNATURE, b"\x00")


@pytest.mark.parametrize("length", [0, 31, 33, 64])
def test_key_id_of_wrong_length(length: int) -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        key_id_of(b"\x01" * length)
    with pytest.raises(ValueError, match="32 bytes"):
        PublicKey(b"\x01" * length)


def test_a_small_order_key_verifies_nothing_and_is_refused_by_name() -> None:
    """The identity point as a key: R = identity, S = 0 verifies for every message under
    OpenSSL (issue 32); the ledger's key verifies nothing, and ``strong`` names why. A key
    carried through pickle (the writer process) keeps the rule."""
    identity = PublicKey(b"\x01" + bytes(31))
    forged = identity.raw + bytes(32)
    Ed25519PublicKey.from_public_bytes(identity.raw).verify(forged, b"any message")
    assert not identity.verify(forged, b"any message")
    assert not pickle.loads(pickle.dumps(identity)).verify(forged, b"any message")
    with pytest.raises(WeakKeyError, match="small order") as info:
        identity.strong()
    assert info.value.code == "weak-key"
    honest = SigningKey.generate().public
    assert honest.strong() is honest and honest.weakness is None


def test_an_unreduced_s_verifies_nothing() -> None:
    """S + L is the same scalar; one signature has one spelling."""
    key = _rfc8032_key()
    s = int.from_bytes(RFC8032_SIGNATURE[32:], "little") + ED25519_L
    assert not key.public.verify(RFC8032_SIGNATURE[:32] + s.to_bytes(32, "little"), b"")


def test_distinct_keys_have_distinct_ids() -> None:
    ids = {SigningKey.generate().key_id for _ in range(20)}
    assert len(ids) == 20


def test_public_key_base64_round_trip() -> None:
    public = SigningKey.generate().public
    assert base64.b64decode(public.b64) == public.raw
    assert PublicKey.from_b64(public.b64) == public
    with pytest.raises(ValueError, match="base64"):
        PublicKey.from_b64("not base64!")
    with pytest.raises(ValueError):
        PublicKey.from_b64(base64.b64encode(b"\x00" * 31).decode())


# --- save / load --------------------------------------------------------------------------------


def test_generate_save_load_round_trip(tmp_path: Path) -> None:
    key = SigningKey.generate()
    path = tmp_path / "signer.pem"
    key.save(path)
    assert path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    loaded = SigningKey.load(path)
    assert loaded.key_id == key.key_id
    assert _private_raw(loaded) == _private_raw(key)
    message = b"payload"
    assert key.public.verify(loaded.sign(message), message)
    assert load_public_key(path) == key.public


@pytest.mark.usefixtures("umask")
def test_saved_key_file_is_mode_0600(tmp_path: Path) -> None:
    for name, passphrase in [("plain.pem", None), ("encrypted.pem", b"secret")]:
        path = tmp_path / name
        SigningKey.generate().save(path, passphrase)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, name


def test_saved_key_file_is_mode_0600_under_default_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        path = tmp_path / "k.pem"
        SigningKey.generate().save(path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_save_refuses_to_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "k.pem"
    first = SigningKey.generate()
    first.save(path)
    before = path.read_bytes()
    with pytest.raises(KeyFileError, match="already exists"):
        SigningKey.generate().save(path)
    assert path.read_bytes() == before
    assert SigningKey.load(path).key_id == first.key_id
    # nor any other existing file, nor through a symlink
    other = tmp_path / "notes.txt"
    other.write_text("keep me")
    with pytest.raises(KeyFileError, match="refusing to overwrite"):
        SigningKey.generate().save(other)
    assert other.read_text() == "keep me"
    link = tmp_path / "link.pem"
    link.symlink_to(other)
    with pytest.raises(KeyFileError):
        SigningKey.generate().save(link)
    assert other.read_text() == "keep me"
    dangling = tmp_path / "dangling.pem"
    dangling.symlink_to(tmp_path / "nowhere.pem")
    with pytest.raises(KeyFileError):
        SigningKey.generate().save(dangling)
    assert not (tmp_path / "nowhere.pem").exists()


def test_passphrase_protected_key(tmp_path: Path) -> None:
    key = SigningKey.generate()
    path = tmp_path / "enc.pem"
    key.save(path, b"correct horse")
    assert path.read_bytes().startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
    assert SigningKey.load(path, b"correct horse").key_id == key.key_id
    with pytest.raises(KeyFileError, match="encrypted and needs a passphrase") as info:
        SigningKey.load(path)
    assert str(path) in str(info.value)
    with pytest.raises(KeyFileError, match="needs a passphrase"):
        SigningKey.load(path, b"")
    with pytest.raises(KeyFileError, match="passphrase is wrong"):
        SigningKey.load(path, b"wrong horse")
    # the public key cannot be derived from an encrypted file without the passphrase
    with pytest.raises(KeyFileError, match="passphrase"):
        load_public_key(path)


def test_passphrase_given_for_an_unencrypted_key(tmp_path: Path) -> None:
    path = tmp_path / "plain.pem"
    SigningKey.generate().save(path)
    with pytest.raises(KeyFileError, match="not encrypted"):
        SigningKey.load(path, b"secret")


def test_encrypted_pem_does_not_contain_the_plain_key() -> None:
    key = SigningKey.generate()
    assert key.to_pem(b"pw") != key.to_pem()
    plain_body = b"".join(key.to_pem().splitlines()[1:-1])
    assert plain_body not in key.to_pem(b"pw")


@pytest.mark.parametrize(
    ("content", "word"),
    [
        (b"", "not a PEM private key"),
        (b"garbage", "not a PEM private key"),
        (b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "not a PEM"),
    ],
)
def test_unreadable_key_files(tmp_path: Path, content: bytes, word: str) -> None:
    path = tmp_path / "bad.pem"
    path.write_bytes(content)
    with pytest.raises(KeyFileError, match=word):
        SigningKey.load(path)


def test_missing_key_file(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="cannot read key file"):
        SigningKey.load(tmp_path / "absent.pem")
    with pytest.raises(KeyFileError, match="cannot read key file"):
        load_public_key(tmp_path / "absent.pem")


def test_non_ed25519_key_is_refused(tmp_path: Path) -> None:
    ec_key = ec.generate_private_key(ec.SECP256R1())
    path = tmp_path / "ec.pem"
    path.write_bytes(
        ec_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    with pytest.raises(KeyFileError, match="not an Ed25519 key"):
        SigningKey.load(path)
    public_path = tmp_path / "ec.pub.pem"
    public_path.write_bytes(
        ec_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    with pytest.raises(KeyFileError, match="not an Ed25519 key"):
        load_public_key(public_path)


def test_public_key_file_round_trip(tmp_path: Path) -> None:
    key = SigningKey.generate()
    path = tmp_path / "signer.pub.pem"
    save_public_key(path, key.public)
    assert path.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    assert load_public_key(path) == key.public
    assert load_public_key(path).key_id == key.key_id
    garbage = tmp_path / "garbage.pub.pem"
    garbage.write_bytes(b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
    with pytest.raises(KeyFileError, match="not a PEM public key"):
        load_public_key(garbage)


# --- no key material in repr --------------------------------------------------------------------


def test_repr_never_shows_key_material() -> None:
    key = _rfc8032_key()
    secret_forms = [
        RFC8032_SECRET.hex(),
        RFC8032_SECRET.hex()[:16],
        base64.b64encode(RFC8032_SECRET).decode(),
        repr(RFC8032_SECRET),
        repr(RFC8032_SECRET)[2:20],
        "BEGIN PRIVATE KEY",
    ]
    pem_body = b"".join(key.to_pem().splitlines()[1:-1]).decode()
    secret_forms.append(pem_body)
    for text in (repr(key), str(key), f"{key!r}", f"{key}", repr([key]), repr({"k": key})):
        for secret in secret_forms:
            assert secret not in text
        assert key.key_id in text
    assert repr(key) == f"SigningKey({key.key_id})"


def test_generated_key_repr_is_only_the_id() -> None:
    key = SigningKey.generate()
    raw = _private_raw(key)
    assert raw.hex() not in repr(key)
    assert base64.b64encode(raw).decode() not in repr(key)
    assert repr(key) == f"SigningKey({key.key_id})"
