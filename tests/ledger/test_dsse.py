"""ledger.signing.dsse: PAE, DSSE envelope parsing, signing and fail-closed verification
(DESIGN.md §5)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from domain.canonical import canonical_json
from domain.statements import PAYLOAD_TYPE, PredicateType, make_statement
from ledger.signing.dsse import (
    Envelope,
    EnvelopeError,
    SignatureError,
    UnknownKeyError,
    pae,
    parse_envelope,
    sign_envelope,
    verify_envelope,
)
from ledger.signing.keys import PublicKey, SigningKey

RUN_DIGEST = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@pytest.fixture(scope="module")
def key() -> SigningKey:
    return SigningKey.generate()


@pytest.fixture(scope="module")
def other_key() -> SigningKey:
    return SigningKey.generate()


@pytest.fixture(scope="module")
def statement() -> dict[str, Any]:
    return make_statement(
        "sol-submission-38823",
        RUN_DIGEST,
        PredicateType.LIFECYCLE,
        {"action": "retract", "reason": "harness bug — numbers invalid"},
    )


def resolver(*keys: SigningKey) -> Any:
    table = {k.key_id: k.public for k in keys}
    return table.get


# --- PAE ----------------------------------------------------------------------------------------


def test_pae_spec_vector() -> None:
    assert (
        pae("http://example.com/HelloWorld", b"hello world")
        == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_pae_lengths_are_bytes_not_characters() -> None:
    assert pae("t", b"") == b"DSSEv1 1 t 0 "
    assert pae("é", "µ".encode()) == "DSSEv1 2 é 2 µ".encode()
    assert pae(PAYLOAD_TYPE, b"{}") == b"DSSEv1 28 application/vnd.in-toto+json 2 {}"


def test_pae_is_unambiguous() -> None:
    # Moving bytes between type and body changes the encoding.
    assert pae("a b", b"c") != pae("a", b"b c")


# --- signing and verifying ----------------------------------------------------------------------


def test_sign_verify_round_trip(key: SigningKey, statement: dict[str, Any]) -> None:
    raw = sign_envelope(statement, key)
    assert set(raw) == {"payloadType", "payload", "signatures"}
    assert raw["payloadType"] == PAYLOAD_TYPE
    assert raw["signatures"][0]["keyid"] == key.key_id
    # the envelope survives a JSON round trip (it is what gets stored)
    envelope = parse_envelope(json.loads(json.dumps(raw)))
    assert isinstance(envelope, Envelope)
    assert envelope.payload == canonical_json(statement)
    assert envelope.statement_json() == statement
    assert envelope.statement().predicateType == PredicateType.LIFECYCLE
    assert envelope.statement().subject_digest == RUN_DIGEST
    assert verify_envelope(envelope, resolver(key)) == key.key_id
    # the signature is plain Ed25519 over PAE(payloadType, payload)
    sig = base64.b64decode(raw["signatures"][0]["sig"])
    assert len(sig) == 64
    assert key.public.verify(sig, pae(PAYLOAD_TYPE, envelope.payload))


def test_signing_is_deterministic_and_digest_stable(
    key: SigningKey, statement: dict[str, Any]
) -> None:
    a = sign_envelope(statement, key)
    b = sign_envelope(dict(reversed(list(statement.items()))), key)
    assert a == b  # JCS payload + deterministic Ed25519
    assert parse_envelope(a).digest == parse_envelope(b).digest
    assert parse_envelope(a).digest.startswith("sha256:")


def _flip_payload(raw: dict[str, Any], index: int, mask: int = 0x01) -> dict[str, Any]:
    payload = bytearray(base64.b64decode(raw["payload"]))
    payload[index] ^= mask
    return {**raw, "payload": b64(bytes(payload))}


def _flip_sig(raw: dict[str, Any], index: int, mask: int = 0x01) -> dict[str, Any]:
    sig = bytearray(base64.b64decode(raw["signatures"][0]["sig"]))
    sig[index] ^= mask
    return {**raw, "signatures": [{**raw["signatures"][0], "sig": b64(bytes(sig))}]}


def test_flipping_any_payload_byte_breaks_verification(
    key: SigningKey, statement: dict[str, Any]
) -> None:
    raw = sign_envelope(statement, key)
    length = len(base64.b64decode(raw["payload"]))
    for index in range(length):
        for mask in (0x01, 0x80):
            envelope = parse_envelope(_flip_payload(raw, index, mask))
            with pytest.raises(SignatureError, match="does not verify"):
                verify_envelope(envelope, resolver(key))


def test_flipping_any_signature_byte_breaks_verification(
    key: SigningKey, statement: dict[str, Any]
) -> None:
    raw = sign_envelope(statement, key)
    for index in range(64):
        for mask in (0x01, 0x80):
            envelope = parse_envelope(_flip_sig(raw, index, mask))
            with pytest.raises(SignatureError, match="does not verify"):
                verify_envelope(envelope, resolver(key))


def test_truncated_or_extended_signature_fails(key: SigningKey, statement: dict[str, Any]) -> None:
    raw = sign_envelope(statement, key)
    sig = base64.b64decode(raw["signatures"][0]["sig"])
    for bad in (sig[:-1], sig + b"\x00", b""):
        tampered = {**raw, "signatures": [{"keyid": key.key_id, "sig": b64(bad)}]}
        with pytest.raises(SignatureError):
            verify_envelope(parse_envelope(tampered), resolver(key))


def test_a_small_order_key_signs_nothing(statement: dict[str, Any]) -> None:
    """Under the identity point, R = identity and S = 0 pass OpenSSL for any payload; the
    ledger's one signature check refuses them (issue 32)."""
    identity = PublicKey(b"\x01" + bytes(31))
    env = sign_envelope(statement, SigningKey.generate())
    env["signatures"] = [{"keyid": identity.key_id, "sig": b64(identity.raw + bytes(32))}]
    with pytest.raises(SignatureError, match="does not verify"):
        verify_envelope(parse_envelope(env), {identity.key_id: identity}.get)


