"""One authorization rule (``ledger.authority``) for admission and every re-verification.

Regressions of issue 13 §1 (envelopes that admission accepted and the verifier then refused,
poisoning ``audit`` and every bundle forever) and §9 (a revocation committed by another
process while a group was being admitted), on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from domain.errors import ManifestError
from domain.statements import PredicateType, Role, make_statement
from ledger.application import Ledger
from ledger.audit import audit_ledger
from ledger.errors import ClockSkewError, RevokedKeyError
from ledger.history import key_history, run_history
from ledger.signing.authoring import (
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
    key_revocation_envelope,
)
from ledger.signing.dsse import EnvelopeError, sign_envelope
from ledger.signing.keys import SigningKey
from ledger.signing.trust import TrustRoot
from tests.ledger.test_admission import (
    SEED_NAME,
    SEED_RUN,
    World,
    ingest_seed,
    refused,
    world,  # noqa: F401 (the fixture)
)


def _registration(key: SigningKey, roles: list[str], at: Any, **extra: Any) -> dict[str, Any]:
    """A self-signed registration statement with exactly these (possibly odd) roles."""
    from domain.timestamps import format_time

    predicate = {
        "action": "register",
        "keyId": key.key_id,
        "publicKey": key.public.b64,
        "roles": roles,
        "validFrom": format_time(at),
        "issuedAt": format_time(at),
        **extra,
    }
    return make_statement(key.key_id, key.key_id, PredicateType.KEY, predicate)


def assert_ledger_verifies(w: World) -> None:
    report = audit_ledger(w.open_ledger())
    assert report.verified, report.findings


def test_duplicated_roles_are_refused_not_stored(world: World) -> None:
    """§1: roles ["attester", "attester"] once passed admission (a set) and failed
    re-verification (a list) — a poisoned log. Roles must be unique and sorted."""
    eve = SigningKey.generate()
    for roles in (["attester", "attester"], ["attester", "admin"]):
        refused(
            world,
            sign_envelope(_registration(eve, roles, world.clock.now), eve),
            ManifestError,
            "unique and sorted",
        )
    assert_ledger_verifies(world)


def test_a_co_signed_self_registration_is_refused_not_stored(world: World) -> None:
    """§1: a self-registration co-signed by another attester, listed first, took admission's
    proof-of-possession path while the verifier picked the first signature. An envelope
    carries exactly one signature now."""
    eve = SigningKey.generate()
    statement = _registration(eve, ["attester"], world.clock.now)
    own = sign_envelope(statement, eve)
    other = sign_envelope(statement, world.attester)
    both = own | {"signatures": other["signatures"] + own["signatures"]}
    refused(world, both, EnvelopeError, "exactly one")
    assert_ledger_verifies(world)


def test_self_registration_cannot_backdate_its_validity(world: World) -> None:
    """§8: a self-registered key could say it was valid since years before it existed."""
    from datetime import timedelta

    eve = SigningKey.generate()
    years_ago = world.clock.now - timedelta(days=3 * 365)
    envelope = key_registration_envelope(
        eve.public, [Role.ATTESTER], eve, valid_from=years_ago, now=world.clock.now
    )
    refused(world, envelope, ClockSkewError, "cannot vouch for itself")
    # An admin may vouch for an earlier window (e.g. a key moved from another system).
    admitted = world.ledger.append(
        key_registration_envelope(
            eve.public, [Role.ATTESTER], world.admin, valid_from=years_ago, now=world.clock.now
        )
    )
    assert not admitted.duplicate
    assert_ledger_verifies(world)


def test_a_revocation_committed_meanwhile_by_another_process_refuses_the_group(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """§9, made deterministic: the attester's note is admitted against its key as it stood,
    then — before the group commits — another ledger process commits the key's revocation.
    The group's commit reads the key again under the lock, admits the group again, and
    refuses the note: nothing is stored that its own verifier would refuse."""
    ingest_seed(world)
    other_process = world.open_ledger()
    original = world.ledger._commit
    fired = []

    def revoke_first(*args: Any) -> Any:
        if not fired:
            fired.append(True)
            other_process.append(
                key_revocation_envelope(
                    world.attester.public, world.admin, reason="stolen", now=world.clock.now
                )
            )
        return original(*args)

    monkeypatch.setattr(world.ledger, "_commit", revoke_first)
    note = attestation_envelope(
        SEED_RUN, SEED_NAME, world.attester, type_="note", body="late", now=world.clock.now
    )
    with pytest.raises(RevokedKeyError):
        world.ledger.append(note)
    assert fired
    assert all(h.ok for h in run_history(world.ledger, SEED_RUN))
    assert [h.event for h in key_history(world.ledger, world.attester.key_id)] == [
        "Principal.Registered",
        "Principal.Revoked",
    ]
    assert_ledger_verifies(world)


def test_an_event_admitted_before_a_revocation_stays_valid_whatever_the_clocks_say(
    world: World, db_url: str
) -> None:
    """Validity is by log position: an attestation stored before the key's revocation holds
    for every verifier, even when the revoking process's clock says it revoked earlier."""
    ingest_seed(world)
    world.ledger.append(
        attestation_envelope(
            SEED_RUN, SEED_NAME, world.attester, type_="note", body="before", now=world.clock.now
        )
    )
    issued = world.clock.now
    world.clock.advance(minutes=-4)  # the other writer's clock runs four minutes behind
    other = world.open_ledger()
    other.append(key_revocation_envelope(world.attester.public, world.admin, now=issued))
    (revocation,) = [h for h in key_history(world.ledger, world.attester.key_id)][1:]
    assert revocation.received_at is not None
    assert revocation.received_at < run_history(world.ledger, SEED_RUN)[1].received_at
    history = run_history(world.ledger, SEED_RUN)
    assert [h.ok for h in history] == [True, True]
    assert_ledger_verifies(world)


