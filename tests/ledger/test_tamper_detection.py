"""Tamper evidence (DESIGN.md §6, §9, §12), on SQLite and PostgreSQL.

Every way of changing history behind the ledger's back must be caught, by the named check
and with a reason that says what happened: ``audit_ledger`` on the live database,
``verify_bundle_lines`` on an exported bundle, and the ``kernelindex audit`` / ``verify``
commands (exit 1, reason printed). A clean ledger and clean bundles verify.
"""

from __future__ import annotations

import base64
import copy
import io
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from api.cli.main import app
from domain.errors import DomainError
from domain.manifests.canonical_form import admitted_manifest_digest
from domain.statements import Role
from domain.timestamps import format_time, utc_now
from ledger.aggregates import principal_id, run_id
from ledger.application import Ledger
from ledger.audit import audit_ledger
from ledger.bundle import export_bundle
from ledger.logged_event import LoggedEvent
from ledger.proofs.signed_note import format_checkpoint, sign_note
from ledger.signing.authoring import (
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
)
from ledger.signing.dsse import parse_envelope, sign_envelope
from ledger.signing.keys import SigningKey
from ledger.signing.trust import TrustRoot
from ledger.store.fold_fields import event_fold_fields
from ledger.store.transparency_log import checkpoints, leaves, nodes
from ledger.verification_report import Report
from ledger.verify import Outcome, VerificationPolicy, outcome_of, verify_bundle_lines
from ledger.verify.witnessed import UNWITNESSED

SEED_RUN = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
SEED_NAME = "sol-submission-38823"
OTHER_NAME = "other-run"
ORIGIN = "test.kernelindex/log"
ATTESTED_TOPIC = "ledger.aggregates:Run.Attested"


@dataclass
class World:
    """Keys (positions 1-3), the seed run ingested (4) and attested twice (5, 6), and a
    second run ingested (7)."""

    ledger: Ledger
    root: TrustRoot
    admin: SigningKey
    ingester: SigningKey
    attester: SigningKey
    log: SigningKey
    open_ledger: Callable[[], Ledger]
    receipts: list[LoggedEvent]
    other_run: str

    def attest(self, body: str) -> LoggedEvent:
        receipt = self.ledger.append(
            attestation_envelope(SEED_RUN, SEED_NAME, self.attester, type_="note", body=body)
        )
        self.receipts.append(receipt)
        return receipt

    def audit(self, **kwargs: Any) -> Report:
        return audit_ledger(self.open_ledger(), **kwargs)

    def bundle(self, runs: list[str] | None = None) -> list[str]:
        buffer = io.StringIO()
        export_bundle(self.open_ledger(), buffer, runs=runs)
        return buffer.getvalue().splitlines(keepends=True)

    def position(self, version: int, run: str = SEED_RUN) -> int:
        (record,) = self.ledger.stored_records(run_id(run), version=version)
        return record.position


@pytest.fixture
def world(db_url: str, seed_path: Path) -> World:
    admin, ingester, attester, log = (SigningKey.generate() for _ in range(4))
    trust = TrustRoot(
        origin=ORIGIN,
        admin_keys=(admin.public,),
        log_key=log.public,
        created_at=format_time(utc_now()),
    )

    def open_ledger() -> Ledger:
        return Ledger(db_url, trust, log_key=log)

    ledger = open_ledger()
    receipts = [
        ledger.append(key_registration_envelope(admin.public, [Role.ADMIN], admin)),
        ledger.append(key_registration_envelope(ingester.public, [Role.INGESTER], admin)),
        ledger.append(key_registration_envelope(attester.public, [Role.ATTESTER], attester)),
    ]
    seed = json.loads(seed_path.read_text())
    receipts.append(ledger.append(ingestion_envelope(seed, ingester)))
    w = World(ledger, trust, admin, ingester, attester, log, open_ledger, receipts, "")
    w.attest("first note")
    w.attest("second note")
    other = copy.deepcopy(seed)
    other["run"]["metadata"]["name"] = OTHER_NAME
    other["run"]["spec"]["observedAt"] = "2026-08-23T11:05:31.586Z"
    receipts.append(ledger.append(ingestion_envelope(other, ingester)))
    w.other_run = receipts[-1].subject_digest
    assert [r.position for r in receipts] == [1, 2, 3, 4, 5, 6, 7]
    return w


# ------------------------------------------------------------------ assertions


