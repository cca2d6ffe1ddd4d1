"""What a worker sends the writer process (``ledger.checked_wire``), on SQLite and PostgreSQL:
a checked envelope arrives as the very Checked the worker made, in msgpack; the writer reads
the envelope's bytes from the JSON object it stores, so a verdict is matched against those
bytes, never against what a worker says they were; anything else arrives pickled, as before."""

from __future__ import annotations

import base64
import dataclasses
import pickle
from typing import Any

import msgspec
import pytest

from domain.canonical import canonical_json
from domain.errors import DomainError
from domain.statements import PredicateType, Role
from ledger.admission_checks import Checked, KnownKeys, check_stateless
from ledger.checked_wire import TAG, VOUCHED, decode_request, encode_request
from ledger.logged_event import LoggedEvent
from ledger.signing.authoring import (
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
)
from ledger.signing.dsse import PAYLOAD_TYPE, Envelope, SignatureError, pae, parse_envelope
from ledger.signing.keys import SigningKey
from ledger.signing.verdict import SignatureVerdict
from ledger.timing import install
from tests.ledger.test_admission import SEED_NAME, World, ingest_seed, world  # noqa: F401
from tests.ledger.test_worker_checks import (  # noqa: F401
    Verifications,
    over_the_wire,
    verifications,
)


def checked_by_worker(w: World, raw: dict[str, Any]) -> Checked:
    return check_stateless(raw, KnownKeys(w.ledger.key_states))


def test_a_checked_envelope_arrives_as_the_worker_checked_it(world: World) -> None:
    run = ingest_seed(world)
    for raw in (
        ingestion_envelope(world.seed, world.ingester, now=world.clock.now, external_id="w"),
        attestation_envelope(
            run, SEED_NAME, world.attester, type_="note", body="n", now=world.clock.now
        ),
    ):
        sent = checked_by_worker(world, raw)
        body = encode_request(3, sent)
        assert body.startswith(TAG), "msgpack, not a pickle"
        assert len(body) < len(pickle.dumps((3, sent))), "smaller than the pickle it replaces"
        number, got = decode_request(body)  # type: ignore[misc]
        assert number == 3 and isinstance(got, Checked)
        assert got.envelope.raw == raw
        assert (got.envelope.payload, got.envelope.signatures) == (
            sent.envelope.payload,
            sent.envelope.signatures,
        )
        assert (got.statement, got.predicate, got.run, got.verdict, got.bad_signature) == (
            sent.statement,
            sent.predicate,
            sent.run,
            sent.verdict,
            sent.bad_signature,
        )


def test_what_the_wire_carries_is_admitted_with_the_verdict_taken(
    world: World, verifications: Verifications
) -> None:
    raw = ingestion_envelope(world.seed, world.ingester, now=world.clock.now)
    sent = over_the_wire(checked_by_worker(world, raw))  # the worker's Ed25519, not counted
    install(verifications)
    [result] = world.ledger.append_many([sent])
    install(None)
    assert isinstance(result, LoggedEvent) and not result.duplicate
    assert verifications.count == 0, "the worker's verdict, matched, spares the writer Ed25519"
    [again] = world.ledger.append_many([raw])
    assert isinstance(again, LoggedEvent) and again.duplicate
    assert again.position == result.position


def test_a_verdict_is_matched_against_the_envelope_bytes_the_writer_stores(
    world: World, verifications: Verifications
) -> None:
    """A worker whose envelope holds the payload it checked but another JSON object (the
    one that would be stored): the writer reads the payload and signature from that object
    itself, the verdict does not match them, and it verifies them: refused. (A pickled
    envelope brought its payload along, and the verdict matched it.)"""
    genuine = checked_by_worker(world, ingestion_envelope(world.seed, world.ingester))
    assert genuine.verdict is not None
    statement = parse_envelope(genuine.envelope.raw).statement_json()
    statement["predicate"]["externalId"] = "not what was signed"
    payload = canonical_json(statement)
    swapped = {**genuine.envelope.raw, "payload": base64.b64encode(payload).decode("ascii")}
    # The checked payload kept (``made``, the JCS bytes of ``raw``, goes with it).
    envelope = msgspec.structs.replace(genuine.envelope, raw=swapped, made=None)
    forged = dataclasses.replace(genuine, envelope=envelope)
    before = world.count()
    install(verifications)
    [result] = world.ledger.append_many([over_the_wire(forged)])
    install(None)
    assert isinstance(result, SignatureError), result
    assert verifications.count == 1, "the writer verified it itself"
    assert world.count() == before, "a refused write stores nothing"