def test_admission_judges_the_time_it_records(world: World) -> None:
    """The checks compare the received time at the precision it is stored (milliseconds).
    An issuedAt written with microseconds, just inside the clock-skew window of the full-
    precision clock, was admitted and then failed re-verification against the stored time;
    judged at the stored millisecond, it is refused (and nothing poisons the log)."""
    from datetime import timedelta

    from domain.statements import PredicateType, make_statement
    from ledger.authority.signers import MAX_CLOCK_SKEW
    from ledger.signing.dsse import sign_envelope

    ingest_seed(world)
    world.clock.now = world.clock.now.replace(microsecond=999_900)
    edge = world.clock.now + MAX_CLOCK_SKEW - timedelta(microseconds=50)
    predicate = {
        "type": "note",
        "body": "edge",
        "issuedAt": edge.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),  # six digits: an attacker's pick
    }
    statement = make_statement(SEED_NAME, SEED_RUN, PredicateType.ATTESTATION, predicate)
    with pytest.raises(ClockSkewError):
        world.ledger.append(sign_envelope(statement, world.attester))
    assert all(h.ok for h in run_history(world.ledger, SEED_RUN))
    assert_ledger_verifies(world)


def test_history_and_audit_judge_keys_from_the_log(
    world: World, db_url: str, seed_path: Path
) -> None:
    """A revoked attester's earlier note verifies; one inserted after the revocation behind
    the ledger's back (a forged row) fails key-valid in history and audit alike."""
    from sqlalchemy import create_engine, insert, select

    ingest_seed(world)
    receipt = world.ledger.append(
        attestation_envelope(
            SEED_RUN, SEED_NAME, world.attester, type_="note", body="ok", now=world.clock.now
        )
    )
    world.ledger.append(
        key_revocation_envelope(world.attester.public, world.admin, now=world.clock.now)
    )
    late = attestation_envelope(
        SEED_RUN, SEED_NAME, world.attester, type_="note", body="forged", now=world.clock.now
    )
    events = world.ledger.recorder.events_record_cls  # type: ignore[attr-defined]
    engine = create_engine(db_url)
    with engine.begin() as conn:
        (state,) = conn.execute(select(events.state).where(events.id == receipt.position)).one()
        stored = json.loads(bytes(state))
        stored["envelope"] = late
        conn.execute(
            insert(events).values(
                originator_id=receipt.aggregate_id,
                originator_version=3,
                topic="ledger.aggregates:Run.Attested",
                state=json.dumps(stored).encode(),
            )
        )
    engine.dispose()
    history = run_history(world.ledger, SEED_RUN)
    assert [h.ok for h in history] == [True, True, False]
    assert [c.name for c in history[-1].failures] == ["key-valid"]
    report = audit_ledger(world.open_ledger())
    assert report.failed["key-valid"] == 1


def test_a_trust_root_admin_may_bootstrap_itself_and_nobody_else_may(
    db_url: str, seed_path: Path
) -> None:
    from domain.timestamps import format_time, utc_now
    from ledger.errors import WrongRoleError

    admin, stranger, log = SigningKey.generate(), SigningKey.generate(), SigningKey.generate()
    root = TrustRoot("test.kernelindex/log", (admin.public,), log.public, format_time(utc_now()))
    ledger = Ledger(db_url, root)
    with pytest.raises(WrongRoleError):
        ledger.append(key_registration_envelope(stranger.public, [Role.ADMIN], stranger))
    ledger.append(key_registration_envelope(admin.public, [Role.ADMIN], admin))
    ledger.append(key_registration_envelope(stranger.public, [Role.INGESTER], admin))
    ledger.append(ingestion_envelope(json.loads(seed_path.read_text()), stranger))
    report = audit_ledger(ledger)
    assert report.verified, report.findings
