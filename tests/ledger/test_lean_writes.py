"""The lean write path (``ledger.store.driver_rows``: events, leaves and nodes handed to the
driver) stores what the ORM path stored, on SQLite and PostgreSQL.

The same signed envelopes, in the same groups and under the same clock, are appended to two
fresh ledgers: one writing as the ledger does now, one as it did before issue 36 —
eventsourcing-sqlalchemy's own ORM recorder for the events and eventsourcing's own JSON
transcoder for their state, SQLAlchemy Core inserts for the log's leaves and nodes. Every
stored row (events, leaves, nodes, checkpoints, group index) and every receipt must be the
same; the lean ledger's rows must read back through eventsourcing's repository (the
aggregates) and pass the audit. A sweep over group splits
(one per commit, small groups, one group of all) and contents (ingestions, attestations, key
registrations, a duplicate within a group and across groups, refusals between admitted
envelopes)."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import JSONTranscoder
from sqlalchemy import create_engine, select, text
from sqlalchemy.engine import make_url

import ledger.application as application
import ledger.store.log_leaves as log_leaves
from benchmarks.generate import synthetic_manifests
from domain.errors import DomainError
from domain.statements import Role
from domain.timestamps import format_time
from ledger.application import Ledger
from ledger.audit import audit_ledger
from ledger.logged_event import LoggedEvent
from ledger.signing.authoring import (
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
)
from ledger.signing.keys import SigningKey
from ledger.signing.trust import TrustRoot
from ledger.store import driver_rows
from ledger.store.event_store import StoreSession
from ledger.store.group_index import group_members
from ledger.store.lean_transcoder import LeanJSONTranscoder
from ledger.store.log_tables import checkpoints, leaves, nodes
from ledger.store.schema import upgrade

START = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


class StepClock:
    """The same times for both ledgers: each reading 1 ms after the last."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def two_db_urls(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two empty event stores on one backend, the ledger's schema created."""
    if request.param == "sqlite":
        urls = (f"sqlite:///{tmp_path / 'orm.db'}", f"sqlite:///{tmp_path / 'lean.db'}")
        for url in urls:
            upgrade(url)
        yield urls
        return
    server = request.getfixturevalue("pg_server")
    names = [f"kernelindex_test_{uuid.uuid4().hex[:16]}" for _ in range(2)]
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            for name in names:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
        made = tuple(
            make_url(server).set(database=n).render_as_string(hide_password=False) for n in names
        )
        for url in made:
            upgrade(url)
        yield made[0], made[1]
    finally:
        with admin.connect() as conn:
            for name in names:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _core_insert_tables(session: StoreSession, inserts: Any) -> None:
    """How the log wrote its leaves and nodes before: SQLAlchemy Core, one dict a row."""
    for table, columns, rows, _ in inserts:
        if rows:
            target = {leaves.name: leaves, nodes.name: nodes}[table]
            session.execute(target.insert(), [dict(zip(columns, row, strict=True)) for row in rows])


def _open(url: str, root: TrustRoot, log: SigningKey, *, orm: bool) -> Ledger:
    """A ledger writing through the lean path, or (``orm``) as before issue 36."""
    if not orm:
        return Ledger(url, root, clock=StepClock(), log_key=log)
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(application, "WRITING_PERSISTENCE", "eventsourcing_sqlalchemy")
        mp.setattr(application, "WRITING_TRANSCODER", "eventsourcing.persistence:JSONTranscoder")
        return Ledger(url, root, clock=StepClock(), log_key=log)
    finally:
        mp.undo()


def _append_all(
    ledger: Ledger, groups: list[list[object]], *, orm: bool
) -> list[LoggedEvent | DomainError]:
    out: list[LoggedEvent | DomainError] = []
    mp = pytest.MonkeyPatch()
    try:
        if orm:
            mp.setattr(log_leaves, "insert_tables", _core_insert_tables)
        for group in groups:
            out.extend(ledger.append_many(group))
    finally:
        mp.undo()
    return out


# eventsourcing stamps each event with the wall clock when the aggregate made it: the only
# bytes of a stored event that no ledger input decides, masked (and only it).
_WALL_STAMP = re.compile(rb'^\{"timestamp":\{"_type_":"datetime_iso","_data_":"[^"]+"\},')


def _masked(state: bytes) -> bytes:
    masked, count = _WALL_STAMP.subn(b'{"timestamp":"(wall clock)",', state)
    assert count == 1, state[:80]
    return masked


