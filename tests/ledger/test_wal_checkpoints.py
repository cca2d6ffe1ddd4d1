"""A writing ledger's WAL checkpoints on a thread of their own (``ledger.store.wal_checkpoints``).

The thread's checkpoints copy every committed page of the WAL into the database file, on
their own connection, while SQLite's own checkpoint at 1,000 pages stays as it was (no pragma
is set on the ledger's connections). PostgreSQL and in-memory SQLite have none.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from benchmarks.generate import synthetic_manifests
from domain.statements import Role
from domain.timestamps import format_time
from ledger.application import Ledger
from ledger.signing.authoring import ingestion_envelope, key_registration_envelope
from ledger.signing.keys import SigningKey
from ledger.signing.trust import TrustRoot
from ledger.store import wal_checkpoints
from ledger.store.batched_writes import BatchedApplicationRecorder
from ledger.store.schema import EVENTS_TABLE, upgrade
from ledger.store.wal_checkpoints import WalCheckpoints

START = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
# Liveness only (a thread that never runs fails instead of hanging): never a speed bound.
_PATIENCE = 120.0


def _ledger(url: str) -> tuple[Ledger, SigningKey]:
    keys = {name: SigningKey.generate() for name in ("admin", "log")}
    root = TrustRoot(
        origin="test.kernelindex/wal",
        admin_keys=(keys["admin"].public,),
        log_key=keys["log"].public,
        created_at=format_time(START - timedelta(days=1)),
    )
    ledger = Ledger(url, root, clock=lambda: START + timedelta(seconds=1), log_key=keys["log"])
    return ledger, keys["admin"]


def _append_ingestions(ledger: Ledger, admin: SigningKey, seed_path: Path, count: int) -> None:
    seed = json.loads(seed_path.read_text())
    ingester = SigningKey.generate()
    ledger.append(key_registration_envelope(admin.public, [Role.ADMIN], admin, now=START))
    ledger.append(key_registration_envelope(ingester.public, [Role.INGESTER], admin, now=START))
    envelopes = [
        ingestion_envelope(synthetic_manifests(seed, i), ingester, now=START) for i in range(count)
    ]
    for first in range(0, count, 8):
        results = ledger.append_many(envelopes[first : first + 8])
        assert all(not isinstance(r, Exception) for r in results), results


def _checkpoints(ledger: Ledger) -> WalCheckpoints | None:
    recorder = ledger.recorder
    assert isinstance(recorder, BatchedApplicationRecorder)
    return recorder.wal_checkpoints


def _events_in_the_database_file(path: Path, scratch: Path) -> int:
    """Events in the database file alone, without its WAL: what checkpoints have copied
    into it (a copy of the file is opened, so nothing here checkpoints anything)."""
    alone = scratch / "alone.db"
    alone.write_bytes(path.read_bytes())
    with sqlite3.connect(alone) as connection:
        (count,) = connection.execute(f"SELECT count(*) FROM {EVENTS_TABLE}").fetchone()
    return int(count)


def test_only_a_sqlite_file_has_them(empty_db_url: str) -> None:
    upgrade(empty_db_url)
    ledger, _ = _ledger(empty_db_url)
    try:
        assert (_checkpoints(ledger) is not None) == empty_db_url.startswith("sqlite")
    finally:
        ledger.close()


def test_the_thread_copies_the_wal_after_enough_commits(
    tmp_path: Path, seed_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commits past the threshold wake the thread; its checkpoint leaves every committed
    frame copied into the database file; nothing is lost or changed by it; closing the
    ledger stops the thread."""
    monkeypatch.setattr(wal_checkpoints, "_EVENTS", 10)
    ran = threading.Event()
    checkpoint = WalCheckpoints.checkpoint

    def watched(self: WalCheckpoints, connection: object) -> None:
        checkpoint(self, connection)
        ran.set()

    monkeypatch.setattr(WalCheckpoints, "checkpoint", watched)
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    upgrade(url)
    ledger, admin = _ledger(url)
    try:
        checkpoints = _checkpoints(ledger)
        assert checkpoints is not None
        _append_ingestions(ledger, admin, seed_path, 16)
        assert ran.wait(_PATIENCE), "the checkpoint thread never ran"
        assert checkpoints.done >= 1
        # Once no commit runs, one more wake leaves nothing uncopied.
        ran.clear()
        checkpoints.committed(10)
        assert ran.wait(_PATIENCE)
        scratch = tmp_path / "scratch"
        scratch.mkdir()
        assert _events_in_the_database_file(tmp_path / "ledger.db", scratch) == 18
    finally:
        ledger.close()
    thread = checkpoints._thread
    assert thread is not None and not thread.is_alive()
    reopened, _ = _ledger(url)
    try:
        assert reopened.store.last_position() == 18  # two keys, 16 ingestions
        assert len(list(reopened.run_index())) == 16
    finally:
        reopened.close()


def test_a_thread_that_cannot_start_fails_no_commit(
    tmp_path: Path, seed_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Out of threads (``Thread.start`` raises): every append still gets its receipt, the
    ledger keeps what it stored, and SQLite's own checkpoints are left to do the work."""

    def refused(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refused)
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    upgrade(url)
    ledger, admin = _ledger(url)
    try:
        checkpoints = _checkpoints(ledger)
        assert checkpoints is not None
        _append_ingestions(ledger, admin, seed_path, 16)  # every result a receipt
        assert checkpoints._thread is None or not checkpoints._thread.is_alive()
        assert checkpoints.done == 0
    finally:
        ledger.close()
    monkeypatch.undo()
    reopened, _ = _ledger(url)
    try:
        assert reopened.store.last_position() == 18
    finally:
        reopened.close()


def test_closed_from_its_own_thread_it_does_not_join_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ledger dropped without close() is closed by the collector, on whichever thread it
    runs, the checkpoint thread included: closing there stops the thread, raises nothing."""
    from sqlalchemy import create_engine

    engine = create_engine(f"sqlite:///{tmp_path / 'w.db'}")
    checkpoints = WalCheckpoints(engine)
    try:
        checkpoints.committed(1)  # the first commit starts the thread
        thread = checkpoints._thread
        assert thread is not None and thread.is_alive()
        monkeypatch.setattr(threading, "current_thread", lambda: thread)
        checkpoints.close()  # "cannot join current thread" before the fix
        monkeypatch.undo()
        thread.join(30)  # it ends on its own once stopping
        assert not thread.is_alive()
    finally:
        checkpoints.close()
        engine.dispose()
