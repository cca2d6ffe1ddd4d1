"""The transparency log behind the ledger (DESIGN.md §6), on SQLite and PostgreSQL: every
stored event gets exactly one dense leaf, every write comes back with an inclusion proof
that verifies, checkpoints are signed by each commit, once per size, and consistent with
each other, and a crash between storing and sequencing is caught up exactly once."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from domain.statements import Role
from domain.timestamps import format_time, utc_now
from ledger.aggregates import Signed
from ledger.application import Ledger
from ledger.audit import audit_ledger
from ledger.logged_event import LoggedEvent
from ledger.proofs.log_entries import LogEntry
from ledger.proofs.merkle import ProofError, root, verify_consistency, verify_inclusion
from ledger.proofs.signed_note import NoteError, Verifier, open_checkpoint
from ledger.signing.authoring import (
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
)
from ledger.signing.dsse import parse_envelope
from ledger.signing.keys import SigningKey
from ledger.signing.trust import TrustRoot

SEED_RUN = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
SEED_NAME = "sol-submission-38823"
ORIGIN = "test.kernelindex/log"


@dataclass
class World:
    ledger: Ledger
    root: TrustRoot
    admin: SigningKey
    ingester: SigningKey
    attester: SigningKey
    log: SigningKey
    seed: dict[str, Any]
    open_ledger: Callable[[], Ledger]
    receipts: list[LoggedEvent]

    def attest(self, body: str, ledger: Ledger | None = None) -> LoggedEvent:
        envelope = attestation_envelope(SEED_RUN, SEED_NAME, self.attester, type_="note", body=body)
        receipt = (ledger or self.ledger).append(envelope)
        self.receipts.append(receipt)
        return receipt


@pytest.fixture
def world(db_url: str, seed_path: Path) -> World:
    """Three keys registered (leaves 0-2), then the seed run ingested (leaf 3)."""
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
    assert receipts[-1].subject_digest == SEED_RUN
    return World(ledger, trust, admin, ingester, attester, log, seed, open_ledger, receipts)


def stored_leaf_hash(ledger: Ledger, receipt: LoggedEvent) -> bytes:
    """The leaf hash recomputed from the event as the database holds it."""
    (record,) = ledger.stored_records(receipt.aggregate_id, version=receipt.version)
    assert record.position == receipt.position
    return LogEntry.from_stored(
        record.position, str(record.aggregate_id), record.version, record.topic, record.state
    ).leaf_hash()


def assert_receipt_proves_inclusion(ledger: Ledger, receipt: LoggedEvent) -> None:
    proof = receipt.inclusion
    assert proof is not None, "every receipt carries an inclusion proof"
    verify_inclusion(
        stored_leaf_hash(ledger, receipt),
        proof.leaf_index,
        proof.tree_size,
        list(proof.hashes),
        proof.root,
    )


def log_entries(ledger: Ledger) -> list[tuple[int, int, bytes]]:
    """(leaf index, event position, leaf hash) of every leaf, in leaf order."""
    with ledger.store.transaction(commit=False) as session:
        size = ledger.tlog.tree_size(session)
        rows = ledger.tlog.entries(session, 0, size)
    return [(int(r[0]), int(r[1]), bytes(r[2])) for r in rows]


def event_positions(ledger: Ledger) -> list[int]:
    records = ledger.recorder.events_record_cls  # type: ignore[attr-defined]
    with ledger.store.transaction(commit=False) as session:
        return [int(p) for (p,) in session.query(records.id).order_by(records.id)]


def assert_log_is_dense_over_all_events(ledger: Ledger) -> list[tuple[int, int, bytes]]:
    entries = log_entries(ledger)
    positions = event_positions(ledger)
    assert [e[0] for e in entries] == list(range(len(positions))), "leaf indices are 0..n-1"
    assert [e[1] for e in entries] == positions, "one leaf per event, in position order"
    return entries


def verifier(w: World) -> Verifier:
    return Verifier.from_public_key(w.root.origin, w.root.log_key.raw)


# ------------------------------------------------------------------ appends and proofs


def test_appends_return_leaf_index_and_inclusion_proof_that_verifies(world: World) -> None:
    for i in range(3):
        world.attest(f"note {i}")
    assert [r.inclusion.leaf_index for r in world.receipts if r.inclusion] == list(range(7))
    for receipt in world.receipts:
        assert receipt.inclusion is not None
        # A write returns once its own leaf is in: the proof is against the tree it ended.
        assert receipt.inclusion.tree_size == receipt.inclusion.leaf_index + 1
        assert_receipt_proves_inclusion(world.ledger, receipt)
        assert receipt.to_json()["log"]["leafIndex"] == receipt.inclusion.leaf_index

    # The proofs are not vacuous: another leaf, index or root does not verify.
    last = world.receipts[-1]
    assert last.inclusion is not None
    leaf = stored_leaf_hash(world.ledger, last)
    other = stored_leaf_hash(world.ledger, world.receipts[0])
    proof = last.inclusion
    with pytest.raises(ProofError):
        verify_inclusion(other, proof.leaf_index, proof.tree_size, list(proof.hashes), proof.root)
    with pytest.raises(ProofError):
        verify_inclusion(
            leaf, proof.leaf_index - 1, proof.tree_size, list(proof.hashes), proof.root
        )
    with pytest.raises(ProofError):
        verify_inclusion(leaf, proof.leaf_index, proof.tree_size, list(proof.hashes), b"\x01" * 32)

    # An older receipt's proof still holds for the tree it was issued against, and a fresh
    # proof for the current tree (as `kernelindex log proof` serves it) verifies too.
    first = world.receipts[3]
    assert first.inclusion is not None
    with world.ledger.store.transaction(commit=False) as session:
        size = world.ledger.tlog.tree_size(session)
        fresh = world.ledger.tlog.inclusion(session, first.inclusion.leaf_index, size)
    assert fresh.root == proof.root and size == proof.tree_size
    verify_inclusion(
        stored_leaf_hash(world.ledger, first),
        fresh.leaf_index,
        size,
        list(fresh.hashes),
        fresh.root,
    )


def test_leaves_are_dense_over_all_events_in_position_order(world: World) -> None:
    for i in range(4):
        world.attest(f"note {i}")
    entries = assert_log_is_dense_over_all_events(world.ledger)
    assert len(entries) == 8
    # Key events are logged like any other: the three registrations are leaves 0, 1, 2.
    assert [r.event for r in world.receipts[:3]] == ["Principal.Registered"] * 3
    assert [r.inclusion.leaf_index for r in world.receipts[:3] if r.inclusion] == [0, 1, 2]
    # Each leaf hash is the RFC 6962 hash of the event's log entry, and the stored tree's
    # root is the root of those leaves.
    by_position = {r.position: r for r in world.receipts}
    assert all(stored_leaf_hash(world.ledger, by_position[p]) == h for _, p, h in entries)
    with world.ledger.store.transaction(commit=False) as session:
        stored_root = world.ledger.tlog.root(session, len(entries))
    assert stored_root == root([h for _, _, h in entries])
    assert world.receipts[-1].inclusion is not None
    assert world.receipts[-1].inclusion.root == stored_root


def test_identical_envelope_returns_the_original_leaf(world: World) -> None:
    envelope = attestation_envelope(SEED_RUN, SEED_NAME, world.attester, type_="note", body="x")
    first = world.ledger.append(envelope)
    world.attest("later")
    size = len(log_entries(world.ledger))
    for ledger in (world.ledger, world.open_ledger()):  # cached and fresh instances
        again = ledger.append(json.loads(json.dumps(envelope)))
        assert again.duplicate and not first.duplicate
        assert again.position == first.position
        assert again.inclusion is not None and first.inclusion is not None
        assert again.inclusion.leaf_index == first.inclusion.leaf_index
        # The duplicate's proof is against the current tree, and verifies there.
        assert again.inclusion.tree_size == size
        assert_receipt_proves_inclusion(ledger, again)
    assert len(log_entries(world.ledger)) == size, "a duplicate adds no leaf"


# ------------------------------------------------------------------ checkpoints


def test_checkpoints_are_signed_once_per_size_and_consistent(world: World) -> None:
    tlog = world.ledger.tlog
    first = tlog.checkpoint()
    assert first.size == 4
    again = world.open_ledger().tlog.sign_checkpoint()
    assert again == first, "the commit that made size 4 signed it; it is never signed again"

    # The note is a C2SP checkpoint signed by the trust root's log key, for its origin.
    body, _ = open_checkpoint(first.note, [verifier(world)], origin=ORIGIN)
    assert (body.origin, body.size, body.root) == (ORIGIN, 4, first.root)
    assert world.receipts[-1].inclusion is not None
    assert body.root == world.receipts[-1].inclusion.root
    stranger = Verifier.from_public_key(ORIGIN, SigningKey.generate().public.raw)
    with pytest.raises(NoteError):
        open_checkpoint(first.note, [stranger], origin=ORIGIN)

    for i in range(3):
        world.attest(f"note {i}")
    second = tlog.checkpoint()
    assert second.size == 7 and second.root != first.root
    new_body, _ = open_checkpoint(second.note, [verifier(world)], origin=ORIGIN)
    assert new_body.root == second.root
    with world.ledger.store.transaction(commit=False) as session:
        proof = tlog.consistency(session, first.size, second.size)
        # One checkpoint a commit, each of the size it left the tree at.
        assert [c.size for c in tlog.checkpoints(session)] == [1, 2, 3, 4, 5, 6, 7]
    verify_consistency(body.size, new_body.size, proof, body.root, new_body.root)
    with pytest.raises(ProofError):
        verify_consistency(body.size, new_body.size, proof, b"\x02" * 32, new_body.root)

    # Inclusion proofs issued against the newer tree verify under the newer signed root.
    last = world.receipts[-1]
    assert last.inclusion is not None and last.inclusion.root == new_body.root
    assert_receipt_proves_inclusion(world.ledger, last)
    assert audit_ledger(world.open_ledger()).verified


# ------------------------------------------------------------------ crash and catch-up


def _store_without_sequencing(w: World, body: str) -> dict[str, Any]:
    """Store an attestation the way a crash between commit and sequencing leaves it."""
    envelope = attestation_envelope(SEED_RUN, SEED_NAME, w.attester, type_="note", body=body)
    run = w.ledger.run(SEED_RUN)
    assert run is not None
    run.attest(
        Signed(envelope, parse_envelope(envelope).digest, format_time(utc_now()), w.attester.key_id)
    )
    w.ledger.save(run)  # bypasses append: no leaf
    return envelope


def test_catch_up_sequences_a_stored_event_exactly_once(world: World) -> None:
    _store_without_sequencing(world, "stored, then the process died")
    positions = event_positions(world.ledger)
    assert len(log_entries(world.ledger)) == len(positions) - 1, "one event has no leaf yet"

    restarted = world.open_ledger()
    assert restarted.tlog.catch_up() == 1
    assert restarted.tlog.catch_up() == 0, "a second catch-up adds nothing"
    assert world.open_ledger().tlog.catch_up() == 0
    entries = assert_log_is_dense_over_all_events(restarted)
    assert entries[-1][:2] == (4, positions[-1])

    receipt = world.attest("after the restart", ledger=restarted)
    assert receipt.inclusion is not None and receipt.inclusion.leaf_index == 5
    assert_receipt_proves_inclusion(restarted, receipt)
    # The original instance (whose cached tree state is now stale) still appends correctly.
    receipt = world.attest("from the old instance")
    assert receipt.inclusion is not None and receipt.inclusion.leaf_index == 6
    assert_receipt_proves_inclusion(world.ledger, receipt)
    assert_log_is_dense_over_all_events(world.ledger)
    assert audit_ledger(world.open_ledger()).verified


def test_pending_event_is_sequenced_by_the_next_append_or_its_retry(world: World) -> None:
    envelope = _store_without_sequencing(world, "unsequenced")
    # The client retries the write it never got an answer for: the stored event is found,
    # sequenced, and returned with its proof, without a second event.
    again = world.open_ledger().append(envelope)
    assert again.duplicate and again.inclusion is not None
    assert again.inclusion.leaf_index == 4
    assert_receipt_proves_inclusion(world.ledger, again)

    _store_without_sequencing(world, "another crash")
    receipt = world.attest("next write")  # sequences the pending event first, in order
    assert receipt.inclusion is not None and receipt.inclusion.leaf_index == 6
    assert_receipt_proves_inclusion(world.ledger, receipt)
    assert world.ledger.tlog.catch_up() == 0
    assert_log_is_dense_over_all_events(world.ledger)


# ------------------------------------------------------------------ concurrency


def test_concurrent_appends_leave_dense_unique_leaves(world: World) -> None:
    writers, per_writer = 4, 5
    ledgers = [world.open_ledger() for _ in range(writers)]
    receipts: list[LoggedEvent] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    envelopes = [
        [
            attestation_envelope(SEED_RUN, SEED_NAME, world.attester, type_="note", body=f"{k}.{i}")
            for i in range(per_writer)
        ]
        for k in range(writers)
    ]

    def write(k: int) -> None:
        try:
            for envelope in envelopes[k]:
                receipt = ledgers[k].append(envelope)
                with lock:
                    receipts.append(receipt)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(k,)) for k in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors

    indices = sorted(r.inclusion.leaf_index for r in receipts if r.inclusion)
    assert indices == list(range(4, 4 + writers * per_writer)), "unique, dense leaf indices"
    assert len({r.position for r in receipts}) == len(receipts)
    for receipt in receipts:
        assert_receipt_proves_inclusion(world.ledger, receipt)
    entries = assert_log_is_dense_over_all_events(world.ledger)
    assert len(entries) == 4 + writers * per_writer
    checkpoint = world.ledger.tlog.sign_checkpoint()
    assert checkpoint.size == len(entries)
    report = audit_ledger(world.open_ledger())
    assert report.verified, report.findings
    assert report.facts["treeSize"] == len(entries)


def test_proof_node_lookups_use_the_primary_key_not_a_scan(tmp_path: Path) -> None:
    """Proofs and roots read O(log n) nodes; the query must find them by key, or every append
    costs a scan of the whole node table (found by the growth benchmark: O(n) appends)."""
    from sqlalchemy import create_engine, event
    from sqlalchemy.orm import Session

    from ledger.proofs.merkle import inclusion_proof_from_nodes
    from ledger.store.transparency_log import metadata, nodes
    from ledger.store.tree_nodes import with_prefetch

    engine = create_engine(f"sqlite:///{tmp_path / 'nodes.db'}")
    metadata.create_all(engine)
    size = 1 << 12
    with engine.begin() as conn:
        conn.execute(
            nodes.insert(),
            [
                {"level": level, "idx": i, "hash": bytes(32)}
                for level in range(13)
                for i in range(size >> level)
            ],
        )
    statements: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, sql: str, params: Any, context: Any, many: bool) -> None:
        if "kernelindex_log_nodes" in sql and sql.lstrip().upper().startswith("SELECT"):
            statements.append((sql, params))

    event.listen(engine, "before_cursor_execute", capture)
    with Session(engine) as session:
        proof = with_prefetch(session, lambda get: inclusion_proof_from_nodes(1234, size - 3, get))
    event.remove(engine, "before_cursor_execute", capture)
    assert len(proof) > 5 and len(statements) == 1
    with engine.connect() as conn:
        plan = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statements[0][0], statements[0][1])
        details = " ".join(str(row[-1]) for row in plan)
    assert "SCAN kernelindex_log_nodes" not in details, details
    assert "USING INDEX" in details or "USING PRIMARY KEY" in details, details


def test_concurrent_catch_ups_sequence_each_pending_event_once(world: World) -> None:
    """Sequencers racing on the same pending events (a `workers sequencer` beside the
    writer, two restarted processes) each take the sequencers' lock before reading the tree:
    every event gets one leaf, and no sequencer fails on another's leaves."""
    pending = 6
    for i in range(pending):
        _store_without_sequencing(world, f"pending {i}")
    sequencers = 4
    ledgers = [world.open_ledger() for _ in range(sequencers)]
    start = threading.Barrier(sequencers)
    added: list[int] = []
    errors: list[BaseException] = []

    def catch_up(ledger: Ledger) -> None:
        try:
            start.wait()
            added.append(ledger.tlog.catch_up())
        except BaseException as exc:  # every sequencer's failure is reported, not one
            errors.append(exc)

    threads = [threading.Thread(target=catch_up, args=(ledger,)) for ledger in ledgers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert sum(added) == pending, added
    entries = assert_log_is_dense_over_all_events(world.ledger)
    assert len(entries) == 4 + pending
    assert audit_ledger(world.open_ledger()).verified
