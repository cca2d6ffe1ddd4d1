"""Only strong Ed25519 keys and signatures (issue 32, item 3).

Under OpenSSL (``cryptography``) the identity point, ``01`` then 31 zero bytes, is a public key
for which R = identity, S = 0 verifies for every message; libsodium (PyNaCl) refuses it. The
ledger follows libsodium (``ledger.signing.ed25519_strict``): registration refuses small-order
and non-canonical keys, and admission and every verifier refuse small-order R and unreduced S.
The property: whatever the ledger accepts verifies under both libraries, and whatever it
refuses both refuse, or it is one of the named edge cases.

The curve arithmetic a test needs to forge (a mixed-order key) is libsodium's, through PyNaCl;
the ledger itself does none.
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import nacl.bindings
import nacl.exceptions
import nacl.signing
import pytest
from cli_session import Cli
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from hypothesis import given, settings
from hypothesis import strategies as st
from served_app import Served, serve

from domain.statements import PAYLOAD_TYPE, Role
from domain.timestamps import format_time, utc_now
from ledger.application import Ledger
from ledger.home import LedgerHome
from ledger.proofs.signed_note import Verifier
from ledger.signing import keys as keys_module
from ledger.signing.authoring import (
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
)
from ledger.signing.dsse import SignatureError, pae
from ledger.signing.ed25519_strict import L, P, Weakness, key_weakness, signature_weakness
from ledger.signing.keys import PublicKey, SigningKey, WeakKeyError
from ledger.signing.trust import TrustRoot, TrustRootError
from ledger.verify import EXIT_CODES, Outcome
from tests.paths import VECTORS

SEED_RUN = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
SEED_NAME = "sol-submission-38823"

IDENTITY = b"\x01" + bytes(31)  # the neutral point: the issue's example key
ANY_MESSAGE_SIG = IDENTITY + bytes(32)  # R = identity, S = 0
SIGN_BIT = 1 << 255

# y of a point of order 8, written here apart from the module's own constant: the test below
# shows with OpenSSL that each point built from it is of small order.
Y8 = int("05fc536d880238b13933c6d305acdfd5f098eff289f4c345b027b2c28f95e826", 16)


def encode(y: int, negative_x: bool = False) -> bytes:
    return (y | (SIGN_BIT if negative_x else 0)).to_bytes(32, "little")


# The 8 points of order dividing 8, each in its canonical encoding: the identity (order 1),
# (0, -1) (order 2), (±sqrt(-1), 0) (order 4), and the four of order 8.
SMALL_ORDER_POINTS = [
    encode(1),
    encode(P - 1),
    encode(0),
    encode(0, True),
    encode(Y8),
    encode(Y8, True),
    encode(P - Y8),
    encode(P - Y8, True),
]
# Every other spelling of them below 2^256: x = 0 with the sign bit set, and y + p.
SMALL_ORDER_RESPELT = [
    encode(1, True),
    encode(P - 1, True),
    *(encode(P + d, s) for d in (0, 1) for s in (False, True)),
]


# --- the two libraries, and the ledger --------------------------------------------------------


def openssl_accepts(public: bytes, message: bytes, signature: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def libsodium_accepts(public: bytes, message: bytes, signature: bytes) -> bool:
    try:
        nacl.signing.VerifyKey(public).verify(message, signature)
    except (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError, ValueError):
        return False
    return True


def ledger_accepts(public: bytes, message: bytes, signature: bytes) -> bool:
    return PublicKey(public).verify(signature, message)


def named_weakness(public: bytes, signature: bytes) -> Weakness | None:
    return key_weakness(public) or signature_weakness(signature)


# --- forging, with integers and libsodium's point arithmetic ----------------------------------


def secret_scalar(seed: bytes) -> int:
    """RFC 8032 §5.1.5: the clamped scalar a of the key made from ``seed``."""
    h = bytearray(hashlib.sha512(seed).digest()[:32])
    h[0] &= 248
    h[31] &= 127
    h[31] |= 64
    return int.from_bytes(h, "little")


def challenge(r: bytes, public: bytes, message: bytes) -> int:
    return int.from_bytes(hashlib.sha512(r + public + message).digest(), "little") % L


def seed_of(key: SigningKey) -> bytes:
    return key.private_key().private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )


def identity_r_signature(key: SigningKey, message: bytes) -> bytes:
    """The key's holder signs with R = identity, S = h·a: S·B = h·A holds, so OpenSSL accepts;
    libsodium refuses a small-order R (a signer could otherwise make two "signatures")."""
    h = challenge(IDENTITY, key.public.raw, message)
    s = h * secret_scalar(seed_of(key)) % L
    return IDENTITY + s.to_bytes(32, "little")


def unreduced(signature: bytes, times: int = 1) -> bytes:
    """The same signature with S + times·L in place of S (the same scalar mod L)."""
    s = int.from_bytes(signature[32:], "little") + times * L
    return signature[:32] + s.to_bytes(32, "little")


def resigned(envelope: dict[str, Any], keyid: str, signature: bytes) -> dict[str, Any]:
    """The envelope with its one signature replaced (what a forger sends)."""
    forged = dict(envelope)
    forged["signatures"] = [{"keyid": keyid, "sig": base64.b64encode(signature).decode()}]
    return forged


def envelope_message(envelope: dict[str, Any]) -> bytes:
    return pae(PAYLOAD_TYPE, base64.b64decode(envelope["payload"]))


def weak_self_registration(now: datetime | None = None) -> dict[str, Any]:
    """The issue's example: the identity key registers itself as an attester, "signed"
    with R = identity, S = 0."""
    throwaway = SigningKey.generate()
    unsigned = key_registration_envelope(PublicKey(IDENTITY), [Role.ATTESTER], throwaway, now=now)
    return resigned(unsigned, PublicKey(IDENTITY).key_id, ANY_MESSAGE_SIG)


# --- the rule ---------------------------------------------------------------------------------


def test_each_blocklisted_point_is_of_small_order_and_fools_openssl() -> None:
    """Each of the 8 points signs every message whose challenge h is a multiple of its order
    with R = identity, S = 0 under OpenSSL: h·A = 0 for such h, so A is of small order, and 8
    distinct such points are the whole subgroup of order 8. libsodium and the ledger refuse
    them all, in every spelling."""
    assert len(set(SMALL_ORDER_POINTS)) == 8
    for point in SMALL_ORDER_POINTS:
        fooled = [
            m for m in (b"%d" % i for i in range(64)) if openssl_accepts(point, m, ANY_MESSAGE_SIG)
        ]
        assert fooled, point.hex()
        assert not libsodium_accepts(point, fooled[0], ANY_MESSAGE_SIG)
        assert not ledger_accepts(point, fooled[0], ANY_MESSAGE_SIG)
    for point in SMALL_ORDER_POINTS + SMALL_ORDER_RESPELT:
        assert key_weakness(point) is Weakness.SMALL_ORDER, point.hex()
        assert signature_weakness(point + bytes(32)) is Weakness.SMALL_ORDER, point.hex()


def test_the_rule_names_each_weakness_and_passes_honest_keys() -> None:
    honest = SigningKey.generate()
    signature = honest.sign(b"m")
    assert key_weakness(honest.public.raw) is None and signature_weakness(signature) is None
    assert key_weakness(encode(P + 3)) is Weakness.NON_CANONICAL
    assert key_weakness(encode(2**255 - 1, True)) is Weakness.NON_CANONICAL
    assert signature_weakness(encode(P + 3) + signature[32:]) is Weakness.NON_CANONICAL
    assert signature_weakness(unreduced(signature)) is Weakness.UNREDUCED_S
    assert signature_weakness(signature[:32] + (L - 1).to_bytes(32, "little")) is None
    assert signature_weakness(signature[:32] + L.to_bytes(32, "little")) is Weakness.UNREDUCED_S
    assert key_weakness(bytes(31)) is Weakness.LENGTH
    assert signature_weakness(signature[:63]) is Weakness.LENGTH


def test_a_small_order_r_made_by_the_key_holder_is_refused() -> None:
    """The holder of an honest key can make a second signature of the same message, R =
    identity: OpenSSL accepts it, libsodium and the ledger do not."""
    key = SigningKey.generate()
    forged = identity_r_signature(key, b"message")
    assert openssl_accepts(key.public.raw, b"message", forged)
    assert not libsodium_accepts(key.public.raw, b"message", forged)
    assert not key.public.verify(forged, b"message")


def test_the_checkpoint_verifier_holds_to_the_same_rule() -> None:
    """Signed notes (checkpoints) are checked by the same rule as envelopes."""
    key = SigningKey.generate()
    verifier = Verifier.from_public_key("example.com/log", key.public.raw)
    assert verifier.verify(b"note\n", key.sign(b"note\n"))
    assert not verifier.verify(b"note\n", identity_r_signature(key, b"note\n"))
    assert not verifier.verify(b"note\n", unreduced(key.sign(b"note\n")))
    weak = Verifier.from_public_key("example.com/log", IDENTITY)
    assert openssl_accepts(IDENTITY, b"note\n", ANY_MESSAGE_SIG)
    assert not weak.verify(b"note\n", ANY_MESSAGE_SIG)


def test_a_trust_root_naming_a_weak_key_is_refused() -> None:
    admin, log = SigningKey.generate(), SigningKey.generate()
    root = TrustRoot("test.kernelindex/log", (admin.public,), log.public, format_time(utc_now()))
    data = root.to_json()
    TrustRoot.from_json(data)
    for field in ("adminKeys", "logKey"):
        bad = json.loads(json.dumps(data))
        weak = {"keyId": PublicKey(IDENTITY).key_id, "publicKey": PublicKey(IDENTITY).b64}
        if field == "adminKeys":
            bad["adminKeys"] = [weak]
        else:
            bad["logKey"] = weak
        with pytest.raises(TrustRootError, match="small order"):
            TrustRoot.from_json(bad)


# --- admission --------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = utc_now()

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def ledger(db_url: str, seed_path: Path) -> tuple[Ledger, SigningKey, SigningKey]:
    """A ledger holding the seed run, with an admin and a self-registered attester."""
    clock = Clock()
    admin, ingester, log, attester = (SigningKey.generate() for _ in range(4))
    root = TrustRoot("test.kernelindex/log", (admin.public,), log.public, format_time(clock.now))
    led = Ledger(db_url, root, clock=clock)
    led.append(key_registration_envelope(admin.public, [Role.ADMIN], admin, now=clock.now))
    led.append(key_registration_envelope(ingester.public, [Role.INGESTER], admin, now=clock.now))
    led.append(key_registration_envelope(attester.public, [Role.ATTESTER], attester, now=clock.now))
    led.append(ingestion_envelope(json.loads(seed_path.read_text()), ingester, now=clock.now))
    return led, admin, attester


def refused(led: Ledger, envelope: dict[str, Any], error: type[Exception], words: str) -> None:
    before = led.store.last_position()
    with pytest.raises(error, match=words):
        led.append(envelope)
    assert led.store.last_position() == before, "a refused write must store nothing"


def test_the_issues_weak_self_registration_is_refused(
    ledger: tuple[Ledger, SigningKey, SigningKey],
) -> None:
    """The issue's example: today OpenSSL verifies the forged self-signature and the key is
    registered as an attester; the ledger refuses it by name."""
    led, _, _ = ledger
    envelope = weak_self_registration(led.clock())
    assert openssl_accepts(IDENTITY, envelope_message(envelope), ANY_MESSAGE_SIG)
    refused(led, envelope, WeakKeyError, "small order")
    assert led.key_state(PublicKey(IDENTITY).key_id) is None
    assert WeakKeyError.code == "weak-key"


def test_an_admin_cannot_register_a_weak_key_either(
    ledger: tuple[Ledger, SigningKey, SigningKey],
) -> None:
    led, admin, _ = ledger
    for raw, words in [
        (IDENTITY, "small order"),
        (encode(P - Y8, True), "small order"),  # of order 8
        (encode(P + 3), "not a canonical point encoding"),
    ]:
        envelope = key_registration_envelope(
            PublicKey(raw), [Role.ATTESTER], admin, now=led.clock()
        )
        refused(led, envelope, WeakKeyError, words)


def test_a_weak_signature_by_a_registered_key_is_refused(
    ledger: tuple[Ledger, SigningKey, SigningKey],
) -> None:
    """An attestation whose signature has R = identity (made by the key's holder: OpenSSL
    accepts it) or an unreduced S is refused as a bad signature."""
    led, _, attester = ledger
    honest = attestation_envelope(SEED_RUN, SEED_NAME, attester, type_="reproduced", body="b")
    message = envelope_message(honest)
    sig = base64.b64decode(honest["signatures"][0]["sig"])
    for weak, openssl in [
        (identity_r_signature(attester, message), True),
        (unreduced(sig), False),
        (unreduced(sig, 15), False),
    ]:
        assert openssl_accepts(attester.public.raw, message, weak) is openssl
        assert not libsodium_accepts(attester.public.raw, message, weak)
        refused(led, resigned(honest, attester.key_id, weak), SignatureError, "does not verify")
    led.append(honest)  # the honest signature of the same statement is admitted


def test_http_refuses_the_weak_self_registration_with_its_code(tmp_path: Path) -> None:
    served: Served
    for served in serve(LedgerHome.at(tmp_path / "home")):
        c = served.client
        size = c.get("/health").json()["treeSize"]
        reply = c.post("/v1/keys", json=weak_self_registration())
        assert reply.status_code == 422, reply.text
        body = reply.json()
        assert body["code"] == "weak-key" and body["type"].endswith("/weak-key")
        assert "small order" in body["detail"]
        assert c.get("/health").json()["treeSize"] == size
        assert c.get(f"/v1/keys/{PublicKey(IDENTITY).key_id}").status_code == 404


# --- offline verification ---------------------------------------------------------------------


def test_a_bundle_holding_a_weak_key_fails_verify(
    tmp_path: Path, db_url: str, seed_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ledger that admitted the identity key (as every ledger before this rule did) and an
    attestation "signed" by it exports a bundle that ``kernelindex verify`` fails, naming the
    key statement and the signature; the same bundle without them verifies."""
    cli = Cli(tmp_path / "home", db_url)
    cli("init")
    cli("ingest", seed_path)
    clean = tmp_path / "clean.bundle"
    cli("export", "--run", SEED_RUN[7:15], "-o", clean)
    led = LedgerHome.at(cli.home, cli.db_url).open()
    monkeypatch.setattr(keys_module, "key_weakness", lambda raw: None, raising=False)
    monkeypatch.setattr(keys_module, "signature_weakness", lambda sig: None, raising=False)
    led.append(weak_self_registration())
    honest = attestation_envelope(
        SEED_RUN, SEED_NAME, SigningKey.generate(), type_="reproduced", body="binds nothing"
    )
    led.append(resigned(honest, PublicKey(IDENTITY).key_id, ANY_MESSAGE_SIG))
    monkeypatch.undo()
    bundle = tmp_path / "weak.bundle"
    cli("export", "--run", SEED_RUN[7:15], "-o", bundle)
    root = cli.home / "trust-root.json"

    result = cli("verify", clean, "--trust-root", root, ok=True)
    assert "VERIFIED" in result.stdout
    result = cli("verify", bundle, "--trust-root", root, "--json", ok=False)
    assert result.exit_code == EXIT_CODES[Outcome.FAILED], result.output
    report = json.loads(result.stdout)
    assert report["outcome"] == "FAILED"
    failed = {(f["check"], f["reason"]) for f in report["findings"]}
    assert any("small order" in reason for _, reason in failed), failed
    assert any(check == "signature" for check, _ in failed), failed


