"""The ledger's admission rules, on SQLite and PostgreSQL: what is accepted, what is refused
(with which reason), and that a refusal stores nothing."""

from __future__ import annotations

import base64
import copy
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from domain.canonical import digest_of
from domain.errors import DigestMismatchError, DomainError, ManifestError
from domain.manifests.canonical_form import canonical_manifest, digest_input
from domain.statements import PredicateType, Role, make_statement
from domain.timestamps import format_time, utc_now
from ledger.aggregates import run_id
from ledger.application import Ledger
from ledger.errors import (
    AlreadyExistsError,
    ClockSkewError,
    ExpiredKeyError,
    RevokedKeyError,
    SubjectMismatchError,
    UnknownRunError,
    WrongRoleError,
)
from ledger.history import run_history
from ledger.signing.authoring import (
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
    key_revocation_envelope,
    lifecycle_envelope,
)
from ledger.signing.dsse import EnvelopeError, SignatureError, UnknownKeyError, sign_envelope
from ledger.signing.keys import SigningKey
from ledger.signing.trust import TrustRoot

SEED_RUN = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
SEED_NAME = "sol-submission-38823"


class Clock:
    def __init__(self) -> None:
        self.now = utc_now()

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kwargs: float) -> None:
        self.now += timedelta(**kwargs)


@dataclass
class World:
    ledger: Ledger
    clock: Clock
    admin: SigningKey
    ingester: SigningKey
    attester: SigningKey
    seed: dict[str, Any]
    open_ledger: Callable[[], Ledger]

    def count(self) -> int:
        return self.ledger.store.last_position()


@pytest.fixture
def world(db_url: str, seed_path: Path) -> World:
    clock = Clock()
    admin, ingester, attester, log = (SigningKey.generate() for _ in range(4))
    root = TrustRoot(
        origin="test.kernelindex/log",
        admin_keys=(admin.public,),
        log_key=log.public,
        created_at=format_time(clock.now),
    )
    ledger = Ledger(db_url, root, clock=clock)
    ledger.append(key_registration_envelope(admin.public, [Role.ADMIN], admin, now=clock.now))
    ledger.append(key_registration_envelope(ingester.public, [Role.INGESTER], admin, now=clock.now))
    ledger.append(
        key_registration_envelope(attester.public, [Role.ATTESTER], attester, now=clock.now)
    )
    seed = json.loads(seed_path.read_text())
    return World(
        ledger, clock, admin, ingester, attester, seed, lambda: Ledger(db_url, root, clock=clock)
    )


def ingest_seed(w: World) -> str:
    receipt = w.ledger.append(ingestion_envelope(w.seed, w.ingester, now=w.clock.now))
    assert receipt.subject_digest == SEED_RUN
    return receipt.subject_digest


def refused(w: World, envelope: object, error: type[DomainError], words: str) -> DomainError:
    """The envelope is refused with ``error`` and a message containing ``words``; no write."""
    before = w.count()
    with pytest.raises(error) as info:
        w.ledger.append(envelope)
    assert words in info.value.message
    assert w.count() == before, "a refused write must store nothing"
    return info.value


# ------------------------------------------------------------------ acceptance


def test_ingest_then_attest_is_recorded_with_roles(world: World) -> None:
    run = ingest_seed(world)
    receipt = world.ledger.append(
        attestation_envelope(
            run,
            SEED_NAME,
            world.attester,
            type_="reproduced",
            body="same mean on my B200",
            now=world.clock.now,
        )
    )
    assert (receipt.event, receipt.version, receipt.duplicate) == ("Run.Attested", 2, False)
    history = run_history(world.ledger, run)
    assert [(h.event, h.role, h.ok) for h in history] == [
        ("Run.Ingested", "ingester", True),
        ("Run.Attested", "attester", True),
    ]
    assert history[0].signer == world.ingester.key_id
    assert history[1].signer == world.attester.key_id


def test_identical_envelope_is_idempotent(world: World) -> None:
    envelope = ingestion_envelope(world.seed, world.ingester, now=world.clock.now)
    first = world.ledger.append(envelope)
    count = world.count()
    again = world.ledger.append(copy.deepcopy(envelope))
    assert again.duplicate and not first.duplicate
    assert (again.position, again.version, again.envelope_digest) == (
        first.position,
        first.version,
        first.envelope_digest,
    )
    assert world.count() == count
    # The same holds for a fresh process (no cache) and for attestations.
    att = attestation_envelope(
        SEED_RUN, SEED_NAME, world.attester, type_="note", body="n", now=world.clock.now
    )
    a1 = world.ledger.append(att)
    a2 = world.open_ledger().append(att)
    assert a2.duplicate and a2.position == a1.position