def reasons(report: Report, check: str) -> list[str]:
    return [f.reason for f in report.findings if f.check == check]


def assert_detected(report: Report, check: str, words: str) -> None:
    """The report fails, ``check`` among its failures, with a finding whose reason says it."""
    assert not report.verified
    assert report.failed[check] > 0, f"{check} not failed: {dict(report.failed)}"
    assert any(words in r for r in reasons(report, check)), (
        f"no {check} finding says {words!r}: {report.findings}"
    )


def assert_clean(report: Report) -> None:
    assert report.verified, report.findings
    assert not report.failed and not report.findings


# ------------------------------------------------------------------ database tampering


@contextmanager
def raw_session(w: World) -> Iterator[Any]:
    """A write transaction straight on the database, behind the ledger's back."""
    with w.ledger.store.transaction(commit=True) as session:
        yield session


def edit_state(w: World, position: int, change: Callable[[dict[str, Any]], None]) -> None:
    events = w.ledger.recorder.events_record_cls  # type: ignore[attr-defined]
    with raw_session(w) as session:
        row = session.query(events).filter(events.id == position).one()
        state = json.loads(row.state)
        change(state)
        row.state = json.dumps(state).encode()


def rewrite_statement(state: dict[str, Any]) -> None:
    """Change what the stored statement says, keeping it a well-formed statement."""
    envelope = state["envelope"]
    statement = json.loads(base64.b64decode(envelope["payload"]))
    if "body" in statement["predicate"]:
        statement["predicate"]["body"] = "rewritten after the fact"
    else:
        statement["predicate"]["externalId"] = "99999"
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()


def flip_signature(state: dict[str, Any]) -> None:
    signature = state["envelope"]["signatures"][0]
    raw = bytearray(base64.b64decode(signature["sig"]))
    raw[10] ^= 0x01
    signature["sig"] = base64.b64encode(bytes(raw)).decode()


def insert_forged_attestation(w: World) -> SigningKey:
    """A validly self-signed attestation by an unregistered key, written as the run's next
    event straight into the events table."""
    rogue = SigningKey.generate()
    envelope = attestation_envelope(
        SEED_RUN, SEED_NAME, rogue, type_="reproduced", body="reproduced, trust me"
    )
    events = w.ledger.recorder.events_record_cls  # type: ignore[attr-defined]
    with raw_session(w) as session:
        last = (
            session.query(events)
            .filter(events.originator_id == run_id(SEED_RUN))
            .order_by(events.originator_version.desc())
            .first()
        )
        state = json.loads(last.state)
        assert last.topic == ATTESTED_TOPIC
        state.update(
            envelope=envelope,
            envelope_digest=parse_envelope(envelope).digest,
            signer=rogue.key_id,
            received_at=format_time(utc_now()),
        )
        session.add(
            events(
                originator_id=run_id(SEED_RUN),
                originator_version=last.originator_version + 1,
                topic=ATTESTED_TOPIC,
                state=json.dumps(state).encode(),
            )
        )
    return rogue


def test_clean_ledger_audits_as_verified(world: World) -> None:
    world.attest("after the first checkpoint")
    checkpoint = world.ledger.tlog.checkpoint()
    report = world.audit(known_checkpoints=[checkpoint.note])
    assert_clean(report)
    # Each of the eight appends was one commit, and each commit signed the tree it made.
    assert report.facts == {"events": 8, "treeSize": 8, "checkpoints": 8}
    for check in ("sequenced", "leaf", "tree", "checkpoint", "signature", "role"):
        assert report.passed[check] > 0, check
    # Rewriting a record without changing what it holds is not tampering.
    edit_state(world, world.position(2), lambda state: None)
    assert_clean(world.audit())


def test_audit_detects_an_edited_payload(world: World) -> None:
    position = world.position(2)
    edit_state(world, position, rewrite_statement)
    report = world.audit()
    assert_detected(report, "leaf", "stored event no longer matches its log leaf")
    assert_detected(report, "signature", "signature does not verify")
    assert {f.where for f in report.findings} == {f"position {position}"}
    # Its fold fields row, made at commit, is no longer the one the edited event makes.
    assert set(report.failed) == {"leaf", "signature", "fold-fields"}


