"""The ledger's one door to its database, typed.

eventsourcing's recorders expose their transaction, engine and record class as untyped
attributes, and two recorders back a ledger (eventsourcing-sqlalchemy's to write,
``ledger.store.read_only``'s to read). Everything that reads or writes the ledger's tables in
the event's transaction — the log, the artifacts, the group index, audit, bundles, the read
models — goes through an ``EventStore`` instead, so the untyped reach happens here only.

``StoreSession`` is what a transaction yields: an ORM ``Session`` from the writer, a Core
``Connection`` from the read-only store (which never loads the ORM). Code that uses it calls
only what both have (``execute``, ``scalar``, ``scalars``), or ``connection_of``.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, TypeAlias

from sqlalchemy import Table, func, select, text
from sqlalchemy.engine import Connection, Engine

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

StoreSession: TypeAlias = "Session | Connection"


def connection_of(session: StoreSession) -> Connection:
    """The Core connection under a transaction (DDL and dialect-level work need it)."""
    return session if isinstance(session, Connection) else session.connection()


def hold_sqlite_write_lock(session: StoreSession) -> None:
    """SQLite's one write lock, taken now and held to the end of this transaction.

    Python's sqlite3 opens a transaction only at the first write: every read before it sees
    its own snapshot, so two connections that read a position, then write what follows from
    it, both go ahead (two folders each folding the same events once). ``BEGIN IMMEDIATE``
    makes the reads that follow it wait for, and then see, every earlier writer's commit. A
    transaction that has written already holds the lock: in sqlite3's default (legacy)
    transaction control, the one this store uses, ``in_transaction`` is true only after a
    write. (With ``autocommit=False`` or an engine that emits its own BEGIN, it would be true
    after a read too, and this would have to write to take the lock.)"""
    connection = connection_of(session)
    if not connection.connection.dbapi_connection.in_transaction:  # type: ignore[union-attr]
        connection.exec_driver_sql("BEGIN IMMEDIATE")


class EventStore:
    """Transactions, engine and event table of the recorder a ledger was opened with."""

    def __init__(self, recorder: Any) -> None:
        self._recorder = recorder
        self.engine: Engine = recorder.datastore.engine
        table = getattr(recorder, "events_table", None)
        # eventsourcing-sqlalchemy maps its rows to an ORM class; the table is underneath.
        self.events: Table = table if table is not None else recorder.events_record_cls.__table__

    @property
    def postgres(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    def transaction(self, commit: bool = False) -> AbstractContextManager[StoreSession]:
        """One transaction; nested uses join the outermost (eventsourcing's behaviour)."""
        found: AbstractContextManager[StoreSession] = self._recorder.transaction(commit=commit)
        return found

    def hold_write_lock(self, session: StoreSession) -> None:
        """Take the lock every append takes, now, for the rest of this transaction:
        PostgreSQL's lock on the event table (eventsourcing-sqlalchemy's, taken again by the
        INSERT at no cost), SQLite's write lock (``hold_sqlite_write_lock``)."""
        if self.postgres:
            session.execute(text(f"LOCK TABLE {self.events.name} IN EXCLUSIVE MODE"))
        else:
            hold_sqlite_write_lock(session)

    def committed(self, events: int) -> None:
        """A commit of ``events`` events went through (the writer's background WAL
        checkpoints count them: ``ledger.store.wal_checkpoints``)."""
        checkpoints = getattr(self._recorder, "wal_checkpoints", None)
        if checkpoints is not None:
            checkpoints.committed(events)

    def last_position(self) -> int:
        """The position of the last stored event (0 for an empty ledger)."""
        return int(self._recorder.max_notification_id() or 0)

    @property
    def last_position_sql(self) -> str:
        """``last_position``'s query as driver SQL (no parameters), for a caller that must
        read it on a connection of its own, in the snapshot of another read of its own
        (``api.service.freshness.CommitProbe``): the largest event id, NULL when empty."""
        query = select(func.max(self.events.c.id))
        return str(query.compile(dialect=self.engine.dialect))