def test_reingesting_a_run_with_a_new_envelope_is_refused_with_its_position(world: World) -> None:
    first = world.ledger.append(ingestion_envelope(world.seed, world.ingester, now=world.clock.now))
    world.clock.advance(seconds=1)
    error = refused(
        world,
        ingestion_envelope(world.seed, world.ingester, now=world.clock.now),
        AlreadyExistsError,
        "already ingested",
    )
    assert isinstance(error, AlreadyExistsError) and error.position == first.position


def test_seed_with_implementation_and_workload_absent_is_accepted(world: World) -> None:
    assert set(world.seed) == {"run", "protocol", "environment"}
    assert ingest_seed(world) == SEED_RUN
    run = world.ledger.run(SEED_RUN)
    assert run is not None and run.run_name == SEED_NAME


def test_concurrent_attestations_to_one_run_are_all_kept(world: World) -> None:
    ingest_seed(world)
    envelopes = [
        attestation_envelope(
            SEED_RUN, SEED_NAME, world.attester, type_="note", body=f"note {i}", now=world.clock.now
        )
        for i in range(24)
    ]
    ledgers = [world.open_ledger() for _ in range(4)]
    errors: list[BaseException] = []

    def writer(k: int) -> None:
        try:
            for envelope in envelopes[k::4]:
                ledgers[k].append(envelope)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    history = run_history(world.open_ledger(), SEED_RUN)
    bodies = sorted(
        h.predicate["body"] for h in history if h.event == "Run.Attested" and h.predicate
    )
    assert bodies == sorted(f"note {i}" for i in range(24))
    assert [h.version for h in history] == list(range(1, 26))


# ------------------------------------------------------------------- refusals


def test_unknown_field_in_a_manifest_is_refused(world: World) -> None:
    seed = copy.deepcopy(world.seed)
    seed["run"]["spec"]["timing"]["bogus"] = 1
    with pytest.raises(ManifestError, match="bogus"):
        ingestion_envelope(seed, world.ingester)
    # A client that signs it anyway is refused by the ledger too.
    bad = _raw_ingestion(world, seed)
    refused(world, bad, ManifestError, "bogus")


@pytest.mark.parametrize(
    "latency",
    [[1700000, 1800000], [5], []],
    ids=["a pair", "one in a list", "an empty list"],
)
def test_a_run_whose_primary_statistic_names_no_single_value_is_refused(
    world: World, latency: object
) -> None:
    """The schema lets ``primaryStatistic`` name any latency field, ``confidence95`` (a pair)
    included; a claim that does not read as one value is refused where the manifests are
    checked (authoring, admission, verification alike), since every view and rank reads it.
    Admitted, it stopped every fold of the views (found by an attack review)."""
    seed = copy.deepcopy(world.seed)
    seed["run"]["spec"]["timing"] = {
        "primaryStatistic": "confidence95",
        "latencyNs": {"mean": 1750693, "confidence95": latency},
    }
    with pytest.raises(ManifestError, match="primary measurement"):
        ingestion_envelope(seed, world.ingester)
    subject = digest_of(digest_input(canonical_manifest(seed["run"])))
    refused(world, _raw_ingestion(world, seed, subject=subject), ManifestError, "primary")


def _raw_ingestion(
    w: World,
    manifests: dict[str, Any],
    key: SigningKey | None = None,
    subject: str = SEED_RUN,
    name: str = SEED_NAME,
) -> dict[str, Any]:
    now = format_time(w.clock.now)
    predicate = {
        "source": "sol-execbench",
        "fetchedAt": now,
        "issuedAt": now,
        "manifests": manifests,
    }
    return sign_envelope(
        make_statement(name, subject, PredicateType.INGESTION, predicate), key or w.ingester
    )


def test_wrong_digest_reference_is_refused(world: World) -> None:
    seed = copy.deepcopy(world.seed)
    seed["protocol"]["spec"]["harness"]["version"] = "v1.2"
    with pytest.raises(DigestMismatchError, match="protocolDigest"):
        ingestion_envelope(seed, world.ingester)
    refused(world, _raw_ingestion(world, seed), DigestMismatchError, "protocolDigest")


def test_subject_that_is_not_the_run_manifest_is_refused(world: World) -> None:
    other = "sha256:" + "ab" * 32
    refused(
        world, _raw_ingestion(world, world.seed, subject=other), SubjectMismatchError, "digests to"
    )
    refused(
        world,
        _raw_ingestion(world, world.seed, name="another-name"),
        SubjectMismatchError,
        "metadata.name",
    )