# --- the published vectors --------------------------------------------------------------------

SPECCHECK = json.loads((VECTORS / "ed25519/speccheck/cases.json").read_text())
WYCHEPROOF = json.loads((VECTORS / "ed25519/wycheproof/ed25519_test.json").read_text())

# Per case of "Taming the many EdDSAs": whether the ledger accepts it, which part it refuses
# by name, and why. libsodium's own verdicts are the same: it accepts case 3 alone.
KEY, SIG = "key", "signature"
SPECCHECK_VERDICTS: list[tuple[bool, str | None, Weakness | None, str]] = [
    (False, KEY, Weakness.SMALL_ORDER, "small-order A and R, S = 0: OpenSSL accepts"),
    (False, KEY, Weakness.SMALL_ORDER, "small-order A, mixed R: OpenSSL accepts"),
    (False, SIG, Weakness.SMALL_ORDER, "mixed A, small-order R: OpenSSL accepts"),
    (True, None, None, "mixed A and R, valid cofactorless: both libraries accept"),
    (False, None, None, "valid only cofactored; both libraries check cofactorless"),
    (False, None, None, "valid only cofactored with a pre-reduced scalar"),
    (False, SIG, Weakness.UNREDUCED_S, "S > L"),
    (False, SIG, Weakness.UNREDUCED_S, "S >> L (the top bits set)"),
    (False, SIG, Weakness.SMALL_ORDER, "R a non-canonical spelling of a small-order point"),
    (False, SIG, Weakness.SMALL_ORDER, "as 8, the hash over R as spelt"),
    (False, KEY, Weakness.SMALL_ORDER, "A a non-canonical spelling of a small-order point"),
    (False, KEY, Weakness.SMALL_ORDER, "as 10, the hash over A as spelt: OpenSSL accepts"),
]


