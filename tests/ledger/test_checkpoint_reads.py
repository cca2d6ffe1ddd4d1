"""Reads never write: the commit that grows the log signs its checkpoint, in its own
transaction, and a read of the checkpoint only reads (issue 33). After every acknowledged
write (an append, a group, an import, ``kernelindex init``, a catch-up after a crash) the
checkpoint a reader gets covers exactly the log's size. On SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from test_importing import records, setup  # noqa: F401 - fixture
from test_transparency_log import (  # noqa: F401 - fixture
    SEED_NAME,
    SEED_RUN,
    World,
    _store_without_sequencing,
    verifier,
    world,
)

from ledger.application import Ledger
from ledger.home import LedgerHome
from ledger.importing import Importer
from ledger.proofs.signed_note import open_checkpoint
from ledger.signing.authoring import attestation_envelope
from ledger.store.log_queries import checkpoint_json
from ledger.store.transparency_log import NoLogKeyError, checkpoints
from tests.ledger.statement_count import statements_sent, writing


def _size(ledger: Ledger) -> int:
    with ledger.store.transaction(commit=False) as session:
        return ledger.tlog.tree_size(session)


def _stored_sizes(ledger: Ledger) -> list[int]:
    with ledger.store.transaction(commit=False) as session:
        return [c.size for c in ledger.tlog.checkpoints(session)]


def _read_writes_nothing_and_covers_the_log(ledger: Ledger) -> dict[str, Any]:
    """Read the checkpoint as the API and the CLI do (``checkpoint_json``) and as export
    does (``tlog.checkpoint``): no statement that writes or takes a write lock, and the
    note, verified with the log key, is of the tree as it stands."""
    with statements_sent(ledger.store.engine) as sent:
        served = checkpoint_json(ledger)
        read = ledger.tlog.checkpoint()
    assert sent, "the reads went to this engine"
    assert writing(sent) == []
    size = _size(ledger)
    assert served["size"] == read.size == size == ledger.store.last_position()
    body, _ = open_checkpoint(served["note"], [ledger.tlog.verifier], origin=ledger.tlog.origin)
    assert body.size == size
    with ledger.store.transaction(commit=False) as session:
        assert body.root == read.root == ledger.tlog.root(session, size)
    return served


def test_a_read_after_a_write_writes_nothing_and_covers_the_log(world: World, db_url: str) -> None:
    receipt = world.attest("one more")
    # A reader without the log key (an API worker) is served the checkpoint the writer
    # signed; reading twice gives the very same stored note, signedAt included.
    reader = Ledger(db_url, world.root, read_only=True)
    try:
        served = _read_writes_nothing_and_covers_the_log(reader)
        assert served == _read_writes_nothing_and_covers_the_log(reader)
    finally:
        reader.close()
    assert receipt.inclusion is not None
    assert served["size"] == receipt.inclusion.tree_size
    # The writer's own object reads without writing too.
    assert _read_writes_nothing_and_covers_the_log(world.ledger) == served


def test_each_commit_signs_once_however_many_events_it_carries(world: World) -> None:
    before = _stored_sizes(world.ledger)
    assert before == [1, 2, 3, 4], "each of the fixture's four appends was one commit"
    notes = [
        attestation_envelope(SEED_RUN, SEED_NAME, world.attester, type_="note", body=f"n{i}")
        for i in range(20)
    ]
    assert all(not isinstance(r, Exception) for r in world.ledger.append_many(notes))
    assert _stored_sizes(world.ledger) == [*before, 24], "one checkpoint for the group of 20"
    _read_writes_nothing_and_covers_the_log(world.ledger)


def test_an_import_leaves_a_checkpoint_of_the_log_it_made(setup: Any) -> None:
    ledger, importer, _ = setup
    before = _stored_sizes(ledger)
    summary = importer.run(records())
    assert summary.events == 3
    assert _stored_sizes(ledger) == [*before, before[-1] + 3], "one signature per group"
    _read_writes_nothing_and_covers_the_log(ledger)

    # Changed records, one to a group: each group commits its ingestion, then supersedes
    # the old run in a second commit, and each commit leaves its checkpoint.
    def faster(manifests: dict[str, Any]) -> None:
        manifests["run"]["spec"]["timing"]["latencyNs"]["mean"] -= 1000

    grown = _stored_sizes(ledger)
    again = Importer(ledger, importer.ingester, importer.admin, group=1).run(records(faster))
    assert (again.superseded, again.events) == (3, 6)
    assert _stored_sizes(ledger) == [*grown, *range(grown[-1] + 1, grown[-1] + 7)]
    _read_writes_nothing_and_covers_the_log(ledger)


def test_init_leaves_a_checkpoint_of_its_registrations(empty_db_url: str, tmp_path: Path) -> None:
    home = LedgerHome.at(tmp_path / "home", empty_db_url)
    home.initialise(origin="test.kernelindex/init").close()
    reader = home.open(read_only=True)
    try:
        served = _read_writes_nothing_and_covers_the_log(reader)
    finally:
        reader.close()
    assert served["size"] == 3  # the admin, ingester and log keys, in one commit
    assert served["origin"] == "test.kernelindex/init"


def test_a_catch_up_signs_the_tree_it_grew(world: World) -> None:
    _store_without_sequencing(world, "stored, then the process died")
    restarted = world.open_ledger()
    assert restarted.tlog.catch_up() == 1
    assert _stored_sizes(restarted)[-1] == 5
    _read_writes_nothing_and_covers_the_log(restarted)


def test_a_tree_grown_without_the_log_key_is_signed_on_read_but_not_stored(
    world: World, db_url: str
) -> None:
    """A writer without the log key stores no checkpoint. A reader that has the key signs
    the tree on read and stores nothing (the same note the sequencer stores later); one
    that has not refuses as before (no-log-key) rather than serve an older checkpoint."""
    keyless = Ledger(db_url, world.root)
    try:
        keyless.append(
            attestation_envelope(SEED_RUN, SEED_NAME, world.attester, type_="note", body="x")
        )
        assert _stored_sizes(keyless)[-1] == 4 and _size(keyless) == 5
        with pytest.raises(NoLogKeyError):
            keyless.tlog.checkpoint()
    finally:
        keyless.close()
    signed = _read_writes_nothing_and_covers_the_log(world.ledger)
    with world.ledger.store.transaction(commit=False) as session:
        unstored = session.execute(
            select(func.count()).select_from(checkpoints).where(checkpoints.c.size == 5)
        ).scalar_one()
    assert unstored == 0
    stored = world.ledger.tlog.sign_checkpoint()  # what `kernelindex sequencer` does
    assert (stored.size, stored.note) == (5, signed["note"])
    opened, _ = open_checkpoint(stored.note, [verifier(world)], origin=world.root.origin)
    assert opened.size == 5