def test_bad_signature_is_refused(world: World) -> None:
    envelope = ingestion_envelope(world.seed, world.ingester, now=world.clock.now)
    sig = bytearray(base64.b64decode(envelope["signatures"][0]["sig"]))
    sig[5] ^= 0x01
    envelope["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    refused(world, envelope, SignatureError, "does not verify")


def test_payload_edited_after_signing_is_refused(world: World) -> None:
    envelope = ingestion_envelope(world.seed, world.ingester, now=world.clock.now)
    payload = base64.b64decode(envelope["payload"]).replace(b"1750693", b"1650693")
    envelope["payload"] = base64.b64encode(payload).decode()
    refused(world, envelope, SignatureError, "does not verify")


def test_unknown_key_is_refused(world: World) -> None:
    stranger = SigningKey.generate()
    refused(
        world,
        ingestion_envelope(world.seed, stranger, now=world.clock.now),
        UnknownKeyError,
        "registered key",
    )


def test_revoked_key_is_refused_whatever_date_it_claims(world: World) -> None:
    world.ledger.append(
        key_revocation_envelope(
            world.ingester.public, world.admin, reason="lost laptop", now=world.clock.now
        )
    )
    world.clock.advance(seconds=5)
    backdated = world.clock.now - timedelta(days=1)
    refused(
        world,
        ingestion_envelope(world.seed, world.ingester, now=backdated),
        RevokedKeyError,
        "revoked",
    )


def test_expired_key_is_refused(world: World) -> None:
    short = SigningKey.generate()
    world.ledger.append(
        key_registration_envelope(
            short.public,
            [Role.INGESTER],
            world.admin,
            valid_until=world.clock.now + timedelta(hours=1),
            now=world.clock.now,
        )
    )
    world.clock.advance(hours=2)
    refused(
        world,
        ingestion_envelope(world.seed, short, now=world.clock.now),
        ExpiredKeyError,
        "expired",
    )


def test_statement_from_the_future_is_refused(world: World) -> None:
    future = world.clock.now + timedelta(hours=1)
    refused(
        world, ingestion_envelope(world.seed, world.ingester, now=future), ClockSkewError, "future"
    )


def test_attester_key_cannot_sign_an_ingestion(world: World) -> None:
    refused(
        world,
        ingestion_envelope(world.seed, world.attester, now=world.clock.now),
        WrongRoleError,
        "needs ingester",
    )


def test_ingester_key_cannot_attest(world: World) -> None:
    ingest_seed(world)
    envelope = attestation_envelope(
        SEED_RUN, SEED_NAME, world.ingester, type_="note", body="x", now=world.clock.now
    )
    refused(world, envelope, WrongRoleError, "needs attester")


def test_attestation_whose_subject_is_not_the_run_is_refused(world: World) -> None:
    ingest_seed(world)
    unknown = "sha256:" + "cd" * 32
    refused(
        world,
        attestation_envelope(
            unknown, SEED_NAME, world.attester, type_="note", body="x", now=world.clock.now
        ),
        UnknownRunError,
        "no run",
    )
    refused(
        world,
        attestation_envelope(
            SEED_RUN, "someone-else", world.attester, type_="note", body="x", now=world.clock.now
        ),
        SubjectMismatchError,
        "not the run's name",
    )


def test_attestation_predicate_is_validated(world: World) -> None:
    ingest_seed(world)
    for predicate, words in [
        ({"type": "verified", "body": "x"}, "type"),
        ({"type": "note", "body": "x" * 2001}, "body"),
        ({"type": "note", "body": "x", "evidenceUrl": "http://insecure.example"}, "https"),
        ({"type": "note", "body": "x", "extra": 1}, "unknown field"),
        ({"type": "note", "body": "x", "observedNs": "12"}, "observedNs"),
    ]:
        dated = predicate | {"issuedAt": format_time(world.clock.now)}
        statement = make_statement(SEED_NAME, SEED_RUN, PredicateType.ATTESTATION, dated)
        refused(world, sign_envelope(statement, world.attester), DomainError, words)


def test_malformed_envelopes_are_refused(world: World) -> None:
    good = ingestion_envelope(world.seed, world.ingester, now=world.clock.now)
    cases: list[tuple[object, str]] = [
        ("not an object", "JSON object"),
        (good | {"extra": 1}, "unknown fields"),
        (good | {"payload": "!!!"}, "base64"),
        (good | {"payloadType": "text/plain"}, "payloadType"),
        (good | {"signatures": []}, "exactly one signature"),
        (good | {"payload": base64.b64encode(b"not json").decode()}, "JSON"),
    ]
    for envelope, words in cases:
        refused(world, envelope, EnvelopeError, words)


def test_self_registration_is_only_for_attesters(world: World) -> None:
    eve = SigningKey.generate()
    refused(
        world,
        key_registration_envelope(eve.public, [Role.INGESTER], eve, now=world.clock.now),
        WrongRoleError,
        "attester role",
    )
    refused(
        world,
        key_registration_envelope(eve.public, [Role.ADMIN], eve, now=world.clock.now),
        WrongRoleError,
        "attester role",
    )
    # An attester cannot register other keys either.
    refused(
        world,
        key_registration_envelope(eve.public, [Role.ATTESTER], world.attester, now=world.clock.now),
        WrongRoleError,
        "needs admin",
    )


def test_key_registered_once(world: World) -> None:
    world.clock.advance(seconds=1)
    refused(
        world,
        key_registration_envelope(
            world.attester.public, [Role.ATTESTER], world.admin, now=world.clock.now
        ),
        AlreadyExistsError,
        "already registered",
    )


def test_holder_may_revoke_own_key(world: World) -> None:
    world.ledger.append(
        key_revocation_envelope(
            world.attester.public, world.attester, reason="rotating", now=world.clock.now
        )
    )
    record = world.ledger.key_state(world.attester.key_id)
    assert record is not None and record.revoked and record.revoked_position is not None


def test_lifecycle_is_admin_only_and_leaves_history(world: World) -> None:
    ingest_seed(world)
    refused(
        world,
        lifecycle_envelope(
            SEED_RUN, SEED_NAME, world.attester, action="retract", reason="x", now=world.clock.now
        ),
        WrongRoleError,
        "needs admin",
    )
    world.ledger.append(
        lifecycle_envelope(
            SEED_RUN,
            SEED_NAME,
            world.admin,
            action="retract",
            reason="duplicate submission",
            now=world.clock.now,
        )
    )
    run = world.ledger.run(SEED_RUN)
    assert run is not None and run.retracted
    assert [h.event for h in run_history(world.ledger, SEED_RUN)] == [
        "Run.Ingested",
        "Run.Retracted",
    ]


def test_require_run_finds_a_run_by_its_full_digest_only(world: World) -> None:
    """Prefixes, names and external ids are the views' (tests/projections/test_references)."""
    ingest_seed(world)
    assert world.ledger.require_run(SEED_RUN.upper().replace("SHA256:", "")) == SEED_RUN
    for missing in ("7e18c26c", "sha256:" + "0" * 64):
        with pytest.raises(DomainError, match="no run"):
            world.ledger.require_run(missing)


def test_tampered_stored_envelope_fails_history_verification(world: World) -> None:
    ingest_seed(world)
    world.ledger.append(
        attestation_envelope(
            SEED_RUN,
            SEED_NAME,
            world.attester,
            type_="reproduced",
            body="matches",
            now=world.clock.now,
        )
    )
    record_cls = world.ledger.recorder.events_record_cls  # type: ignore[attr-defined]
    with world.ledger.store.transaction(commit=True) as session:
        row = (
            session.query(record_cls)
            .filter(
                record_cls.originator_id == run_id(SEED_RUN), record_cls.originator_version == 2
            )
            .one()
        )
        state = json.loads(row.state)
        payload = json.loads(base64.b64decode(state["envelope"]["payload"]))
        payload["predicate"]["type"] = "could_not_reproduce"
        state["envelope"]["payload"] = base64.b64encode(json.dumps(payload).encode()).decode()
        row.state = json.dumps(state).encode()
    history = run_history(world.open_ledger(), SEED_RUN)
    assert [h.ok for h in history] == [True, False]
    assert [c.name for c in history[1].failures] == ["signature"]


def test_an_envelope_the_edge_parsed_is_admitted_as_its_json_would_be(world: World) -> None:
    """The HTTP edge parses a body once and hands the ledger the parsed envelope: the same
    checks, the same receipt, the same stored event as the JSON it came from."""
    from ledger.signing.dsse import parse_envelope

    raw = ingestion_envelope(world.seed, world.ingester, now=world.clock.now)
    parsed = parse_envelope(raw)
    receipt = world.ledger.append(parsed)
    assert (receipt.subject_digest, receipt.duplicate) == (SEED_RUN, False)
    again = world.ledger.append(raw)
    assert again.duplicate and again.position == receipt.position
    forged = parse_envelope(
        sign_envelope(
            make_statement(
                SEED_NAME,
                SEED_RUN,
                PredicateType.ATTESTATION,
                {"type": "note", "body": "x", "issuedAt": format_time(world.clock.now)},
            ),
            world.ingester,
        )
    )
    refused(world, forged, WrongRoleError, "")  # an ingester key may not attest
