"""The ledger's event writer: eventsourcing-sqlalchemy's, with one driver INSERT per group.

eventsourcing-sqlalchemy stores events through the ORM: one mapped object per event, added
to the session and flushed for its autoincremented id. That unit of work cost ~150 µs per
event of a signed ingestion (issue 16's profile, more than the Ed25519 check), and a Core
``INSERT … RETURNING`` executemany still ~60 µs (issue 36). Here the same rows go to the
driver as they are (``ledger.store.driver_rows``): one multi-row ``INSERT … RETURNING`` whose
ids come back with each row's unique (originator id, version), inside the same transaction,
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
from sqlalchemy.orm import Session

from ledger.store.driver_rows import insert_returning
from ledger.store.read_door import uuid_param, uuid_result

_COLUMNS = ("originator_id", "originator_version", "topic", "state")
_RETURNING = ("id", "originator_id", "originator_version")


class BatchedApplicationRecorder(SQLAlchemyApplicationRecorder):
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
                uuid_param(dialect, uuid_result(e.originator_id)),
                e.originator_version,
                e.topic,
                e.state,
            )
            for e in stored_events
        ]
        table = self.events_table_name
        if self.schema_name is not None:
            table = f"{self.schema_name}.{table}"
        returned = insert_returning(session, table, _COLUMNS, rows, _RETURNING)
        ids = {
            (uuid_result(aggregate), int(version)): int(position)
            for position, aggregate, version in returned
        }
        found = [ids[(uuid_result(e.originator_id), e.originator_version)] for e in stored_events]
        self._notify_channel(session)
        return found


class BatchedWritesFactory(SQLAlchemyFactory):
    application_recorder_class = BatchedApplicationRecorder