def _rows(ledger: Ledger) -> dict[str, list[tuple[Any, ...]]]:
    e = ledger.store.events.c
    with ledger.store.transaction(commit=False) as session:

        def rows(query: Any) -> list[tuple[Any, ...]]:
            return [
                tuple(bytes(v) if isinstance(v, memoryview) else v for v in r)
                for r in session.execute(query)
            ]

        return {
            "events": [
                (*r[:4], _masked(r[4]))
                for r in rows(
                    select(e.id, e.originator_id, e.originator_version, e.topic, e.state).order_by(
                        e.id
                    )
                )
            ],
            "leaves": rows(select(leaves).order_by(leaves.c.leaf_index)),
            "nodes": rows(select(nodes).order_by(nodes.c.level, nodes.c.idx)),
            # signed_at is when the note was signed (the wall clock): not the log's content.
            "checkpoints": rows(
                select(checkpoints.c.size, checkpoints.c.root, checkpoints.c.note).order_by(
                    checkpoints.c.size
                )
            ),
            "groups": rows(select(group_members).order_by(*group_members.c)),
        }


def _receipt(r: LoggedEvent | DomainError) -> Any:
    if isinstance(r, DomainError):
        return (type(r).__name__, r.code, str(r))
    return (
        r.position,
        r.aggregate_id,
        r.version,
        r.event,
        r.envelope_digest,
        r.received_at,
        r.duplicate,
        r.signer,
        r.inclusion,
    )


def signed_world(
    seed_path: Path, origin: str
) -> tuple[dict[str, SigningKey], TrustRoot, list[object]]:
    """Fresh admin, ingester, attester and log keys, a trust root at ``origin`` made the day
    before ``START``, and ``_envelopes`` of the seed under those keys."""
    keys = {name: SigningKey.generate() for name in ("admin", "ingester", "attester", "log")}
    root = TrustRoot(
        origin=origin,
        admin_keys=(keys["admin"].public,),
        log_key=keys["log"].public,
        created_at=format_time(START - timedelta(days=1)),
    )
    return keys, root, _envelopes(json.loads(seed_path.read_text()), keys)


def _envelopes(seed: dict[str, Any], keys: dict[str, SigningKey]) -> list[object]:
    """Key registrations, ingestions, attestations, a resent envelope, refusals."""
    admin, ingester, attester = keys["admin"], keys["ingester"], keys["attester"]
    at = START
    envs: list[object] = [
        key_registration_envelope(admin.public, [Role.ADMIN], admin, now=at),
        key_registration_envelope(ingester.public, [Role.INGESTER], admin, now=at),
        key_registration_envelope(attester.public, [Role.ATTESTER], attester, now=at),
    ]
    runs = []
    for i in range(12):
        envelope = ingestion_envelope(synthetic_manifests(seed, i), ingester, now=at)
        envs.append(envelope)
        runs.append(json.loads(json.dumps(envelope)))
    envs.append(runs[3])  # stored already: its original receipt, nothing new
    envs.append({"payloadType": "nonsense"})  # refused: not an envelope
    envs.append(ingestion_envelope(synthetic_manifests(seed, 99), attester, now=at))  # wrong role
    subjects = [
        (f"sha256:{d['subject'][0]['digest']['sha256']}", d["subject"][0]["name"])
        for d in (_statement(r) for r in runs)
    ]
    for i, (digest, name) in enumerate(subjects[:8]):
        envs.append(
            attestation_envelope(digest, name, attester, type_="note", body=f"note {i}", now=at)
        )
    envs.append(envs[-1])  # the same attestation twice in a row
    for i in range(12, 20):
        envs.append(ingestion_envelope(synthetic_manifests(seed, i), ingester, now=at))
    return envs


def _statement(envelope: dict[str, Any]) -> dict[str, Any]:
    import base64

    decoded: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))
    return decoded


SPLITS: dict[str, Callable[[list[object]], list[list[object]]]] = {
    "one per commit": lambda e: [[x] for x in e],
    "groups of 5": lambda e: [e[i : i + 5] for i in range(0, len(e), 5)],
    "groups of 32": lambda e: [e[i : i + 32] for i in range(0, len(e), 32)],
    "one group": lambda e: [list(e)],
}


