"""The stateless checks made outside the writer (a server's worker: ``ledger.admission_checks``)
and the signature verdict the writer takes from them, on SQLite and PostgreSQL: the writer
skips Ed25519 exactly when a verdict names the very envelope and key it holds; any other
verdict (other key bytes, another envelope, other signature bytes, a key revoked since) is
checked again, and what a user sees is the refusal admission always gave, nothing stored."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from api.service.ledger_service import LedgerService
from domain.canonical import canonical_json
from domain.errors import DomainError
from domain.statements import PredicateType, Role
from ledger.admission_checks import Checked, KnownKeys, check_stateless
from ledger.checked_wire import decode_request, encode_request
from ledger.errors import RevokedKeyError
from ledger.logged_event import LoggedEvent
from ledger.signing.authoring import (
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
    key_revocation_envelope,
)
from ledger.signing.dsse import PAYLOAD_TYPE, SignatureError, pae, parse_envelope
from ledger.signing.keys import SigningKey
from ledger.signing.verdict import SignatureVerdict
from ledger.timing import Stage, install
from tests.ledger.test_admission import SEED_NAME, World, ingest_seed, world  # noqa: F401


class Verifications:
    """A ``ledger.timing`` probe counting Ed25519 checks."""

    def __init__(self) -> None:
        self.count = 0

    def begin(self, stage: Stage) -> object:
        self.count += stage is Stage.VERIFY
        return None

    def end(self, stage: Stage, began: object, raised: bool) -> None:
        return None

    def note(self, name: str, value: float) -> None:
        return None


@pytest.fixture
def verifications() -> Iterator[Verifications]:
    probe = Verifications()
    yield probe
    install(None)


def over_the_wire(item: object) -> object:
    """``item`` as the writer process reads it from a worker's socket (``ledger.checked_wire``)."""
    message = decode_request(encode_request(7, item))
    assert isinstance(message, tuple) and message[0] == 7
    return message[1]


def worker_checked(w: World, raw: object) -> Checked:
    """What a worker sends the writer: checked with the key book, then over the wire."""
    checked = check_stateless(raw, KnownKeys(w.ledger.key_states))
    received = over_the_wire(checked)
    assert isinstance(received, Checked)
    return received


def forged(w: World, signer: SigningKey, named: SigningKey, **fields: Any) -> dict[str, Any]:
    """An ingestion signed by ``signer`` that names ``named``'s key id."""
    raw = ingestion_envelope(w.seed, signer, now=w.clock.now, **fields)
    raw["signatures"][0]["keyid"] = named.key_id
    return raw


def appended(w: World, items: list[object], probe: Verifications) -> list[Any]:
    install(probe)
    try:
        return list(w.ledger.append_many(items))
    finally:
        install(None)


def refused_as(
    w: World, item: object, error: type[DomainError], probe: Verifications
) -> DomainError:
    before = w.count()
    [result] = appended(w, [item], probe)
    assert isinstance(result, error), result
    assert w.count() == before, "a refused write stores nothing"
    return result


def test_the_writer_skips_ed25519_exactly_when_the_verdict_matches(
    world: World, verifications: Verifications
) -> None:
    run = ingest_seed(world)
    notes = [
        attestation_envelope(
            run, SEED_NAME, world.attester, type_="note", body=f"n{i}", now=world.clock.now
        )
        for i in range(4)
    ]
    items: list[object] = [worker_checked(world, notes[0]), notes[1]]
    items += [worker_checked(world, notes[2]), check_stateless(notes[3])]  # no key book
    assert all(isinstance(i, Checked) and i.verdict for i in (items[0], items[2]))
    assert isinstance(items[3], Checked) and items[3].verdict is None
    results = appended(world, items, verifications)
    assert all(isinstance(r, LoggedEvent) and not r.duplicate for r in results)
    assert verifications.count == 2, "verified once per envelope without a matching verdict"
    # Sent again: each a duplicate, its signature checked the same way.
    again = Verifications()
    results = appended(world, [worker_checked(world, notes[0]), notes[1]], again)
    assert all(isinstance(r, LoggedEvent) and r.duplicate for r in results)
    assert again.count == 1