def test_audit_detects_an_edited_signature(world: World) -> None:
    position = world.position(1, world.other_run)
    edit_state(world, position, flip_signature)
    report = world.audit()
    assert_detected(report, "leaf", "stored event no longer matches its log leaf")
    assert_detected(report, "signature", "signature does not verify")
    assert {f.where for f in report.findings} == {f"position {position}"}


def test_audit_detects_a_deleted_event(world: World) -> None:
    position = world.position(2)
    events = world.ledger.recorder.events_record_cls  # type: ignore[attr-defined]
    with raw_session(world) as session:
        assert session.query(events).filter(events.id == position).delete() == 1
    report = world.audit()
    assert_detected(report, "sequenced", f"leaf {position - 1} has no stored event (deleted?)")
    assert any(f.where == f"position {position}" for f in report.findings)


def test_audit_detects_two_swapped_events(world: World) -> None:
    first, second = world.position(2), world.position(3)
    events = world.ledger.recorder.events_record_cls  # type: ignore[attr-defined]
    with raw_session(world) as session:
        a = session.query(events).filter(events.id == first).one()
        b = session.query(events).filter(events.id == second).one()
        a.state, b.state = bytes(b.state), bytes(a.state)
    report = world.audit()
    assert_detected(report, "leaf", "stored event no longer matches its log leaf")
    assert report.failed["leaf"] == 2
    assert {f.where for f in report.findings if f.check == "leaf"} == {
        f"position {first}",
        f"position {second}",
    }


def test_audit_detects_a_forged_event_before_and_after_it_is_sequenced(world: World) -> None:
    rogue = insert_forged_attestation(world)
    report = world.audit()
    assert_detected(report, "sequenced", "stored event has no leaf: appended behind the log")
    assert_detected(report, "signature", "no signature is by a registered key")
    assert rogue.key_id in reasons(report, "signature")[0]

    # A later legitimate write sequences whatever is stored, the forgery included: it is in
    # the log now, but its signature still gives it away, in the audit and in any bundle.
    receipt = world.attest("legitimate, after the forgery")
    assert receipt.inclusion is not None
    assert receipt.version == 5 and receipt.inclusion.leaf_index == 8
    report = world.audit()
    assert_detected(report, "signature", "no signature is by a registered key")
    assert set(report.failed) == {"signature"}
    assert report.findings[0].where == "position 8"
    bundle = verify(parse(world.bundle(runs=[SEED_RUN])), pinned_root=world.root)
    assert_detected(bundle, "signature", "no signature is by a registered key")
    assert set(bundle.failed) == {"signature"}


def _delete_last_leaf(w: World) -> int:
    """Remove the last event, its leaf and every stored node that covers it."""
    events = w.ledger.recorder.events_record_cls  # type: ignore[attr-defined]
    with raw_session(w) as session:
        size = w.ledger.tlog.tree_size(session)
        last = size - 1
        position = session.execute(
            leaves.select().with_only_columns(leaves.c.position).where(leaves.c.leaf_index == last)
        ).scalar_one()
        session.query(events).filter(events.id == position).delete()
        # Its fold fields go with it, as with any row removed from under the ledger: SQLite
        # hands the position out again, and the next commit writes that position's row.
        session.execute(event_fold_fields.delete().where(event_fold_fields.c.position == position))
        session.execute(leaves.delete().where(leaves.c.leaf_index == last))
        level = 0
        while (last >> level) + 1 << level <= size:
            session.execute(
                nodes.delete().where(nodes.c.level == level, nodes.c.idx == last >> level)
            )
            level += 1
    return size


def test_audit_detects_a_truncated_log(world: World) -> None:
    signed = world.ledger.tlog.sign_checkpoint()
    assert signed.size == _delete_last_leaf(world) == 7
    report = world.audit()
    assert_detected(report, "checkpoint", "signed for 7 leaves but the log has 6: truncated")
    assert set(report.failed) == {"checkpoint"}, report.findings

    # Hiding the stored checkpoint too does not help against anyone who kept the note.
    with raw_session(world) as session:
        session.execute(checkpoints.delete())
    assert_clean(world.audit())  # the database alone is now self-consistent...
    report = world.audit(known_checkpoints=[signed.note])
    assert_detected(report, "checkpoint", "beyond the log's 6 leaves: truncated")