@pytest.mark.parametrize("split", list(SPLITS))
def test_lean_path_stores_what_the_orm_path_stored(
    two_db_urls: tuple[str, str], seed_path: Path, split: str
) -> None:
    keys = {name: SigningKey.generate() for name in ("admin", "ingester", "attester", "log")}
    root = TrustRoot(
        origin="test.kernelindex/lean",
        admin_keys=(keys["admin"].public,),
        log_key=keys["log"].public,
        created_at=format_time(START - timedelta(days=1)),
    )
    envelopes = _envelopes(json.loads(seed_path.read_text()), keys)
    groups = SPLITS[split](envelopes)
    stored: dict[str, Any] = {}
    for orm, url in zip((True, False), two_db_urls, strict=True):
        ledger = _open(url, root, keys["log"], orm=orm)
        # Each path writes its events' state with its own transcoder (same bytes, below).
        assert type(ledger.mapper.transcoder) is (JSONTranscoder if orm else LeanJSONTranscoder)
        try:
            receipts = _append_all(ledger, groups, orm=orm)
            stored[str(orm)] = ([_receipt(r) for r in receipts], _rows(ledger))
            if not orm:
                # What the lean path wrote reads back as the ledger's own events.
                report = audit_ledger(ledger)
                assert report.verified, report
                runs = [
                    r for r in receipts if isinstance(r, LoggedEvent) and r.event == "Run.Ingested"
                ]
                assert runs
                for r in runs:
                    run = ledger.run(r.subject_digest)
                    assert run is not None and run.id == r.aggregate_id
        finally:
            ledger.close()
    orm_receipts, orm_rows = stored["True"]
    lean_receipts, lean_rows = stored["False"]
    assert lean_receipts == orm_receipts
    refused = [r for r in lean_receipts if isinstance(r[0], str)]
    assert len(refused) == 2  # the nonsense and the wrong role; the rest admitted or resent
    assert any(r[6] for r in lean_receipts if not isinstance(r[0], str))  # a duplicate
    for table, rows in orm_rows.items():
        assert lean_rows[table] == rows, table
    assert len(lean_rows["events"]) == len(envelopes) - 4  # 2 refused, 2 resent
    assert lean_rows["nodes"] and lean_rows["checkpoints"]


def test_driver_errors_keep_their_classes(empty_db_url: str) -> None:
    """A version conflict raised by the driver is still the IntegrityError the append retry
    and ``ledger.errors`` read (SQLAlchemy wraps what exec_driver_sql's driver raises): from
    SQLite's executemany and from PostgreSQL's multi-row VALUES list alike."""
    from sqlalchemy.exc import IntegrityError

    upgrade(empty_db_url)
    engine = create_engine(empty_db_url)
    try:
        with engine.begin() as conn:
            row = (1, 1, b"h" * 32)
            driver_rows.insert_rows(conn, nodes.name, ("level", "idx", "hash"), [row])
            with pytest.raises(IntegrityError):
                driver_rows.insert_rows(conn, nodes.name, ("level", "idx", "hash"), [row, row])
    finally:
        engine.dispose()


def test_the_engines_listeners_see_every_statement_the_driver_runs(empty_db_url: str) -> None:
    """Statements handed to the driver still fire the engine's cursor events, so a listener
    (the tests that hold reads to writing nothing: ``statement_count``) sees each one."""
    from tests.ledger.statement_count import statements_sent, writing

    upgrade(empty_db_url)
    engine = create_engine(empty_db_url)
    columns = ("level", "idx", "hash")
    try:
        with statements_sent(engine) as sent, engine.begin() as conn:
            driver_rows.insert_rows(conn, nodes.name, columns, [(3, 0, b"a" * 32)])
            driver_rows.insert_rows(
                conn, nodes.name, columns, [(3, 1, b"b" * 32), (3, 2, b"c" * 32)]
            )
            found = driver_rows.select_rows(
                conn, f"SELECT idx FROM {nodes.name} WHERE level = 3 ORDER BY idx", ()
            )
        assert [tuple(r) for r in found] == [(0,), (1,), (2,)]
        assert len(writing(sent)) == 2 and sent[-1].startswith("SELECT idx")
    finally:
        engine.dispose()


def test_multi_row_chunks_store_every_row(empty_db_url: str, monkeypatch: Any) -> None:
    """Rows beyond one statement's chunk (PostgreSQL's multi-row VALUES) are all stored, in
    their order, and ON CONFLICT keeps a stored row as it is on both backends."""
    monkeypatch.setattr(driver_rows, "_PARAMETERS", 7)  # two rows of 3 a statement
    upgrade(empty_db_url)
    engine = create_engine(empty_db_url)
    columns = ("level", "idx", "hash")
    try:
        with engine.begin() as conn:
            rows = [(2, i, bytes([i]) * 32) for i in range(5)]
            driver_rows.insert_rows(conn, nodes.name, columns, rows)
            again = [(2, 4, b"x" * 32), (2, 5, b"y" * 32), (2, 6, b"z" * 32)]
            driver_rows.insert_rows(conn, nodes.name, columns, again, keep=("level", "idx"))
            found = conn.execute(select(nodes).order_by(nodes.c.idx)).all()
        assert [(r[0], r[1], bytes(r[2])) for r in found] == [*rows, *again[1:]]
    finally:
        engine.dispose()