def test_a_verdict_naming_other_key_bytes_is_not_taken(
    world: World, verifications: Verifications
) -> None:
    stranger = SigningKey.generate()
    raw = forged(world, stranger, world.ingester)
    checked = check_stateless(raw)
    # What a worker that verified against the wrong key's bytes would say.
    envelope = parse_envelope(raw)
    wrong = SignatureVerdict(
        envelope.keyid,
        stranger.key_id,  # the sha256 of the bytes it verified against
        envelope.signed_digest,
        envelope.signatures[0][1],
    )
    refused_as(world, dataclasses.replace(checked, verdict=wrong), SignatureError, verifications)
    assert verifications.count == 1, "the writer verified it itself"


def test_a_verdict_about_another_envelope_is_not_taken(
    world: World, verifications: Verifications
) -> None:
    genuine = worker_checked(world, ingestion_envelope(world.seed, world.ingester))
    assert genuine.verdict is not None
    stranger = SigningKey.generate()
    other = check_stateless(forged(world, stranger, world.ingester, external_id="another"))
    refused_as(
        world, dataclasses.replace(other, verdict=genuine.verdict), SignatureError, verifications
    )
    assert verifications.count == 1


def test_a_verdict_about_other_signature_bytes_is_not_taken(
    world: World, verifications: Verifications
) -> None:
    """The signed digest covers the payload and key id, not the signature: the same
    statement under another signature keeps its signed digest, and no verdict covers it."""
    raw = ingestion_envelope(world.seed, world.ingester, now=world.clock.now)
    genuine = worker_checked(world, raw)
    envelope = parse_envelope(raw)
    stranger = SigningKey.generate()
    swapped = {**raw, "signatures": [dict(raw["signatures"][0])]}
    signature = stranger.sign(pae(envelope.payload_type, envelope.payload))
    swapped["signatures"][0]["sig"] = base64.b64encode(signature).decode("ascii")
    other = check_stateless(swapped)
    assert other.envelope.signed_digest == envelope.signed_digest
    refused_as(
        world, dataclasses.replace(other, verdict=genuine.verdict), SignatureError, verifications
    )
    assert verifications.count == 1


def test_a_key_revoked_after_the_workers_check_is_refused(
    world: World, verifications: Verifications
) -> None:
    checked = worker_checked(world, ingestion_envelope(world.seed, world.ingester))
    assert checked.verdict is not None
    world.ledger.append(
        key_revocation_envelope(world.ingester.public, world.admin, now=world.clock.now)
    )
    world.clock.advance(seconds=1)
    refused_as(world, checked, RevokedKeyError, verifications)
    assert verifications.count == 0, "the signature held; the key's state refused it"


def test_a_key_registered_in_the_same_group_is_verified_by_the_writer(
    world: World, verifications: Verifications
) -> None:
    fresh = SigningKey.generate()
    registration = key_registration_envelope(
        fresh.public, [Role.INGESTER], world.admin, now=world.clock.now
    )
    ingestion = worker_checked(world, ingestion_envelope(world.seed, fresh, now=world.clock.now))
    assert ingestion.verdict is None and not ingestion.bad_signature  # unknown to the worker
    results = appended(world, [worker_checked(world, registration), ingestion], verifications)
    assert all(isinstance(r, LoggedEvent) for r in results), results
    # Both verified by the writer: a key's registration whatever a worker says (it is no
    # VOUCHED type), the ingestion because its key was unknown to the worker.
    assert verifications.count == 2


