"""Group commit, on SQLite and PostgreSQL: envelopes admitted together behave exactly as if
appended one by one (order, dependencies, refusals, duplicates), and concurrent writers lose
nothing and duplicate nothing."""

from __future__ import annotations

import base64
import copy
import json
import re
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy.exc import DatabaseError, OperationalError
from test_admission import SEED_NAME, World, ingest_seed, world  # noqa: F401 - fixture

from domain.canonical import digest_of
from domain.errors import DomainError
from domain.statements import Role
from ledger import admission_checks
from ledger.aggregates import Run
from ledger.application import Ledger
from ledger.audit import audit_ledger
from ledger.errors import (
    RevokedKeyError,
    UnprocessableEnvelopeError,
    WrongRoleError,
    is_store_failure,
)
from ledger.group_commit import GroupCommitWriter
from ledger.history import run_history
from ledger.logged_event import LoggedEvent
from ledger.proofs.merkle import verify_inclusion
from ledger.signing.authoring import (
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
    key_revocation_envelope,
    lifecycle_envelope,
    rerun_claim_envelope,
    rerun_request_envelope,
)
from ledger.signing.dsse import UnknownKeyError, sign_envelope
from ledger.signing.keys import SigningKey


def test_a_group_sees_its_own_earlier_envelopes_in_order(world: World) -> None:
    run = ingest_seed(world)
    bob = SigningKey.generate()
    now = world.clock.now
    envelopes = [
        key_registration_envelope(bob.public, [Role.ATTESTER], bob, now=now),
        attestation_envelope(run, SEED_NAME, bob, type_="note", body="first", now=now),
        key_revocation_envelope(bob.public, bob, reason="lost", now=now),
        attestation_envelope(run, SEED_NAME, bob, type_="note", body="too late", now=now),
    ]
    before = world.count()
    results = world.ledger.append_many(envelopes)
    assert [type(r) for r in results[:3]] == [LoggedEvent, LoggedEvent, LoggedEvent]
    assert isinstance(results[3], RevokedKeyError)
    receipts = [r for r in results if isinstance(r, LoggedEvent)]
    assert [r.event for r in receipts] == [
        "Principal.Registered",
        "Run.Attested",
        "Principal.Revoked",
    ]
    # Stored and logged in arrival order, each receipt with its own leaf.
    assert [r.position for r in receipts] == [before + 1, before + 2, before + 3]
    assert len({r.inclusion.leaf_index for r in receipts if r.inclusion}) == 3
    assert world.count() == before + 3
    history = run_history(world.ledger, run)
    assert [(h.event, h.ok) for h in history] == [("Run.Ingested", True), ("Run.Attested", True)]
    assert audit_ledger(world.ledger).verified


def test_refusals_and_duplicates_inside_a_group(world: World) -> None:
    run = ingest_seed(world)
    now = world.clock.now
    good = attestation_envelope(run, SEED_NAME, world.attester, type_="note", body="x", now=now)
    stranger = SigningKey.generate()
    unknown = attestation_envelope(run, SEED_NAME, stranger, type_="note", body="y", now=now)
    ingester_note = attestation_envelope(
        run, SEED_NAME, world.ingester, type_="note", body="z", now=now
    )
    results = world.ledger.append_many([good, unknown, good, ingester_note, {"bad": 1}])
    first, refused, again, wrong_role, malformed = results
    assert isinstance(first, LoggedEvent) and not first.duplicate
    assert isinstance(refused, UnknownKeyError)
    assert isinstance(again, LoggedEvent) and again.duplicate
    assert again.position == first.position
    assert isinstance(wrong_role, WrongRoleError)
    assert isinstance(malformed, DomainError) and malformed.code == "malformed-envelope"
    # Later, alone: still the same original.
    later = world.ledger.append(good)
    assert later.duplicate and later.position == first.position