def test_a_signature_swapped_beside_a_verdict_is_verified_by_the_writer(
    world: World, verifications: Verifications
) -> None:
    raw = ingestion_envelope(world.seed, world.ingester, now=world.clock.now)
    genuine = checked_by_worker(world, raw)
    envelope = parse_envelope(raw)
    other = SigningKey.generate().sign(pae(PAYLOAD_TYPE, envelope.payload))
    swapped = {**raw, "signatures": [{**raw["signatures"][0], "sig": base64.b64encode(other)}]}
    swapped["signatures"][0]["sig"] = swapped["signatures"][0]["sig"].decode("ascii")
    forged = dataclasses.replace(
        genuine, envelope=msgspec.structs.replace(envelope, raw=swapped, made=None)
    )
    install(verifications)
    [result] = world.ledger.append_many([over_the_wire(forged)])
    install(None)
    assert isinstance(result, SignatureError), result
    assert verifications.count == 1


def test_a_refusal_kept_for_a_later_step_goes_pickled_and_keeps_its_words(world: World) -> None:
    run = ingest_seed(world)
    raw = attestation_envelope(
        run, SEED_NAME, world.attester, type_="note", body="n", now=world.clock.now
    )
    statement = parse_envelope(raw).statement_json()
    statement["predicate"]["type"] = 17
    payload = canonical_json(statement)
    raw["payload"] = base64.b64encode(payload).decode("ascii")
    signature = world.attester.sign(pae(PAYLOAD_TYPE, payload))
    raw["signatures"][0]["sig"] = base64.b64encode(signature).decode("ascii")
    sent = checked_by_worker(world, raw)
    assert isinstance(sent.predicate, DomainError)
    assert not encode_request(1, sent).startswith(TAG)
    got = over_the_wire(sent)
    assert isinstance(got, Checked) and isinstance(got.predicate, DomainError)
    assert (got.predicate.code, got.predicate.message) == (
        sent.predicate.code,
        sent.predicate.message,
    )
    [result] = world.ledger.append_many([got])
    [alone] = world.ledger.append_many([raw])
    assert isinstance(result, DomainError) and isinstance(alone, DomainError)
    assert (result.code, result.message) == (alone.code, alone.message)


def test_a_plain_pickled_request_is_still_read() -> None:
    """A request pickled as ``Connection.send`` writes it (what a worker sent before, and
    what the writer's own tests send) decodes as it was."""
    body = pickle.dumps((5, {"payloadType": "x"}))
    assert decode_request(body) == (5, {"payloadType": "x"})


class _EnvelopeWithState:
    """Pickles as ``envelope`` plus state: a hand-made pickle (msgspec's has no state)
    that sets the envelope's cached signed digest to another envelope's."""

    def __init__(self, envelope: Envelope, signed_digest: str) -> None:
        self.envelope, self.signed_digest = envelope, signed_digest

    def __reduce__(self) -> tuple[object, ...]:
        fields = tuple(getattr(self.envelope, f) for f in self.envelope.__struct_fields__)
        return (Envelope, fields, {"signed_digest": self.signed_digest})


def test_a_pickled_envelope_brings_no_cached_digest_into_the_writer(world: World) -> None:
    """A verdict is matched against the envelope's cached signed digest: the writer's own,
    since an envelope's pickle carries its fields only. One that brings a digest with it
    fails to load (its worker is cut off); a plain one loads as the object it stores, which
    the writer parses and digests itself."""
    raw = ingestion_envelope(world.seed, world.ingester, now=world.clock.now)
    envelope = checked_by_worker(world, raw).envelope
    forged = "sha256:" + "0" * 64
    with pytest.raises(pickle.UnpicklingError):
        decode_request(pickle.dumps((1, _EnvelopeWithState(envelope, forged))))
    decoded = decode_request(pickle.dumps((2, envelope)))
    assert isinstance(decoded, tuple) and decoded[0] == 2
    assert decoded[1] == raw
    plain = check_stateless(decoded[1]).envelope
    assert plain == envelope
    assert plain.signed_digest == parse_envelope(raw).signed_digest != forged


def test_a_checked_envelope_sent_pickled_is_read_from_its_stored_bytes_too(
    world: World, verifications: Verifications
) -> None:
    """A worker that pickles a Checked itself (the wire's fallback, which a worker chooses)
    whose envelope holds the payload it checked but another JSON object, with another
    statement beside it: the writer reads the envelope, statement, predicate and run from
    that object as it does from msgpack, the verdict does not match, and it verifies: refused.
    (Taken as it came, the verdict matched the payload brought along, and the unsigned
    object was stored.)"""
    genuine = checked_by_worker(world, ingestion_envelope(world.seed, world.ingester))
    statement = parse_envelope(genuine.envelope.raw).statement_json()
    statement["predicate"]["externalId"] = "not what was signed"
    payload = canonical_json(statement)
    swapped = {**genuine.envelope.raw, "payload": base64.b64encode(payload).decode("ascii")}
    envelope = msgspec.structs.replace(genuine.envelope, raw=swapped, made=None)
    forged = dataclasses.replace(
        genuine, envelope=envelope, statement=parse_envelope(swapped).statement()
    )
    decoded = decode_request(pickle.dumps((7, forged)))
    assert isinstance(decoded, tuple) and isinstance(decoded[1], Checked)
    received: Checked = decoded[1]
    assert received.envelope.payload == payload, "the payload of the object to be stored"
    before = world.count()
    install(verifications)
    [result] = world.ledger.append_many([received])
    install(None)
    assert isinstance(result, SignatureError), result
    assert verifications.count == 1, "the writer verified it itself"
    assert world.count() == before, "a refused write stores nothing"


