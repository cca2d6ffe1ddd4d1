"""The ledger's event writer: eventsourcing-sqlalchemy's, with one driver INSERT per group.

eventsourcing-sqlalchemy stores events through the ORM: one mapped object per event, added
to the session and flushed for its autoincremented id. That unit of work cost ~150 µs per
event of a signed ingestion (issue 16's profile, more than the Ed25519 check), and a Core
``INSERT … RETURNING`` executemany still ~60 µs (issue 36). Here the same rows go to the
driver as they are (``ledger.store.driver_rows``): on PostgreSQL one multi-row ``INSERT …
RETURNING`` whose ids come back with each row's unique (originator id, version), on SQLite one
executemany whose ids follow from the last one (``_sqlite_insert``), inside the same transaction,
after the same table lock, followed by the same NOTIFY; everything else — the schema, the
transaction, the conversion of database errors (a version conflict is still an
``IntegrityError``: SQLAlchemy wraps what the driver raises) — is the library's.
``PERSISTENCE_MODULE=ledger.store.batched_writes:BatchedWritesFactory``
(``ledger.application.WRITING_PERSISTENCE`` names it without importing it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing_sqlalchemy.factory import SQLAlchemyFactory
from eventsourcing_sqlalchemy.recorders import SQLAlchemyApplicationRecorder
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from ledger.store import wal_checkpoints
from ledger.store.driver_rows import Row, insert_returning, insert_rows, select_rows
from ledger.store.read_door import uuid_param, uuid_result
from ledger.store.sqlite_blobs import blob_param

_COLUMNS = ("originator_id", "originator_version", "topic", "state")
_RETURNING = ("id", "originator_id", "originator_version")


class BatchedApplicationRecorder(SQLAlchemyApplicationRecorder):
    # Set by the factory for a SQLite file (``ledger.store.wal_checkpoints``).
    wal_checkpoints: wal_checkpoints.WalCheckpoints | None = None

    def _insert_stored_events(
        self, session: Session, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int]:
        if not stored_events:
            return []
        if self._has_autoincrementing_ids:
            self._lock_table(session)
        dialect = session.get_bind().dialect.name
        rows = [
            (
                blob_param(dialect, uuid_param(dialect, uuid_result(e.originator_id))),
                e.originator_version,
                e.topic,
                blob_param(dialect, e.state),
            )
            for e in stored_events
        ]
        table = self.events_table_name
        if self.schema_name is not None:
            table = f"{self.schema_name}.{table}"
        if dialect == "sqlite":
            found = _sqlite_insert(session, table, rows)
        else:
            found = _returning_insert(session, table, rows)
        self._notify_channel(session)
        return found

    def _lock_table(self, session: Session) -> None:
        """The library's lock (PostgreSQL: LOCK TABLE … IN EXCLUSIVE MODE, to the commit),
        through the driver: its text() through the ORM session cost ~2x the client CPU."""
        if session.get_bind().dialect.name != "postgresql":
            super()._lock_table(session)
            return
        table = self.events_table_name
        if self.schema_name is not None:
            table = f"{self.schema_name}.{table}"
        session.connection().exec_driver_sql(f"LOCK TABLE {table} IN EXCLUSIVE MODE")


def _returning_insert(session: Session, table: str, rows: Sequence[Row]) -> list[int]:
    """The rows' positions from one multi-row INSERT … RETURNING a chunk, matched to the
    rows by their unique (originator id, version): RETURNING promises no order."""
    returned = insert_returning(session, table, _COLUMNS, rows, _RETURNING)
    ids = {
        (uuid_result(aggregate), int(version)): int(position)
        for position, aggregate, version in returned
    }
    return [ids[(uuid_result(row[0]), int(row[1]))] for row in rows]


def _sqlite_insert(session: Session, table: str, rows: Sequence[Row]) -> list[int]:
    """The rows' positions, stored by one executemany (sqlite3 steps one prepared statement
    per row: a third of what a multi-row INSERT … RETURNING costs SQLite, issue 36).

    SQLite gives a new row the largest rowid in the table plus one (https://sqlite.org/
    autoinc.html; with AUTOINCREMENT, the largest ever plus one), unless the largest is
    already 2^63-1, when it picks an unused one at random. This transaction holds the write
    lock from its first row, so when the last row's id is the table's largest after the
    insert, none was picked at random and each row took the one before's plus one: the ids
    run ``last - n + 1 .. last`` in the rows' order. Otherwise each is looked up by its key."""
    insert_rows(session, table, _COLUMNS, rows)
    last, largest = select_rows(
        session,
        f"SELECT last_insert_rowid(), (SELECT max(id) FROM {table})",  # noqa: S608 - our names
    )[0]
    if last is not None and last == largest:
        return list(range(int(last) - len(rows) + 1, int(last) + 1))
    by_key = f"SELECT id FROM {table} WHERE originator_id = ? AND originator_version = ?"  # noqa: S608
    return [int(select_rows(session, by_key, (row[0], row[1]))[0][0]) for row in rows]


class BatchedWritesFactory(SQLAlchemyFactory):
    application_recorder_class = BatchedApplicationRecorder

    def application_recorder(self) -> BatchedApplicationRecorder:
        recorder = super().application_recorder()
        assert isinstance(recorder, BatchedApplicationRecorder)
        engine = self.datastore.engine
        if isinstance(engine, Engine):
            # SQLite's WAL checkpoints off the committing thread (ledger.store.wal_checkpoints).
            recorder.wal_checkpoints = wal_checkpoints.for_engine(
                engine, self.datastore.is_sqlite_filedb
            )
            self._wal_checkpoints = recorder.wal_checkpoints
        return recorder

    def close(self) -> None:
        found = getattr(self, "_wal_checkpoints", None)
        if found is not None:
            found.close()
        super().close()
