"""The ledger's event writer: eventsourcing-sqlalchemy's, with one INSERT per group of events.

eventsourcing-sqlalchemy stores events through the ORM: one mapped object per event, added
to the session and flushed for its autoincremented id. That unit of work cost ~150 µs per
event of a signed ingestion (issue 16's profile, more than the Ed25519 check). Here the same
rows go in one Core ``INSERT … RETURNING`` executemany (SQLAlchemy's insertmanyvalues; each id
comes back with its row's unique originator id and version), inside the same transaction,
after the same table
lock, followed by the same NOTIFY; everything else — the schema, the transaction, the
conversion of database errors (a version conflict is still an ``IntegrityError``) — is the
library's. ``PERSISTENCE_MODULE=ledger.store.batched_writes:BatchedWritesFactory``
(``ledger.application.WRITING_PERSISTENCE`` names it without importing it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing_sqlalchemy.factory import SQLAlchemyFactory
from eventsourcing_sqlalchemy.recorders import SQLAlchemyApplicationRecorder
from sqlalchemy import insert
from sqlalchemy.orm import Session


class BatchedApplicationRecorder(SQLAlchemyApplicationRecorder):
    _insert: Any = None  # the INSERT … RETURNING, built on first use

    def _insert_stored_events(
        self, session: Session, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int]:
        if not stored_events:
            return []
        if self._insert is None:
            # Each row's id comes back with its (originator id, version), which is unique,
            # instead of in the order of the rows: SQLAlchemy keeps that order on SQLite by
            # inserting one row per statement (42 against 24 µs a row).
            c = self.events_record_cls.__table__.c
            self._insert = insert(self.events_record_cls.__table__).returning(
                c.id, c.originator_id, c.originator_version
            )
        if self._has_autoincrementing_ids:
            self._lock_table(session)
        rows = [
            {
                "originator_id": e.originator_id,
                "originator_version": e.originator_version,
                "topic": e.topic,
                "state": e.state,
            }
            for e in stored_events
        ]
        ids = {
            (_as_uuid(aggregate), int(version)): int(position)
            for position, aggregate, version in session.execute(self._insert, rows)
        }
        found = [ids[(_as_uuid(e.originator_id), e.originator_version)] for e in stored_events]
        self._notify_channel(session)
        return found


def _as_uuid(value: Any) -> UUID:
    return value if type(value) is UUID else UUID(str(value))


class BatchedWritesFactory(SQLAlchemyFactory):
    application_recorder_class = BatchedApplicationRecorder