@pytest.mark.parametrize("largest", [None, 2**63 - 1])
def test_sqlite_event_ids_are_the_stored_ones(tmp_path: Path, largest: int | None) -> None:
    """SQLite's events go in by executemany and their ids follow from the last one
    (``batched_writes._sqlite_insert``); where SQLite picks ids at random (a row already at
    the largest rowid, 2^63-1) each is looked up instead. Either way the ids returned are
    the rows' own."""
    from eventsourcing.persistence import StoredEvent

    from ledger.store.batched_writes import BatchedApplicationRecorder

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    upgrade(url)
    keys = {name: SigningKey.generate() for name in ("admin", "log")}
    root = TrustRoot(
        origin="test.kernelindex/ids",
        admin_keys=(keys["admin"].public,),
        log_key=keys["log"].public,
        created_at=format_time(START - timedelta(days=1)),
    )
    ledger = Ledger(url, root, clock=StepClock(), log_key=keys["log"])
    try:
        recorder = ledger.recorder
        assert isinstance(recorder, BatchedApplicationRecorder)
        table = ledger.store.events.name
        events = [StoredEvent(uuid.uuid4(), v, "t:T", b"{}") for v in (1, 2, 1)]
        with ledger.store.transaction(commit=False) as session:
            if largest is not None:
                session.execute(
                    text(
                        f"INSERT INTO {table} (id, originator_id, originator_version, topic, "
                        "state) VALUES (:id, :o, 1, 't:T', x'7b7d')"
                    ),
                    {"id": largest, "o": uuid.uuid4().bytes},
                )
            ids = recorder._insert_stored_events(session, events)
            stored = {
                (bytes(r[1]), int(r[2])): int(r[0])
                for r in session.execute(
                    text(f"SELECT id, originator_id, originator_version FROM {table}")
                )
            }
            session.rollback()
        assert ids == [stored[(e.originator_id.bytes, e.originator_version)] for e in events]
        if largest is None:
            assert ids == list(range(ids[0], ids[0] + 3))
    finally:
        ledger.close()


def test_insert_tables_stores_each_tables_rows(empty_db_url: str) -> None:
    """``insert_tables`` (one statement for several tables on PostgreSQL, one by one on
    SQLite) stores every table's rows, keeps a stored row where asked, and a conflict is
    still the IntegrityError the append retry reads."""
    from sqlalchemy.exc import IntegrityError

    from ledger.store.fold_manifests import fold_manifests

    upgrade(empty_db_url)
    engine = create_engine(empty_db_url)
    leaf_columns = ("leaf_index", "position", "leaf_hash")
    node_columns = ("level", "idx", "hash")
    body_columns = ("digest", "body")
    leaf_rows = [(i, i + 1, bytes([i]) * 32) for i in range(3)]
    node_rows = [(1, 0, b"n" * 32), (1, 1, b"m" * 32)]
    new_bodies = [(b"k", b"new"), (b"j", b"b")]
    try:
        with engine.begin() as conn:
            driver_rows.insert_rows(conn, fold_manifests.name, body_columns, [(b"k", b"old")])
            driver_rows.insert_tables(
                conn,
                [
                    (leaves.name, leaf_columns, leaf_rows, ()),
                    (nodes.name, node_columns, node_rows, ()),
                    (fold_manifests.name, body_columns, new_bodies, ("digest",)),
                    (checkpoints.name, ("size", "root", "note", "signed_at"), [], ()),
                ],
            )
            found_leaves = conn.execute(select(leaves).order_by(leaves.c.leaf_index)).all()
            found_nodes = conn.execute(select(nodes).order_by(nodes.c.idx)).all()
            bodies = conn.execute(select(fold_manifests).order_by(fold_manifests.c.digest)).all()
        assert [(r[0], r[1], bytes(r[2])) for r in found_leaves] == leaf_rows
        assert [(r[0], r[1], bytes(r[2])) for r in found_nodes] == node_rows
        assert [(bytes(r[0]), bytes(r[1])) for r in bodies] == [(b"j", b"b"), (b"k", b"old")]
        with engine.begin() as conn, pytest.raises(IntegrityError):
            driver_rows.insert_tables(
                conn,
                [
                    (nodes.name, node_columns, [(2, 0, b"x" * 32)], ()),
                    (leaves.name, leaf_columns, leaf_rows[:1], ()),
                ],
            )
    finally:
        engine.dispose()