def test_the_speccheck_file_has_the_papers_twelve_cases() -> None:
    assert len(SPECCHECK) == len(SPECCHECK_VERDICTS) == 12


@pytest.mark.parametrize(
    ("case", "verdict"),
    list(enumerate(SPECCHECK_VERDICTS)),
    ids=[f"{i}-{v[3]}" for i, v in enumerate(SPECCHECK_VERDICTS)],
)
def test_speccheck_case(case: int, verdict: tuple[bool, str | None, Weakness | None, str]) -> None:
    accepted, part, weakness, _why = verdict
    vector = SPECCHECK[case]
    public, message, signature = (
        bytes.fromhex(vector[f]) for f in ("pub_key", "message", "signature")
    )
    assert ledger_accepts(public, message, signature) is accepted
    assert libsodium_accepts(public, message, signature) is accepted
    found = {KEY: key_weakness(public), SIG: signature_weakness(signature)}
    if part is None:
        assert found == {KEY: None, SIG: None}
    else:
        assert found[part] is weakness
    if accepted or part is None:  # where the ledger names nothing, OpenSSL agrees too
        assert openssl_accepts(public, message, signature) is accepted


WYCHEPROOF_CASES = [
    (group["publicKey"]["pk"], test)
    for group in WYCHEPROOF["testGroups"]
    for test in group["tests"]
]