def test_unknown_key_is_refused(
    key: SigningKey, other_key: SigningKey, statement: dict[str, Any]
) -> None:
    envelope = parse_envelope(sign_envelope(statement, key))
    with pytest.raises(UnknownKeyError, match="registered key") as info:
        verify_envelope(envelope, resolver(other_key))
    assert key.key_id in str(info.value)
    assert info.value.code == "unknown-key"
    with pytest.raises(UnknownKeyError):
        verify_envelope(envelope, lambda _kid: None)


def test_unknown_key_error_is_a_signature_error() -> None:
    assert issubclass(UnknownKeyError, SignatureError)


def test_resolver_returning_another_key_for_the_id_is_refused(
    key: SigningKey, other_key: SigningKey, statement: dict[str, Any]
) -> None:
    envelope = parse_envelope(sign_envelope(statement, key))
    with pytest.raises(SignatureError, match="does not verify") as info:
        verify_envelope(envelope, lambda _kid: other_key.public)
    assert not isinstance(info.value, UnknownKeyError)
    assert info.value.code == "bad-signature"


def test_keyid_is_only_a_hint_and_cannot_redirect_trust(
    key: SigningKey, other_key: SigningKey, statement: dict[str, Any]
) -> None:
    raw = sign_envelope(statement, key)
    # The signature names other_key, which is trusted, but was made by key.
    relabelled = {**raw, "signatures": [{**raw["signatures"][0], "keyid": other_key.key_id}]}
    with pytest.raises(SignatureError, match="does not verify"):
        verify_envelope(parse_envelope(relabelled), resolver(key, other_key))
    # An empty keyid names nothing.
    anonymous = {**raw, "signatures": [{"keyid": "", "sig": raw["signatures"][0]["sig"]}]}
    with pytest.raises(UnknownKeyError, match=r"\(empty\)"):
        verify_envelope(parse_envelope(anonymous), resolver(key))
    # No keyid at all: DSSE allows it; this ledger's profile (and its API) requires one.
    no_keyid = {**raw, "signatures": [{"sig": raw["signatures"][0]["sig"]}]}
    with pytest.raises(EnvelopeError, match="keyid must be a string naming the signing key"):
        parse_envelope(no_keyid)