def test_ledger_refuses_to_sign_a_second_root_for_a_signed_size(world: World) -> None:
    signed = world.ledger.tlog.sign_checkpoint()
    _delete_last_leaf(world)
    ledger = world.open_ledger()
    ledger.append(attestation_envelope(SEED_RUN, SEED_NAME, world.attester, type_="note", body="x"))
    with ledger.store.transaction(commit=False) as session:
        assert ledger.tlog.tree_size(session) == signed.size
    with pytest.raises(DomainError, match="no longer has the root signed for it"):
        ledger.tlog.sign_checkpoint()
    assert_detected(world.audit(), "checkpoint", "root differs from the tree recomputed")


def forged_checkpoint(w: World, size: int) -> str:
    """A note for ``size`` signed with the real log key over a root the log never had."""
    return sign_note(format_checkpoint(ORIGIN, size, b"\x07" * 32), ORIGIN, w.log.private_key())


def test_audit_detects_equivocation(world: World) -> None:
    signed = world.ledger.tlog.sign_checkpoint()
    assert_clean(world.audit(known_checkpoints=[signed.note]))
    report = world.audit(known_checkpoints=[forged_checkpoint(world, signed.size)])
    assert_detected(
        report,
        "checkpoint",
        f"two different roots signed for tree size {signed.size}: the log equivocated",
    )
    assert dict(report.failed) == {"checkpoint": 1}
    # A note not signed by the log key proves nothing and is reported as such.
    stranger = sign_note(
        format_checkpoint(ORIGIN, signed.size, signed.root),
        ORIGIN,
        SigningKey.generate().private_key(),
    )
    assert_detected(world.audit(known_checkpoints=[stranger]), "checkpoint", "does not verify")


def test_audit_detects_a_rewritten_log_against_a_held_checkpoint(world: World) -> None:
    # A witness keeps the checkpoint of the 7-event log.
    witnessed = world.ledger.tlog.checkpoint()
    # The operator deletes an attestation, rebuilds the log from the remaining events,
    # drops the signed checkpoints and writes one more event so the size is 7 again.
    events = world.ledger.recorder.events_record_cls  # type: ignore[attr-defined]
    with raw_session(world) as session:
        session.query(events).filter(events.id == world.position(2)).delete()
        for table in (leaves, nodes, checkpoints):
            session.execute(table.delete())
    ledger = world.open_ledger()
    assert ledger.tlog.catch_up() == 6
    ledger.append(
        attestation_envelope(world.other_run, OTHER_NAME, world.attester, type_="note", body="x")
    )
    with ledger.store.transaction(commit=False) as session:
        assert ledger.tlog.tree_size(session) == witnessed.size
    # The rebuilt log's commits signed its sizes again: size 7 now has two signed roots.
    report = world.audit(known_checkpoints=[witnessed.note])
    assert_detected(report, "checkpoint", "two different roots signed for tree size 7")
    # Dropping those checkpoints too hides the second signature, not the rewrite.
    with raw_session(world) as session:
        session.execute(checkpoints.delete())
    # The log is self-consistent again, but the run's versions now skip the deleted one...
    alone = world.audit()
    assert_detected(alone, "versions", "deleted")
    assert set(alone.failed) == {"versions"}
    # ...and the witness's note no longer matches the log of its size.
    report = world.audit(known_checkpoints=[witnessed.note])
    assert_detected(report, "checkpoint", "root differs from the log recomputed now: fork")


def test_audit_detects_a_stored_node_that_breaks_checkpoint_consistency(world: World) -> None:
    older = world.ledger.tlog.sign_checkpoint()
    world.attest("one more")
    newer = world.ledger.tlog.sign_checkpoint()
    assert newer.size > older.size
    assert_clean(world.audit())
    # Corrupt the stored subtree hash a consistency proof between the two checkpoints uses.
    with world.ledger.store.transaction(commit=False) as session:
        wanted: list[tuple[int, int]] = []

        def record(level: int, index: int) -> bytes:
            wanted.append((level, index))
            return b"\x00" * 32

        from ledger.proofs.merkle import consistency_proof_from_nodes

        consistency_proof_from_nodes(older.size, newer.size, record)
    level, index = wanted[0]
    with raw_session(world) as session:
        session.execute(
            nodes.update()
            .where(nodes.c.level == level, nodes.c.idx == index)
            .values(hash=b"\x01" * 32)
        )
    report = world.audit()
    assert_detected(report, "consistency", "does not extend the older")
    assert_detected(report, "tree", "stored subtree hash differs")


# ------------------------------------------------------------------ bundle tampering