def _edited(edit: Callable[[dict[str, Any]], object]) -> Callable[[dict[str, Any]], object]:
    def made(envelope: dict[str, Any]) -> object:
        bad = copy.deepcopy(envelope)
        edit(bad)
        return bad

    return made


# An attacker's edits of an honest envelope, each sent in a group between honest ones.
_MALFORMED: dict[str, Callable[[dict[str, Any]], object]] = {
    "no keyid": _edited(lambda e: e["signatures"][0].pop("keyid")),
    "keyid null": _edited(lambda e: e["signatures"][0].update(keyid=None)),
    "keyid a number": _edited(lambda e: e["signatures"][0].update(keyid=7)),
    "empty keyid": _edited(lambda e: e["signatures"][0].update(keyid="")),
    "no sig": _edited(lambda e: e["signatures"][0].pop("sig")),
    "sig a number": _edited(lambda e: e["signatures"][0].update(sig=7)),
    "extra field in the signature": _edited(lambda e: e["signatures"][0].update(cert="x")),
    "signature not an object": _edited(lambda e: e.update(signatures=["sig"])),
    "no signatures": _edited(lambda e: e.pop("signatures")),
    "signatures an object": _edited(lambda e: e.update(signatures={"keyid": "x"})),
    "no payload": _edited(lambda e: e.pop("payload")),
    "payload a number": _edited(lambda e: e.update(payload=1)),
    "payload not base64": _edited(lambda e: e.update(payload="%%%")),
    "payload not JSON": _edited(lambda e: e.update(payload="bm90IGpzb24=")),
    "payload a JSON list": _edited(lambda e: e.update(payload="W10=")),
    "no payloadType": _edited(lambda e: e.pop("payloadType")),
    "payloadType a list": _edited(lambda e: e.update(payloadType=[])),
    "unknown envelope field": _edited(lambda e: e.update(extra=1)),
    "a list, not an envelope": lambda e: [e],
    "null": lambda e: None,
    "a string": lambda e: "envelope",
}


@pytest.mark.parametrize("edit", sorted(_MALFORMED))
def test_a_malformed_envelope_is_refused_alone_and_its_group_is_admitted(
    world: World, edit: str
) -> None:
    """Whatever is wrong with one envelope of a group, that envelope is refused with the
    ledger's word for it, and the group's others are admitted: nobody can make a group fail
    by sending something odd into it (an envelope without a key id used to fail its whole
    group with a KeyError, found by an attack review)."""
    run = ingest_seed(world)
    now = world.clock.now

    def note(body: str) -> dict[str, Any]:
        return attestation_envelope(
            run, SEED_NAME, world.attester, type_="note", body=body, now=now
        )

    bad = _MALFORMED[edit](note("edited"))
    before = world.count()
    first, refused, last = world.ledger.append_many([note("before"), bad, note("after")])
    assert isinstance(first, LoggedEvent) and isinstance(last, LoggedEvent)
    assert isinstance(refused, DomainError)
    if edit == "no keyid":  # optional in DSSE, required in this ledger's profile
        assert refused.code == "malformed-envelope"
    assert world.count() == before + 2
    # Alone, the same refusal.
    with pytest.raises(DomainError) as alone:
        world.ledger.append(bad)
    assert alone.value.code == refused.code


_RFC3339 = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T")
# Well-formed to the pattern, yet not a time: the offset takes it out of years 1-9999 (these
# used to escape as OverflowError and fail the whole group, found by an attack review), or
# the day or hour does not exist.
_HOSTILE_TIMES = [
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59-01:00",
    "0000-01-01T00:00:00Z",
    "2026-02-30T00:00:00Z",
    "2026-01-01T24:00:00Z",
]