def test_envelopes_carry_exactly_one_signature(
    key: SigningKey, other_key: SigningKey, statement: dict[str, Any]
) -> None:
    """With one signature there is no choice of which one counts, and nobody can make a new
    envelope of someone's statement by adding, dropping or reordering signatures."""
    raw = sign_envelope(statement, key)
    good = raw["signatures"][0]
    by_other = sign_envelope(statement, other_key)["signatures"][0]
    bad_known = {"keyid": key.key_id, "sig": b64(b"\x00" * 64)}
    unknown = {"keyid": "sha256:" + "0" * 64, "sig": b64(b"\x01" * 64)}
    for sigs in (
        [unknown, good],
        [bad_known, good],
        [by_other, good],
        [good, by_other],
        [good, good],
        [good] * 8,
    ):
        with pytest.raises(EnvelopeError, match="exactly one"):
            parse_envelope({**raw, "signatures": sigs})
    assert verify_envelope(parse_envelope(raw), resolver(key)) == key.key_id
    # the one signature by a known key that does not verify: SignatureError, not UnknownKey
    with pytest.raises(SignatureError) as info:
        verify_envelope(parse_envelope({**raw, "signatures": [bad_known]}), resolver(key))
    assert not isinstance(info.value, UnknownKeyError)
    with pytest.raises(UnknownKeyError):
        verify_envelope(parse_envelope({**raw, "signatures": [unknown]}), resolver(key))


def test_verification_uses_the_envelope_payload_type(
    key: SigningKey, statement: dict[str, Any]
) -> None:
    # A signature over the same payload with another payloadType must not verify.
    payload = canonical_json(statement)
    sig = key.sign(pae("application/json", payload))
    raw = {
        "payloadType": PAYLOAD_TYPE,
        "payload": b64(payload),
        "signatures": [{"keyid": key.key_id, "sig": b64(sig)}],
    }
    with pytest.raises(SignatureError):
        verify_envelope(parse_envelope(raw), resolver(key))
    # and a raw signature over the payload without PAE does not verify either
    raw["signatures"] = [{"keyid": key.key_id, "sig": b64(key.sign(payload))}]
    with pytest.raises(SignatureError):
        verify_envelope(parse_envelope(raw), resolver(key))


# --- parse_envelope rejections ------------------------------------------------------------------


@pytest.fixture(scope="module")
def good(key: SigningKey, statement: dict[str, Any]) -> dict[str, Any]:
    return sign_envelope(statement, key)


def _sig(raw: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**raw, "signatures": [{**raw["signatures"][0], **changes}]}


@pytest.mark.parametrize(
    ("mutate", "word"),
    [
        (lambda e: {**e, "payload": "not base64!"}, "payload is not valid standard base64"),
        (lambda e: {**e, "payload": e["payload"][:-1]}, "payload is not valid"),
        (lambda e: {**e, "payload": e["payload"] + "\n"}, "payload is not valid"),
        (lambda e: {**e, "payload": "e30"}, "payload is not valid"),  # missing padding
        (lambda e: {**e, "payload": "-_-_"}, "payload is not valid"),  # URL-safe alphabet
        (lambda e: {**e, "payload": "e31="}, "payload is not canonical base64"),  # stray bits
        (lambda e: {**e, "payload": "QR=="}, "payload is not canonical base64"),
        (lambda e: {**e, "payload": "é"}, "payload is not valid"),
        (lambda e: {**e, "payload": 123}, "payload must be a base64 string"),
        (lambda e: {k: v for k, v in e.items() if k != "payload"}, "payload must be"),
        (lambda e: _sig(e, sig="%%%"), r"signatures\[0\]\.sig is not valid"),
        (lambda e: _sig(e, sig=e["signatures"][0]["sig"][:-2] + "B="), "not canonical base64"),
        (lambda e: _sig(e, sig=None), r"signatures\[0\]\.sig must be a base64 string"),
        (lambda e: {**e, "payloadType": "application/json"}, "payloadType must be"),
        (lambda e: {**e, "payloadType": "application/vnd.in-toto+JSON"}, "payloadType must be"),
        (lambda e: {k: v for k, v in e.items() if k != "payloadType"}, "payloadType must be"),
        (lambda e: {**e, "extra": 1}, "unknown fields: extra"),
        (lambda e: {**e, "payloadtype": PAYLOAD_TYPE}, "unknown fields: payloadtype"),
        (lambda e: _sig(e, cert="x"), "keyid and sig only"),
        (lambda e: {**e, "signatures": []}, "needs exactly one signature"),
        (
            lambda e: {k: v for k, v in e.items() if k != "signatures"},
            "needs exactly one signature",
        ),
        (lambda e: {**e, "signatures": e["signatures"][0]}, "needs exactly one signature"),
        (lambda e: {**e, "signatures": ["sig"]}, "keyid and sig only"),
        (lambda e: _sig(e, keyid=7), r"keyid must be a string"),
        (lambda e: {**e, "signatures": e["signatures"] * 2}, "2 signatures; .* exactly one"),
    ],
)
def test_parse_envelope_rejects(good: dict[str, Any], mutate: Any, word: str) -> None:
    with pytest.raises(EnvelopeError, match=word):
        parse_envelope(mutate(good))