def test_the_wycheproof_file_has_its_stated_count() -> None:
    assert len(WYCHEPROOF_CASES) == WYCHEPROOF["numberOfTests"] == 151


@pytest.mark.parametrize(
    ("public_hex", "vector"),
    WYCHEPROOF_CASES,
    ids=[f"tc{t['tcId']}-{t['result']}" for _, t in WYCHEPROOF_CASES],
)
def test_wycheproof_vector(public_hex: str, vector: dict[str, Any]) -> None:
    """Each vector's own ``result`` is the expected verdict and its ``comment`` and ``flags``
    say why; on every one the ledger and both libraries agree."""
    public, message, signature = (
        bytes.fromhex(public_hex),
        bytes.fromhex(vector["msg"]),
        bytes.fromhex(vector["sig"]),
    )
    expected = vector["result"] == "valid"
    assert ledger_accepts(public, message, signature) is expected, vector["comment"]
    assert openssl_accepts(public, message, signature) is expected
    assert libsodium_accepts(public, message, signature) is expected
    if "SignatureMalleability" in vector["flags"]:  # S + L: refused by name
        assert signature_weakness(signature) is Weakness.UNREDUCED_S


# --- the property -----------------------------------------------------------------------------


def _point_add(a: bytes, b: bytes) -> bytes:
    return bytes(nacl.bindings.crypto_core_ed25519_add(a, b))