def test_a_worker_refuses_what_the_writer_would_whatever_the_log_holds(world: World) -> None:
    """An ingestion whose signature fails under the named key's bytes, or whose predicate
    does not parse, is refused by the worker with the writer's own error and code."""
    stranger = SigningKey.generate()
    bad_signature = forged(world, stranger, world.ingester)
    bad_predicate = ingestion_envelope(world.seed, world.ingester, now=world.clock.now)
    statement = parse_envelope(bad_predicate).statement_json()
    statement["predicate"]["source"] = 17
    payload = canonical_json(statement)
    bad_predicate["payload"] = base64.b64encode(payload).decode("ascii")
    signature = world.ingester.sign(pae(PAYLOAD_TYPE, payload))
    bad_predicate["signatures"][0]["sig"] = base64.b64encode(signature).decode("ascii")
    for raw in (bad_signature, bad_predicate):
        refusal = worker_checked(world, raw).refusal()
        assert refusal is not None
        [writers] = world.ledger.append_many([raw])
        assert isinstance(writers, DomainError)
        assert (type(refusal), refusal.code, refusal.message) == (
            type(writers),
            writers.code,
            writers.message,
        )
    assert worker_checked(world, ingestion_envelope(world.seed, world.ingester)).refusal() is None


def test_a_workers_key_book_reads_a_missing_key_again_only_after_a_while(world: World) -> None:
    """A key id found stays found (its bytes never change); one not found is read again
    after ``miss_s``, so a key registered meanwhile gets its verdicts from then on."""
    reads: list[list[str]] = []

    def read(key_ids: Any) -> Any:
        reads.append(list(key_ids))
        return world.ledger.key_states(key_ids)

    now = [0.0]
    keys = KnownKeys(read, miss_s=1.0, clock=lambda: now[0])
    fresh = SigningKey.generate()
    assert keys(fresh.key_id) is None and keys(fresh.key_id) is None
    assert len(reads) == 1, "a miss is remembered for a while"
    world.ledger.append(
        key_registration_envelope(fresh.public, [Role.INGESTER], world.admin, now=world.clock.now)
    )
    assert keys(fresh.key_id) is None  # still remembered missing: the writer verifies
    now[0] = 1.5
    assert keys(fresh.key_id) == fresh.public
    assert keys(fresh.key_id) == fresh.public and len(reads) == 2
    checked = check_stateless(ingestion_envelope(world.seed, fresh, now=world.clock.now), keys)
    assert checked.verdict is not None


def test_a_worker_reads_a_key_it_does_not_know_off_the_event_loop(world: World) -> None:
    """A small body is checked on the event loop, but a key the worker has not read yet is
    read from a thread: a database read on the loop stalls every request of the worker
    (found by review). The key once known, its next envelope needs no read at all."""
    run, name = ingest_seed(world), SEED_NAME
    service = LedgerService(world.ledger)
    reads_on_a_loop: list[bool] = []
    read = service._known_keys._read

    def recording(key_ids: Any) -> Any:
        try:
            asyncio.get_running_loop()
            reads_on_a_loop.append(True)
        except RuntimeError:
            reads_on_a_loop.append(False)
        return read(key_ids)

    service._known_keys._read = recording
    try:
        for body in ("first", "second"):
            note = attestation_envelope(run, name, world.attester, type_="note", body=body)
            logged = asyncio.run(
                service.append_async(canonical_json(note), {PredicateType.ATTESTATION}, run)
            )
            assert not logged.duplicate
    finally:
        service.close()
    assert reads_on_a_loop == [False], reads_on_a_loop


def test_a_workers_key_book_holds_and_reads_key_ids_only() -> None:
    """What is not a key id (no key's hash) is answered at once, never read nor held; a key
    id found is answered from then on without a read, whatever was asked between."""
    reads: list[list[str]] = []
    key = SigningKey.generate().public

    class Found:
        public_key = key

    def read(key_ids: Any) -> Any:
        reads.append(list(key_ids))
        return {i: Found() for i in key_ids if i == key.key_id}

    keys = KnownKeys(read)
    for not_an_id in ("", "sha256:" + "ab" * 31, key.key_id.upper(), key.key_id + "\n", "x" * 71):
        assert keys.needs_read(not_an_id) is False
        assert keys(not_an_id) is None
    assert reads == []
    assert keys.needs_read(key.key_id) is True
    assert keys(key.key_id) == key and reads == [[key.key_id]]
    assert keys.needs_read(key.key_id) is False
    assert keys(key.key_id) == key and keys(key.key_id + "\n") is None
    assert reads == [[key.key_id]]
