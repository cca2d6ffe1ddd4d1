"""cosignature/v1 (c2sp.org/tlog-cosignature): the key id, the signed message, the 8-byte
timestamp + 64-byte signature encoding, and verification, each checked against the spec's
formulas written out here with hashlib and the raw Ed25519 primitive."""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ledger.proofs.signed_note import (
    MalformedVerifierKey,
    NoteSignature,
    parse_verifier_key,
    split_note,
    verifier_key_string,
)
from ledger.signing.keys import SigningKey
from ledger.witness.cosignature import (
    CosignerKey,
    add_signature_lines,
    cosigned_message,
    parse_cosigner_key,
    sign_cosignature,
    signature_lines,
    verify_cosignature,
)
from tests.witness.witness_logs import ToyLog

NAME = "witness.example.com/w1"
TEXT = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"


def test_the_key_id_and_vkey_follow_the_spec() -> None:
    key = SigningKey.generate()
    pk = key.public.raw
    cosigner = CosignerKey.from_public_key(NAME, pk)
    assert cosigner.key_id == hashlib.sha256(NAME.encode() + b"\n\x04" + pk).digest()[:4]
    vkey = cosigner.key_string()
    name, kid, b64 = vkey.split("+", 2)
    assert (name, kid) == (NAME, cosigner.key_id.hex())
    assert base64.b64decode(b64) == b"\x04" + pk
    assert parse_cosigner_key(vkey) == cosigner


def test_the_signed_message_is_the_header_the_time_and_the_checkpoint_body() -> None:
    assert cosigned_message(TEXT, 1679315147) == (
        b"cosignature/v1\ntime 1679315147\n"
        b"example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    )
    with pytest.raises(ValueError, match="2\\^63"):
        cosigned_message(TEXT, 1 << 63)


def test_a_cosignature_line_is_key_id_timestamp_and_signature() -> None:
    key = SigningKey.generate()
    made = sign_cosignature(TEXT + "extension line\n", NAME, key.private_key(), 1700000000)
    line = made.line()
    assert line.startswith(f"\u2014 {NAME} ") and line.endswith("\n")
    raw = base64.b64decode(line.split(" ")[2])
    assert len(raw) == 4 + 8 + 64
    assert raw[:4] == CosignerKey.from_public_key(NAME, key.public.raw).key_id
    assert int.from_bytes(raw[4:12], "big") == 1700000000
    message = b"cosignature/v1\ntime 1700000000\n" + (TEXT + "extension line\n").encode()
    Ed25519PublicKey.from_public_bytes(key.public.raw).verify(raw[12:], message)


def test_verification_accepts_only_the_same_checkpoint_time_and_key() -> None:
    key, other = SigningKey.generate(), SigningKey.generate()
    cosigner = CosignerKey.from_private_key(NAME, key.private_key())
    sig = sign_cosignature(TEXT, NAME, key.private_key(), 1700000000).note_signature()
    found = verify_cosignature(TEXT, sig, cosigner)
    assert found is not None and found.timestamp == 1700000000
    later = (1700000001).to_bytes(8, "big") + sig.signature[8:]
    flipped = sig.signature[:-1] + bytes([sig.signature[-1] ^ 1])
    assert verify_cosignature(TEXT, NoteSignature(NAME, sig.key_id, later), cosigner) is None
    assert verify_cosignature(TEXT, NoteSignature(NAME, sig.key_id, flipped), cosigner) is None
    assert verify_cosignature(TEXT.replace("20852163", "20852164"), sig, cosigner) is None
    impostor = CosignerKey(NAME, cosigner.key_id, other.public.raw)
    assert verify_cosignature(TEXT, sig, impostor) is None
    renamed = CosignerKey.from_public_key("witness.example.com/w2", key.public.raw)
    assert verify_cosignature(TEXT, sig, renamed) is None  # another key id: not its line


def test_vkeys_of_the_wrong_type_or_key_id_are_refused() -> None:
    key = SigningKey.generate()
    note_vkey = verifier_key_string(NAME, key.public.raw)  # type 0x01
    with pytest.raises(MalformedVerifierKey, match="0x04"):
        parse_cosigner_key(note_vkey)
    cosigner_vkey = CosignerKey.from_public_key(NAME, key.public.raw).key_string()
    with pytest.raises(MalformedVerifierKey, match="0x01"):
        parse_verifier_key(cosigner_vkey)
    name, kid, b64 = cosigner_vkey.split("+", 2)
    with pytest.raises(MalformedVerifierKey, match="does not match"):
        parse_cosigner_key(f"{name}+{(int(kid, 16) ^ 1):08x}+{b64}")
    with pytest.raises(MalformedVerifierKey, match="8 hex digits"):
        parse_cosigner_key(f"{name}+{kid}0+{b64}")


def test_vkeys_whose_base64_holds_a_plus_are_read() -> None:
    keys = [SigningKey.generate() for _ in range(40)]
    with_plus = [k for k in keys if "+" in verifier_key_string(NAME, k.public.raw).split("+", 2)[2]]
    assert with_plus  # about half of all keys
    for k in with_plus:
        assert (
            parse_verifier_key(verifier_key_string(NAME, k.public.raw)).public_key == k.public.raw
        )
        cosigner = CosignerKey.from_public_key(NAME, k.public.raw)
        assert parse_cosigner_key(cosigner.key_string()) == cosigner


def test_reply_lines_are_parsed_against_the_checkpoint_and_added_to_the_note() -> None:
    log = ToyLog.grown("example.org/log", 3)
    note = log.note()
    text, _ = split_note(note)
    w1, w2 = SigningKey.generate(), SigningKey.generate()
    first = sign_cosignature(text, NAME, w1.private_key(), 1700000000)
    again = sign_cosignature(text, NAME, w1.private_key(), 1700000005)
    second = sign_cosignature(text, "witness.example.com/w2", w2.private_key(), 1700000001)
    reply = first.line() + second.line()
    parsed = signature_lines(text, reply.encode())
    assert parsed == [first.note_signature(), second.note_signature()]
    cosigned = add_signature_lines(note, parsed)
    assert cosigned == note + reply
    # A newer cosignature by the same key replaces the older one.
    replaced = add_signature_lines(cosigned, [again.note_signature()])
    assert replaced == note + second.line() + again.line()