def _every_statement(w: World, run: str) -> list[dict[str, Any]]:
    """A statement of each type about the seed run (signed by anyone: the timestamps are
    read before the signer is judged)."""
    key, later = w.attester, w.clock.now + timedelta(hours=1)
    device = {"product": "NVIDIA B200", "architecture": "sm_100", "gpuUuidHash": "a" * 64}
    job = "00000000-0000-4000-8000-000000000000"
    return [
        ingestion_envelope(w.seed, w.ingester, now=w.clock.now),
        attestation_envelope(run, SEED_NAME, key, type_="note", body="t", now=w.clock.now),
        lifecycle_envelope(run, SEED_NAME, key, action="retract", reason="r", now=w.clock.now),
        key_registration_envelope(key.public, [Role.ATTESTER], key, valid_until=later),
        key_revocation_envelope(key.public, key, reason="r", now=w.clock.now),
        rerun_request_envelope(
            run,
            SEED_NAME,
            key,
            artifact_digest=run,
            workload_digest=run,
            product="NVIDIA B200",
            architecture="sm_100",
            expires_at=later,
            now=w.clock.now,
        ),
        rerun_claim_envelope(run, SEED_NAME, key, job_id=job, device=device | {"backend": "cuda"}),
    ]


def _times_in(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _times_in(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _times_in(v, (*path, i))]
    return [path] if isinstance(value, str) and _RFC3339.match(value) else []


def test_a_hostile_timestamp_anywhere_is_refused_alone(world: World) -> None:
    """Every timestamp of seven statement types (issuedAt, validFrom, validUntil,
    expiresAt), set to each time that matches the pattern but is not one: that envelope is
    refused by name (4xx), its group admitted."""
    run = ingest_seed(world)
    now = world.clock.now
    sent = 0
    for honest in _every_statement(world, run):
        statement = json.loads(base64.b64decode(honest["payload"]))
        # The statement's own times (the manifests' follow the normative schema's pattern,
        # which has its own tests; an ingestion's are judged after its signer and digest).
        for path in _times_in(
            {k: v for k, v in statement["predicate"].items() if k != "manifests"}
        ):
            for hostile in _HOSTILE_TIMES:
                edited = copy.deepcopy(statement)
                target = edited["predicate"]
                for step in path[:-1]:
                    target = target[step]
                target[path[-1]] = hostile
                bad = sign_envelope(edited, world.attester)
                notes = [
                    attestation_envelope(
                        run, SEED_NAME, world.attester, type_="note", body=f"{sent}{x}", now=now
                    )
                    for x in "ab"
                ]
                before = world.count()
                first, refused, last = world.ledger.append_many([notes[0], bad, notes[1]])
                where = (statement["predicateType"], path, hostile)
                assert isinstance(first, LoggedEvent) and isinstance(last, LoggedEvent), where
                assert isinstance(refused, DomainError), where
                # By name: the time and its field, not some other refusal, nor "could not".
                assert "is not a valid date-time" in refused.message, (where, refused.message)
                assert str(path[-1]) in refused.message, (where, refused.message)
                assert world.count() == before + 2
                sent += 1
    assert sent >= 8 * len(_HOSTILE_TIMES)  # every type's issuedAt, validFrom/Until, expiresAt


def _notes(w: World, run: str, *bodies: str) -> list[dict[str, Any]]:
    """The attester's notes on ``run``, one per body."""
    return [
        attestation_envelope(run, SEED_NAME, w.attester, type_="note", body=b, now=w.clock.now)
        for b in bodies
    ]


def test_a_failure_of_ours_judging_one_envelope_is_its_refusal_alone(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """As reading, so judging: should a rule fail for one envelope in a way the ledger did
    not foresee (a bug, not a refusal it names), after its command applied the event or
    before, that envelope is refused saying so, nothing of it is stored, and its group is
    admitted. A failure of the database still fails the group (its writers are told to
    send again)."""
    run = ingest_seed(world)
    notes = _notes(world, run, "before", "unjudgeable", "after")
    original = Run.attest

    def broken(self: Run, signed: Any) -> None:
        original(self, signed)
        if signed.envelope == notes[1]:
            raise OverflowError("a bug of ours")

    monkeypatch.setattr(Run, "attest", broken)
    before = world.count()
    first, refused, last = world.ledger.append_many(notes)
    assert isinstance(first, LoggedEvent) and isinstance(last, LoggedEvent)
    assert isinstance(refused, UnprocessableEnvelopeError)
    assert "could not judge this envelope (OverflowError)" in refused.message
    assert world.count() == before + 2
    assert [h.event for h in run_history(world.ledger, run)].count("Run.Attested") == 2
    logged = [r for r in caplog.records if r.name == "ledger.admission"]
    assert any(r.exc_info is not None and "could not judge" in r.getMessage() for r in logged)
    # The database failing while one envelope is judged is not that envelope's doing: the
    # group fails as a store failure, nothing is stored, and the run is judged afresh after.
    # An outage the ledger names (503, send again), and a damaged file it does not name
    # (told as "malformed envelope", the client would not send again; found by a review).
    for lost in (
        OperationalError("SELECT", {}, sqlite3.OperationalError("disk I/O error")),
        DatabaseError("SELECT", {}, sqlite3.DatabaseError("database disk image is malformed")),
    ):

        def failing(self: Run, signed: Any, lost: Exception = lost) -> None:
            original(self, signed)
            raise lost

        monkeypatch.setattr(Run, "attest", failing)
        with pytest.raises(Exception) as failed:
            world.ledger.append_many(_notes(world, run, "x", "y"))
        assert is_store_failure(failed.value), failed.value
        assert world.count() == before + 2
    monkeypatch.setattr(Run, "attest", original)
    stored = world.ledger.append_many(_notes(world, run, "x", "y"))
    assert [r.version for r in stored if isinstance(r, LoggedEvent)] == [4, 5]


def test_a_failure_of_ours_reading_one_envelope_is_its_refusal_alone(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Defence in depth for the sweep above: should reading one envelope fail in a way the
    ledger did not foresee (a bug: not a refusal it names), that envelope is refused, saying
    so, and the rest of its group is admitted."""
    run = ingest_seed(world)
    notes = _notes(world, run, "before", "unreadable", "after")
    reader = admission_checks.parse_envelope

    def broken(raw: object) -> Any:
        if raw is notes[1]:
            raise KeyError("keyid")
        return reader(raw)

    monkeypatch.setattr(admission_checks, "parse_envelope", broken)
    before = world.count()
    first, refused, last = world.ledger.append_many(notes)
    assert isinstance(first, LoggedEvent) and isinstance(last, LoggedEvent)
    assert isinstance(refused, UnprocessableEnvelopeError)
    assert "could not read this envelope (KeyError)" in refused.message
    assert world.count() == before + 2
    # A bug all the same: whoever runs the ledger sees it, with its traceback.
    logged = [r for r in caplog.records if r.name == "ledger.admission"]
    assert len(logged) == 1 and logged[0].exc_info is not None


def test_a_replayed_group_gets_each_original_receipt_with_a_proof_that_verifies(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Envelopes stored before, sent again together (with a fresh one among them): each
    comes back as its original, with an inclusion proof at the tree as it stands that
    verifies, the same proof a lone replay gets (the group reads them in one go)."""
    run = ingest_seed(world)
    now = world.clock.now
    notes = [
        attestation_envelope(run, SEED_NAME, world.attester, type_="note", body=f"{n}", now=now)
        for n in range(5)
    ]
    originals = world.ledger.append_many(notes)
    fresh = attestation_envelope(run, SEED_NAME, world.attester, type_="note", body="new", now=now)
    one_by_one: list[LoggedEvent] = []
    lone_path = Ledger._with_inclusion

    def counted(self: Ledger, receipt: LoggedEvent) -> LoggedEvent:
        one_by_one.append(receipt)
        return lone_path(self, receipt)

    monkeypatch.setattr(Ledger, "_with_inclusion", counted)
    replayed = world.ledger.append_many([*notes, fresh, notes[0]])
    assert one_by_one == []  # the group's proofs were read together
    assert all(isinstance(r, LoggedEvent) for r in [*originals, *replayed])
    receipts = [r for r in replayed if isinstance(r, LoggedEvent)]
    assert [r.duplicate for r in receipts] == [True] * 5 + [False, True]
    assert [r.position for r in receipts[:5]] == [
        r.position for r in originals if isinstance(r, LoggedEvent)
    ]
    size = world.count()
    with world.ledger.store.transaction(commit=False) as session:
        root = world.ledger.tlog.root(session, size)
        hashes = {int(row[1]): bytes(row[2]) for row in world.ledger.tlog.entries(session, 0, size)}
    for receipt in receipts:
        proof = receipt.inclusion
        assert proof is not None and proof.tree_size == size and proof.root == root
        verify_inclusion(
            hashes[receipt.position], proof.leaf_index, proof.tree_size, proof.hashes, proof.root
        )
    alone = world.ledger.append(notes[3])
    assert alone.duplicate and alone.inclusion == receipts[3].inclusion
    assert len(one_by_one) == 1  # a lone replay: its own read


def test_a_revocation_by_another_process_applies_to_the_next_group(world: World) -> None:
    run = ingest_seed(world)
    now = world.clock.now
    note = attestation_envelope(run, SEED_NAME, world.attester, type_="note", body="1", now=now)
    assert isinstance(world.ledger.append_many([note])[0], LoggedEvent)  # the key is now cached
    other = world.open_ledger()
    other.append(key_revocation_envelope(world.attester.public, world.admin, now=now))
    world.clock.advance(seconds=1)
    late = attestation_envelope(
        run, SEED_NAME, world.attester, type_="note", body="2", now=world.clock.now
    )
    assert isinstance(world.ledger.append_many([late])[0], RevokedKeyError)


def test_concurrent_writers_lose_and_duplicate_nothing(world: World) -> None:
    run = ingest_seed(world)
    now = world.clock.now
    keys = [SigningKey.generate() for _ in range(8)]
    for key in keys:
        world.ledger.append(key_registration_envelope(key.public, [Role.ATTESTER], key, now=now))
    envelopes = [
        attestation_envelope(run, SEED_NAME, keys[i % 8], type_="note", body=f"{i}", now=now)
        for i in range(200)
    ]
    before = world.count()
    writer = GroupCommitWriter(world.ledger)
    try:
        with ThreadPoolExecutor(32) as pool:
            receipts = list(pool.map(writer.append, envelopes))
    finally:
        writer.close()
    positions = sorted(r.position for r in receipts)
    assert positions == list(range(before + 1, before + 201))
    assert world.count() == before + 200
    sent = {digest_of(e) for e in envelopes}
    history = run_history(world.ledger, run)
    assert sent <= {digest_of(h.envelope) for h in history if h.envelope}
    assert {r.envelope_digest for r in receipts} == sent
    report = audit_ledger(world.ledger)
    assert report.verified, report.findings


def test_a_cancelled_request_is_dropped_and_the_writer_keeps_serving(world: World) -> None:
    run = ingest_seed(world)
    now = world.clock.now
    notes = [
        attestation_envelope(run, SEED_NAME, world.attester, type_="note", body=f"c{i}", now=now)
        for i in range(4)
    ]
    writer = GroupCommitWriter(world.ledger)
    try:
        with world.ledger._writer:  # hold the ledger: the first group waits, the rest queue
            first = writer.submit(notes[0])
            while not first.running():
                time.sleep(0.001)
            gave_up, waiting = writer.submit(notes[1]), writer.submit(notes[2])
            assert gave_up.cancel()
        assert first.result(timeout=30).position > 0
        assert waiting.result(timeout=30).position > 0
        assert writer.append(notes[3]).position > 0  # still serving
    finally:
        writer.close()
    stored = {digest_of(h.envelope) for h in run_history(world.ledger, run) if h.envelope}
    assert digest_of(notes[1]) not in stored
    assert {digest_of(notes[i]) for i in (0, 2, 3)} <= stored