@pytest.mark.parametrize("value", [None, [], "envelope", 1])
def test_parse_envelope_rejects_non_objects(value: Any) -> None:
    with pytest.raises(EnvelopeError, match="JSON object"):
        parse_envelope(value)


@pytest.mark.parametrize(
    "payload",
    [b"not json", b"\xff\xfe", b'{"a": 1', b""],
    ids=["text", "utf8", "truncated", "empty"],
)
def test_non_json_payload_is_refused_when_read(key: SigningKey, payload: bytes) -> None:
    sig = key.sign(pae(PAYLOAD_TYPE, payload))
    raw = {
        "payloadType": PAYLOAD_TYPE,
        "payload": b64(payload),
        "signatures": [{"keyid": key.key_id, "sig": b64(sig)}],
    }
    try:
        envelope = parse_envelope(raw)
    except EnvelopeError as exc:
        assert "payload" in str(exc)
        return
    with pytest.raises(EnvelopeError, match="payload is not a UTF-8 JSON document"):
        envelope.statement_json()


def test_envelope_keeps_the_raw_object(good: dict[str, Any]) -> None:
    envelope = parse_envelope(good)
    assert envelope.raw == good
    assert envelope.payload_type == PAYLOAD_TYPE
    assert envelope.signatures[0][0] == good["signatures"][0]["keyid"]


def test_public_key_from_id_round_trip(key: SigningKey) -> None:
    assert PublicKey.from_b64(key.public.b64).key_id == key.key_id


def test_an_envelope_carrying_a_statement_over_one_mebibyte_is_read(key: SigningKey) -> None:
    """A statement may carry manifests of up to 1 MiB each: its payload (and the envelope,
    in base64) exceed the 1 MiB document limit, and are read up to their own limits."""
    from domain.documents import parse_json
    from ledger.signing.dsse import MAX_ENVELOPE_BYTES, MAX_PAYLOAD_BYTES

    payload = json.dumps({"padding": "x" * (1024 * 1024 + 100_000)}).encode()
    assert 1024 * 1024 < len(payload) < MAX_PAYLOAD_BYTES
    sig = key.sign(pae(PAYLOAD_TYPE, payload))
    body = json.dumps(
        {
            "payloadType": PAYLOAD_TYPE,
            "payload": b64(payload),
            "signatures": [{"keyid": key.key_id, "sig": b64(sig)}],
        }
    ).encode()
    assert len(body) < MAX_ENVELOPE_BYTES
    envelope = parse_envelope(parse_json(body, max_bytes=MAX_ENVELOPE_BYTES))
    assert envelope.statement_json()["padding"].startswith("xxx")

    too_big = json.dumps({"padding": "x" * MAX_PAYLOAD_BYTES}).encode()
    sig = key.sign(pae(PAYLOAD_TYPE, too_big))
    raw = {
        "payloadType": PAYLOAD_TYPE,
        "payload": b64(too_big),
        "signatures": [{"keyid": key.key_id, "sig": b64(sig)}],
    }
    with pytest.raises(EnvelopeError, match="limit"):
        parse_envelope(raw).statement_json()


def test_the_signed_digest_is_the_same_however_it_is_reached(
    key: SigningKey, other_key: SigningKey, statement: dict[str, Any]
) -> None:
    """The memo of ``stored_signed_digest`` answers with the pure function's value: for a
    parsed envelope, a stored copy of it, the same statement signed by another key, and
    after the memo forgot everything."""
    from ledger.signing import dsse

    envelopes = [sign_envelope(statement, k) for k in (key, other_key)]
    expected = [
        dsse.signed_digest(
            e["payloadType"], base64.b64decode(e["payload"]), e["signatures"][0]["keyid"]
        )
        for e in envelopes
    ]
    assert expected[0] != expected[1]
    for raw, digest in zip(envelopes, expected, strict=True):
        assert dsse.stored_signed_digest(dict(raw)) == digest  # before any parse
        assert parse_envelope(raw).signed_digest == digest
        assert dsse.stored_signed_digest(json.loads(json.dumps(raw))) == digest
        dsse._SIGNED_DIGESTS.clear()
        assert dsse.stored_signed_digest(raw) == digest
