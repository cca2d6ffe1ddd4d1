"""The read-only event store (ledger/store/read_only.py) reads exactly what eventsourcing-sqlalchemy
wrote, on SQLite and PostgreSQL, and appends nothing."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import ProgrammingError
from eventsourcing_sqlalchemy.models import StoredEventRecord
from sqlalchemy import create_engine

from domain.statements import Role
from domain.timestamps import format_time, utc_now
from ledger.application import Ledger
from ledger.errors import StoreError
from ledger.signing.authoring import (
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
)
from ledger.signing.keys import SigningKey
from ledger.signing.trust import TrustRoot
from ledger.store.read_only import ReadRecorder, events_table
from projections.runner import ProjectionRunner

COHORT = Path(__file__).resolve().parents[2] / "api" / "demo_data" / "sol-056-cohort.json"


def _filled(db_url: str) -> tuple[Ledger, TrustRoot, list[str]]:
    admin, ingester, log = (SigningKey.generate() for _ in range(3))
    root = TrustRoot("test/read-store", (admin.public,), log.public, format_time(utc_now()))
    ledger = Ledger(db_url, root, log_key=log)
    ledger.append(key_registration_envelope(admin.public, [Role.ADMIN], admin))
    ledger.append(key_registration_envelope(ingester.public, [Role.INGESTER], admin))
    attester = SigningKey.generate()
    ledger.append(key_registration_envelope(attester.public, [Role.ATTESTER], admin))
    runs = []
    for manifests in json.loads(COHORT.read_text())["cohort"]:
        receipt = ledger.append(ingestion_envelope(copy.deepcopy(manifests), ingester))
        runs.append(receipt.subject_digest)
        name = manifests["run"]["metadata"]["name"]
        ledger.append(
            attestation_envelope(
                receipt.subject_digest, name, attester, type_="note", body="read me back"
            )
        )
    return ledger, root, runs


def _columns(table: Any, dialect: Any) -> list[tuple[str, str, bool, bool]]:
    return [
        (c.name, str(c.type.compile(dialect)), bool(c.nullable), bool(c.primary_key))
        for c in table.columns
    ]


def test_the_event_table_is_eventsourcing_sqlalchemys_on_each_backend(db_url: str) -> None:
    """Same columns, same types as the backend compiles them (the 16-byte id on SQLite,
    ``uuid`` on PostgreSQL), same keys: one table, read through two descriptions of it."""
    writer, _, _ = _filled(db_url)
    theirs = writer.recorder.events_record_cls.__table__  # type: ignore[attr-defined]
    dialect = create_engine(db_url).dialect
    assert _columns(events_table, dialect) == _columns(theirs, dialect)
    assert issubclass(writer.recorder.events_record_cls, StoredEventRecord)  # type: ignore[attr-defined]
    writer.close()


def test_a_read_only_ledger_reads_what_the_writer_stored(db_url: str) -> None:
    writer, root, runs = _filled(db_url)
    reader = Ledger(db_url, root, read_only=True)
    assert isinstance(reader.recorder, ReadRecorder)
    theirs, ours = writer.recorder, reader.recorder
    assert ours.max_notification_id() == theirs.max_notification_id()
    top = theirs.max_notification_id() or 0
    for start, inclusive in ((None, True), (1, True), (3, False), (top, True)):
        a = theirs.select_notifications(start, 100, inclusive_of_start=inclusive)
        b = ours.select_notifications(start, 100, inclusive_of_start=inclusive)
        assert [(n.id, n.originator_id, n.originator_version, n.topic, n.state) for n in b] == [
            (n.id, n.originator_id, n.originator_version, n.topic, n.state) for n in a
        ]
    for digest in runs:
        w, r = writer.run(digest), reader.run(digest)
        assert w is not None and r is not None
        assert (r.version, r.manifests(), r.attestation_count) == (
            w.version,
            w.manifests(),
            w.attestation_count,
        )
        stored = theirs.select_events(w.id, gt=0, desc=True, limit=1)
        assert ours.select_events(w.id, gt=0, desc=True, limit=1) == stored
    # The read models fold the same through either: folded by the writer's ledger, then
    # dropped and refolded from the log as the read-only store reads it.
    ProjectionRunner(writer).catch_up()
    folded = ProjectionRunner(writer).table_digests()
    ProjectionRunner(reader).rebuild()
    assert ProjectionRunner(reader).table_digests() == folded
    writer.close()
    reader.close()


def test_a_read_only_ledger_appends_nothing(db_url: str) -> None:
    writer, root, _ = _filled(db_url)
    before = writer.recorder.max_notification_id()
    reader = Ledger(db_url, root, read_only=True)
    admin = SigningKey.generate()
    with pytest.raises(StoreError, match="opened to read"):
        reader.append(key_registration_envelope(admin.public, [Role.ADMIN], admin))
    with pytest.raises(ProgrammingError, match="opened to read"):
        reader.recorder.insert_events([])
    assert writer.recorder.max_notification_id() == before
    writer.close()
    reader.close()
