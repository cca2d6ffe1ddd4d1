"""Database connections that survive the database dropping them, and read transactions that
see one snapshot of the database."""

from __future__ import annotations

import weakref
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DisconnectionError

_PQTRANS_IDLE = 0
_PINGED: weakref.WeakSet[Engine] = weakref.WeakSet()


def ping_on_checkout(engine: Engine) -> None:
    """Test each pooled connection as it is taken (SQLAlchemy's pre-ping, on an engine made
    without it), so one the database dropped while idle (restart, pg_terminate_backend,
    failover) is replaced instead of failing the next request. A file database (SQLite)
    cannot drop a connection: nothing to do there."""
    if engine.dialect.name == "sqlite" or engine in _PINGED:
        return
    _PINGED.add(engine)  # one listener per engine, however many services share it
    dialect = engine.dialect

    def ping(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        try:
            alive = dialect.do_ping(dbapi_connection)
        except Exception:
            alive = False
        if not alive:
            raise DisconnectionError("pooled connection is gone; the pool opens a new one")

    event.listen(engine, "checkout", ping)


def begin_snapshot(connection: Connection) -> None:
    """Make the transaction just begun on ``connection`` read one snapshot of the database,
    whatever others commit meanwhile, so a read of several queries agrees with itself without
    being retried and without holding up any writer.

    Neither driver does so by default. Python's sqlite3 (legacy transaction control) opens no
    transaction for a SELECT, so each query sees the database anew; an explicit deferred
    ``BEGIN`` makes every query up to the rollback read the WAL snapshot the first one takes.
    PostgreSQL's READ COMMITTED gives each statement its own snapshot; REPEATABLE READ gives
    the transaction one, taken at its first query. A transaction that has already read (or
    written) keeps what it is: its snapshot or its locks were set by its first statements."""
    raw: Any = connection.connection.dbapi_connection
    dialect = connection.dialect.name
    if dialect == "sqlite" and not raw.in_transaction:
        connection.exec_driver_sql("BEGIN")
    # libpq's PQTRANS_IDLE (psycopg and psycopg2 alike): nothing has run in it yet.
    elif dialect == "postgresql" and raw.info.transaction_status == _PQTRANS_IDLE:
        connection.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