def test_an_ingestion_whose_run_is_refused_goes_pickled_and_keeps_its_words(
    world: World,
) -> None:
    """An ingestion whose predicate reads but whose run the worker refused (its manifests
    do not digest to its subject, say) goes pickled, its predicate model and all: the writer
    loads it (msgspec pickles such a model through ``msgspec._utils.rebuild``, which the
    writer's unpickler refused: the worker was cut off) and answers the worker's refusal."""
    genuine = checked_by_worker(world, ingestion_envelope(world.seed, world.ingester))
    refusal = DomainError("the run manifest digests to something else")
    sent = dataclasses.replace(genuine, run=refusal)
    body = encode_request(4, sent)
    assert not body.startswith(TAG)
    decoded = decode_request(body)
    assert isinstance(decoded, tuple) and isinstance(decoded[1], Checked)
    got: Checked = decoded[1]
    assert isinstance(got.run, DomainError) and str(got.run) == str(refusal)
    assert got.predicate == genuine.predicate
    [result] = world.ledger.append_many([got])
    assert isinstance(result, DomainError) and str(result) == str(refusal)


def test_an_envelope_sent_pickled_alone_is_read_from_its_stored_bytes(world: World) -> None:
    """A worker that pickles a bare Envelope (no Checked: the wire's fallback takes any
    object) whose fields hold a payload the signature covers but whose JSON object, the one
    stored, holds another: the writer parses the object it stores, so the signature does
    not verify over it: refused, nothing stored. (Taken as it came, the signature was
    checked over the fields and the unsigned object was stored.)"""
    raw = ingestion_envelope(world.seed, world.ingester)
    statement = parse_envelope(raw).statement_json()
    statement["predicate"]["externalId"] = "not what was signed"
    payload = canonical_json(statement)
    swapped = {**raw, "payload": base64.b64encode(payload).decode("ascii")}
    forged = msgspec.structs.replace(parse_envelope(raw), raw=swapped, made=None)
    decoded = decode_request(pickle.dumps((8, forged)))
    assert isinstance(decoded, tuple) and decoded[0] == 8
    before = world.count()
    [result] = world.ledger.append_many([decoded[1]])
    assert isinstance(result, SignatureError), result
    assert world.count() == before, "a refused write stores nothing"


def _made_up_verdict(raw: dict[str, Any]) -> Checked:
    """What a subverted worker can send for any envelope: a verdict anyone can compute (it
    carries no secret) over a junk signature, on the msgpack wire."""
    raw["signatures"][0]["sig"] = base64.b64encode(bytes(range(64))).decode("ascii")
    envelope = parse_envelope(raw)
    verdict = SignatureVerdict(
        envelope.keyid,
        envelope.keyid,  # a key id is the hash of the key's bytes
        envelope.signed_digest,
        envelope.signatures[0][1],
    )
    body = encode_request(3, Checked(envelope, envelope.statement(), None, None, verdict, False))
    assert body.startswith(TAG)
    decoded = decode_request(body)
    assert isinstance(decoded, tuple) and isinstance(decoded[1], Checked)
    return decoded[1]


def test_the_writer_verifies_every_statement_outside_the_vouched_types_itself(
    world: World, verifications: Verifications
) -> None:
    """Attack review: a made-up verdict had the writer log a key's registration nobody
    signed. For every statement type but the ``VOUCHED`` ones (attestations, ingestions) the
    writer drops a worker's verdict and verifies: a rerun's result, the path to "verified",
    and a key's roles never rest on a worker's word (docs/deployment.md)."""
    fresh = SigningKey.generate()
    raw = key_registration_envelope(fresh.public, [Role.INGESTER], world.admin, now=world.clock.now)
    sent = _made_up_verdict(raw)
    assert sent.verdict is None, "the worker's verdict is not taken for a key statement"
    before = world.count()
    install(verifications)
    [result] = world.ledger.append_many([sent])
    install(None)
    assert isinstance(result, SignatureError), result
    assert verifications.count >= 1, "the writer verified it itself"
    assert world.count() == before
    assert set(PredicateType) - VOUCHED >= {
        PredicateType.RERUN,
        PredicateType.KEY,
        PredicateType.LIFECYCLE,
        PredicateType.RERUN_REQUEST,
        PredicateType.RERUN_CLAIM,
        PredicateType.ATTACHMENT,
    }
    assert {PredicateType.INGESTION, PredicateType.ATTESTATION} == VOUCHED