def parse(lines: list[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines]


def dump(records: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n" for r in records]


def verify(
    records: list[dict[str, Any]],
    *,
    pinned_root: TrustRoot | None = None,
    known_checkpoints: Sequence[str] = (),
) -> Report:
    """Verify records; with no root pinned, as with the explicit unsafe flag (these tests are
    about tampering; anchoring has tests of its own)."""
    policy = VerificationPolicy(
        trust_root=pinned_root,
        allow_unanchored=pinned_root is None,
        held_checkpoints=known_checkpoints,
    )
    return verify_bundle_lines(dump(records), policy)


def event_lines(records: list[dict[str, Any]], event: str = "") -> list[dict[str, Any]]:
    return [r for r in records if r["type"] == "event" and r["topic"].endswith(event)]


def set_footer(records: list[dict[str, Any]]) -> None:
    records[-1] = {"type": "footer", "events": len(event_lines(records))}


def resign_checkpoint(records: list[dict[str, Any]], key: SigningKey) -> None:
    line = next(r for r in records if r["type"] == "checkpoint")
    body = line["note"].split("\n\n", 1)[0] + "\n"
    line["note"] = sign_note(body, ORIGIN, key.private_key())


def test_clean_run_and_ledger_bundles_verify(world: World) -> None:
    run_bundle = parse(world.bundle(runs=[SEED_RUN]))
    whole = parse(world.bundle())
    assert [r["type"] for r in run_bundle[:3]] == ["header", "trustRoot", "checkpoint"]
    assert run_bundle[-1] == {"type": "footer", "events": 6}
    # The run bundle holds the key events and the run's events, not the other run's.
    assert [r["topic"].rsplit(":", 1)[1] for r in event_lines(run_bundle)] == [
        "Principal.Registered",
        "Principal.Registered",
        "Principal.Registered",
        "Run.Ingested",
        "Run.Attested",
        "Run.Attested",
    ]
    assert len(event_lines(whole)) == 7
    for records in (run_bundle, whole):
        report = verify(records)
        assert_clean(report)
        assert report.passed["inclusion"] == len(event_lines(records))
        assert report.passed["signature"] == len(event_lines(records))
        assert report.facts["treeSize"] == 7
        pinned = verify(records, pinned_root=world.root)
        assert_clean(pinned)
        # A pinned root needs no warning about itself; the ledger has no witnesses, and the
        # report says so rather than pass as witnessed.
        assert pinned.notes == [UNWITNESSED]
        assert pinned.facts["witnessed"] == "no (no witness policy given)"
    # Each event's proof is a plain RFC 6962 inclusion proof anyone can check.
    report = verify(whole, known_checkpoints=[whole[2]["note"]])
    assert_clean(report)


def _replace_char(text: str, index: int, alphabet: str) -> str:
    replacement = next(c for c in alphabet if c != text[index])
    return text[:index] + replacement + text[index + 1 :]


BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _envelope_mutations(envelope: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """One-character changes across every field of a DSSE envelope."""
    payload = envelope["payload"]
    sig = envelope["signatures"][0]["sig"]
    keyid = envelope["signatures"][0]["keyid"]
    for i in sorted({0, 1, len(payload) // 3, len(payload) // 2, len(payload.rstrip("=")) - 1}):
        changed = copy.deepcopy(envelope)
        changed["payload"] = _replace_char(payload, i, BASE64)
        yield f"payload[{i}]", changed
    for i in (0, 1, 21, 42, 64, len(sig.rstrip("=")) - 1):
        changed = copy.deepcopy(envelope)
        changed["signatures"][0]["sig"] = _replace_char(sig, i, BASE64)
        yield f"sig[{i}]", changed
    for i in (0, 7, 40, len(keyid) - 1):
        changed = copy.deepcopy(envelope)
        changed["signatures"][0]["keyid"] = _replace_char(keyid, i, "0123456789abcdef")
        yield f"keyid[{i}]", changed
    for i in (0, 11, len(envelope["payloadType"]) - 1):
        changed = copy.deepcopy(envelope)
        changed["payloadType"] = _replace_char(envelope["payloadType"], i, "xyz")
        yield f"payloadType[{i}]", changed


def test_bundle_detects_any_changed_envelope_byte(world: World) -> None:
    records = parse(world.bundle(runs=[SEED_RUN]))
    tried = 0
    for event in ("Principal.Registered", "Run.Ingested", "Run.Attested"):
        target = event_lines(records, event)[-1]
        where = f"leaf {target['leafIndex']} (position {target['position']})"
        original = target["envelope"]
        for name, changed in _envelope_mutations(original):
            target["envelope"] = changed
            report = verify(records)
            assert not report.verified, (event, name)
            # The leaf no longer matches the logged one...
            assert report.failed["inclusion"] == 1, (event, name, report.findings)
            assert any(
                f.where == where and "not in the checkpoint's tree" in f.reason
                for f in report.findings
            ), (event, name)
            # ...and the envelope itself no longer holds (bad shape or bad signature).
            assert report.failed["signature"] + report.failed["envelope"] >= 1, (
                event,
                name,
                report.failed,
            )
            tried += 1
        target["envelope"] = original
    assert tried == 3 * 18
    assert_clean(verify(records))


def test_bundle_refuses_a_schema_invalid_manifest_even_signed_by_a_valid_key(
    world: World,
) -> None:
    """The offline verifier keeps admission's schema gate (a bundle is third-party input;
    only a read of the ledger's own log trusts admission for it, issue 33): a run manifest
    with an unknown field, its digests made to agree and signed by the ingester, fails the
    manifests check, besides the inclusion its changed leaf fails."""
    records = parse(world.bundle(runs=[SEED_RUN]))
    target = event_lines(records, "Run.Ingested")[0]
    statement = json.loads(base64.b64decode(target["envelope"]["payload"]))
    run = statement["predicate"]["manifests"]["run"]
    run["spec"]["bogus"] = 1
    statement["subject"][0]["digest"]["sha256"] = admitted_manifest_digest(run).removeprefix(
        "sha256:"
    )
    target["envelope"] = sign_envelope(statement, world.ingester)
    report = verify(records)
    assert not report.verified
    assert report.failed["manifests"] == 1, report.failed
    assert any("bogus" in f.reason for f in report.findings if f.check == "manifests")


def test_bundle_detects_a_changed_proof_hash(world: World) -> None:
    records = parse(world.bundle())
    target = event_lines(records, "Run.Ingested")[0]
    raw = bytearray(base64.b64decode(target["proof"][1]))
    raw[0] ^= 0x80
    target["proof"][1] = base64.b64encode(bytes(raw)).decode()
    report = verify(records)
    assert_detected(report, "inclusion", "not in the checkpoint's tree")
    assert dict(report.failed) == {"inclusion": 1}
    # A proof cut short is caught too.
    target["proof"] = target["proof"][:-1]
    assert_detected(verify(records), "inclusion", "not in the checkpoint's tree")


def test_bundle_detects_a_trust_root_other_than_the_pinned_one(world: World) -> None:
    records = parse(world.bundle())
    # An attacker swaps in a log key of their own and re-signs the checkpoint with it.
    attacker = SigningKey.generate()
    records[1]["trustRoot"]["logKey"] = {
        "keyId": attacker.key_id,
        "publicKey": attacker.public.b64,
    }
    resign_checkpoint(records, attacker)
    # Unpinned, the attacker's bundle agrees with itself: UNANCHORED, never VERIFIED.
    unpinned = verify_bundle_lines(dump(records), VerificationPolicy(trust_root=None))
    assert outcome_of(unpinned) is Outcome.UNANCHORED
    assert_detected(unpinned, "anchor", "no trust root pinned")
    assert set(unpinned.failed) == {"anchor"}
    report = verify(records, pinned_root=world.root)
    assert_detected(report, "trust-root", "the bundle's trust root is not the one you pinned")
    assert_detected(report, "checkpoint", "checkpoint does not verify")
    # A pin that differs in anything (here: one more admin key) is a different root.
    other = TrustRoot(
        origin=ORIGIN,
        admin_keys=(world.admin.public, SigningKey.generate().public),
        log_key=world.log.public,
        created_at=world.root.created_at,
    )
    report = verify(parse(world.bundle()), pinned_root=other)
    assert_detected(report, "trust-root", "not the one you pinned")


def test_bundle_detects_truncation(world: World) -> None:
    records = parse(world.bundle())
    report = verify(records[:-1])
    assert_detected(report, "format", "no footer: the bundle is truncated")
    assert dict(report.failed) == {"format": 1}
    report = verify(records[:-2])  # the last event and the footer
    assert_detected(report, "format", "no footer: the bundle is truncated")

    # An event line dropped from the middle: the footer's count and the log's leaves give
    # it away (a whole-log bundle holds every leaf).
    dropped = [r for r in records if r is not event_lines(records, "Run.Attested")[0]]
    report = verify(dropped)
    assert_detected(report, "format", "footer says 7 events, the bundle has 6")
    assert_detected(report, "complete", "holds 6 of the log's 7")
    # ... and the version of its run it was (a whole-log bundle's versions run 1, 2, 3 ...).
    assert_detected(report, "complete", "are not in the bundle")
    assert dict(report.failed) == {"format": 1, "complete": 2}

    # The count in another JSON type is not the count.
    for said in (7.0, "7", [7]):
        report = verify([*records[:-1], {"type": "footer", "events": said}])
        assert_detected(report, "format", f"footer says {said!r} events, the bundle has 7")


def test_bundle_detects_reordered_events(world: World) -> None:
    records = parse(world.bundle())
    first, second = (records.index(r) for r in event_lines(records, "Run.Attested"))
    records[first], records[second] = records[second], records[first]
    report = verify(records)
    assert_detected(report, "order", "leaf index does not increase")
    assert dict(report.failed) == {"order": 1}
    # Renumbering the leaves to hide the new order breaks their inclusion proofs instead.
    a, b = records[first], records[second]
    a["leafIndex"], b["leafIndex"] = b["leafIndex"], a["leafIndex"]
    report = verify(records)
    assert_detected(report, "inclusion", "not in the checkpoint's tree")
    assert dict(report.failed) == {"inclusion": 2}


def test_bundle_detects_a_signature_without_its_key_event(world: World) -> None:
    records = parse(world.bundle(runs=[SEED_RUN]))
    key_event = next(
        r
        for r in event_lines(records, "Principal.Registered")
        if r["aggregate"] == str(principal_id(world.attester.key_id))
    )
    records.remove(key_event)
    set_footer(records)  # even with the count fixed up
    report = verify(records)
    assert_detected(report, "signature", "no signature is by a registered key")
    assert_detected(report, "complete", "the log has 1 events, the bundle 0")
    assert dict(report.failed) == {"signature": 2, "complete": 1}, report.findings


def test_bundle_detects_forged_checkpoints(world: World) -> None:
    records = parse(world.bundle())
    size = int(records[2]["note"].split("\n")[1])
    # A second root for the bundle's size, signed with the real log key: equivocation.
    report = verify(records, known_checkpoints=[forged_checkpoint(world, size)])
    assert_detected(
        report,
        "checkpoint",
        f"two different roots signed for tree size {size}: the log equivocated",
    )
    assert dict(report.failed) == {"checkpoint": 1}
    # A held checkpoint of an older size: the bundle must prove it extends it, and it does
    # not (it carries no consistency proof, and this one is forged anyway).
    report = verify(records, known_checkpoints=[forged_checkpoint(world, size - 1)])
    assert_detected(report, "consistency", "carries no proof that its log extends")

    # The checkpoint re-signed with another key under the same origin proves nothing, so
    # no inclusion proof holds either.
    resign_checkpoint(records, SigningKey.generate())
    report = verify(records)
    assert_detected(report, "checkpoint", "checkpoint does not verify")
    assert_detected(report, "inclusion", "no verified checkpoint to prove inclusion against")
    assert report.failed["inclusion"] == len(event_lines(records))


# ------------------------------------------------------------------ the CLI


class Cli:
    def __init__(self, home: Path, db_url: str) -> None:
        self.home = home
        self.db_url = db_url
        self.runner = CliRunner()

    def __call__(self, *args: object, code: int = 0) -> Any:
        result = self.runner.invoke(
            app,
            [str(a) for a in args],
            env={
                "KERNELINDEX_HOME": str(self.home),
                "KERNELINDEX_DB": self.db_url,
                "KERNELINDEX_KEY_PASSPHRASE": "",
            },
        )
        assert result.exit_code == code, f"{args}: exit {result.exit_code}\n{result.output}"
        assert result.exception is None or isinstance(result.exception, SystemExit)
        return result


@pytest.fixture
def cli(tmp_path: Path, db_url: str, seed_path: Path) -> Cli:
    runner = Cli(tmp_path / "home", db_url)
    runner("init")
    runner("ingest", seed_path)
    return runner


def _edit_ingestion_in_database(cli: Cli, change: Callable[[dict[str, Any]], None]) -> None:
    engine = create_engine(cli.db_url)
    try:
        with engine.begin() as conn:
            row = conn.execute(
                text("select id, state from kernelindex_events where topic like '%Run.Ingested'")
            ).one()
            state = json.loads(bytes(row.state))
            change(state)
            conn.execute(
                text("update kernelindex_events set state = :s where id = :i"),
                {"s": json.dumps(state).encode(), "i": row.id},
            )
    finally:
        engine.dispose()


def _forged_note(cli: Cli, size: int) -> Path:
    """A checkpoint for ``size`` over a root the log never had, signed with the log key."""
    origin = json.loads((cli.home / "trust-root.json").read_text())["origin"]
    log_key = SigningKey.load(cli.home / "keys" / "log.pem")
    path = cli.home / f"fork-{size}.note"
    path.write_text(
        sign_note(format_checkpoint(origin, size, b"\x09" * 32), origin, log_key.private_key())
    )
    return path


def test_cli_audit_reports_forged_checkpoints_and_an_edited_payload(cli: Cli) -> None:
    held = cli.home / "held.note"
    held.write_text(cli("log", "checkpoint").stdout)
    assert "VERIFIED" in cli("audit", "--checkpoint", held).stdout
    size = int(held.read_text().split("\n")[1])
    result = cli("audit", "--checkpoint", _forged_note(cli, size), code=1)
    assert f"two different roots signed for tree size {size}: the log equivocated" in (
        result.stdout
    )

    _edit_ingestion_in_database(cli, rewrite_statement)
    result = cli("audit", code=1)
    assert "FAILED" in result.stdout
    assert "leaf at position 4: stored event no longer matches its log leaf" in result.stdout
    assert "signature at position 4: signature does not verify" in result.stdout
    report = json.loads(cli("audit", "--json", code=1).stdout)
    assert report["verified"] is False
    assert report["checks"]["leaf"]["failed"] == 1
    assert report["checks"]["signature"]["failed"] == 1


def test_cli_verify_reports_a_changed_byte_and_forged_checkpoints(cli: Cli, tmp_path: Path) -> None:
    bundle = tmp_path / "all.jsonl"
    cli("export", "--all", "-o", bundle)
    trust_root = cli.home / "trust-root.json"
    assert "UNANCHORED" in cli("verify", bundle, code=4).stdout
    assert "VERIFIED" in cli("verify", bundle, "--trust-root", trust_root).stdout

    def tampered(change: Callable[[list[dict[str, Any]]], None]) -> Path:
        records = parse(bundle.read_text().splitlines())
        change(records)
        path = tmp_path / "tampered.jsonl"
        path.write_text("".join(dump(records)))
        return path

    # One character of the ingestion's signature.
    target = event_lines(parse(bundle.read_text().splitlines()), "Run.Ingested")[0]

    def change_sig(records: list[dict[str, Any]]) -> None:
        signature = event_lines(records, "Run.Ingested")[0]["envelope"]["signatures"][0]
        signature["sig"] = _replace_char(signature["sig"], 5, BASE64)

    changed = tampered(change_sig)
    result = cli("verify", changed, code=1)
    assert "FAILED" in result.stdout
    where = f"leaf {target['leafIndex']} (position {target['position']})"
    assert f"inclusion at {where}: not in the checkpoint's tree" in result.stdout
    assert f"signature at {where}: signature does not verify" in result.stdout
    report = json.loads(cli("verify", changed, "--json", code=1).stdout)
    assert report["verified"] is False
    assert report["checks"]["inclusion"]["failed"] == 1

    # The checkpoint re-signed with another key under the same origin.
    def resign(records: list[dict[str, Any]]) -> None:
        body = records[2]["note"].split("\n\n", 1)[0] + "\n"
        records[2]["note"] = sign_note(
            body, records[0]["origin"], SigningKey.generate().private_key()
        )

    result = cli("verify", tampered(resign), "--trust-root", trust_root, code=1)
    assert "checkpoint at line 3: checkpoint does not verify" in result.stdout

    # A held checkpoint with another root for the bundle's size: equivocation.
    size = int(parse(bundle.read_text().splitlines())[2]["note"].split("\n")[1])
    result = cli("verify", bundle, "--checkpoint", _forged_note(cli, size), code=1)
    assert f"two different roots signed for tree size {size}: the log equivocated" in (
        result.stdout
    )