def _base_times(scalar: int) -> bytes:
    return bytes(
        nacl.bindings.crypto_scalarmult_ed25519_base_noclamp(scalar.to_bytes(32, "little"))
    )


ANY_SPELLING = st.sampled_from(SMALL_ORDER_POINTS + SMALL_ORDER_RESPELT)
NON_CANONICAL = st.builds(encode, st.integers(min_value=P, max_value=2**255 - 1), st.booleans())


@st.composite
def key_message_signature(draw: st.DrawFn) -> tuple[bytes, bytes, bytes, str]:
    """A key, a message and a signature: honest, or mutated the ways verifiers disagree on."""
    seed = draw(st.binary(min_size=32, max_size=32))
    key = SigningKey(Ed25519PrivateKey.from_private_bytes(seed))
    public = key.public.raw
    message = draw(st.binary(max_size=48))
    signature = key.sign(message)
    how = draw(
        st.sampled_from(
            [
                "honest",
                "S + kL",
                "R = identity by the holder",
                "small-order R",
                "non-canonical R",
                "small-order key",
                "non-canonical key",
                "mixed-order key",
                "mixed-order key and R",
                "flipped bit",
            ]
        )
    )
    if how == "S + kL":
        s = int.from_bytes(signature[32:], "little")
        k = draw(st.integers(min_value=1, max_value=(2**256 - 1 - s) // L))
        signature = unreduced(signature, k)
    elif how == "R = identity by the holder":
        signature = identity_r_signature(key, message)
    elif how == "small-order R":
        signature = draw(ANY_SPELLING) + signature[32:]
    elif how == "non-canonical R":
        signature = draw(NON_CANONICAL) + signature[32:]
    elif how == "small-order key":
        public = draw(ANY_SPELLING)
        small_r = draw(st.sampled_from([draw(ANY_SPELLING), signature[:32]]))
        s = draw(st.sampled_from([0, draw(st.integers(min_value=0, max_value=L - 1))]))
        signature = small_r + s.to_bytes(32, "little")
    elif how == "non-canonical key":
        public = draw(NON_CANONICAL)
    elif how.startswith("mixed-order key"):
        # A' = aB + T and R' = rB (+ T'): valid cofactorless iff h·T = -T', which both
        # libraries check alike.
        torsion = draw(st.sampled_from(SMALL_ORDER_POINTS[1:]))
        public = _point_add(public, torsion)
        r = draw(st.integers(min_value=1, max_value=L - 1))
        big_r = _base_times(r)
        if how.endswith("and R"):
            big_r = _point_add(big_r, draw(st.sampled_from(SMALL_ORDER_POINTS[1:])))
        h = challenge(big_r, public, message)
        s = (r + h * secret_scalar(seed)) % L
        signature = big_r + s.to_bytes(32, "little")
    elif how == "flipped bit":
        where = draw(st.sampled_from(["key", "signature"]))
        if where == "key":
            bit = draw(st.integers(min_value=0, max_value=255))
            public = (int.from_bytes(public, "little") ^ (1 << bit)).to_bytes(32, "little")
        else:
            bit = draw(st.integers(min_value=0, max_value=511))
            flipped = int.from_bytes(signature, "little") ^ (1 << bit)
            signature = flipped.to_bytes(64, "little")
    return public, message, signature, how


@settings(max_examples=300, deadline=None)
@given(key_message_signature())
def test_what_the_ledger_accepts_both_libraries_accept(
    case: tuple[bytes, bytes, bytes, str],
) -> None:
    """Every signature the ledger accepts verifies under OpenSSL and libsodium; every one it
    refuses both refuse, or it names the edge case it refuses; where it names none, the three
    agree."""
    public, message, signature, how = case
    ledger = ledger_accepts(public, message, signature)
    openssl = openssl_accepts(public, message, signature)
    libsodium = libsodium_accepts(public, message, signature)
    named = named_weakness(public, signature)
    if ledger:
        assert openssl and libsodium, how
        assert named is None, how
    else:
        assert (not openssl and not libsodium) or named is not None, how
    if named is None:
        assert ledger == openssl == libsodium, how
    if how == "honest":
        assert ledger
