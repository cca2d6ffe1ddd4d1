"""The ledger's event writer: eventsourcing-sqlalchemy's, with one INSERT per group of events.

eventsourcing-sqlalchemy stores events through the ORM: one mapped object per event, added
to the session and flushed for its autoincremented id. That unit of work cost ~150 µs per
event of a signed ingestion (issue 16's profile, more than the Ed25519 check). Here the same
rows go in one Core ``INSERT … RETURNING id`` executemany (SQLAlchemy's insertmanyvalues,
ids returned in the order of the rows), inside the same transaction, after the same table
lock, followed by the same NOTIFY; everything else — the schema, the transaction, the
conversion of database errors (a version conflict is still an ``IntegrityError``) — is the
library's. ``PERSISTENCE_MODULE=ledger.store.batched_writes:BatchedWritesFactory``
(``ledger.application.WRITING_PERSISTENCE`` names it without importing it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
            table = self.events_record_cls.__table__
            self._insert = insert(table).returning(table.c.id, sort_by_parameter_order=True)
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
        ids = session.execute(self._insert, rows).scalars()
        found = [int(i) for i in ids]
        self._notify_channel(session)
        return found


class BatchedWritesFactory(SQLAlchemyFactory):
    application_recorder_class = BatchedApplicationRecorder
