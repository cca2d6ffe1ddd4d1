"""Rows a commit writes, handed to the database driver as they are (issue 36's lean write path).

A group's events, log leaves and tree nodes are plain rows of fixed shape: going through
SQLAlchemy's statement compiler, type processors and result machinery cost more per row
than the driver's own work (issue 36: ~1.2 ms of a group of 32's CPU per envelope against
~34 µs for the same rows through ``sqlite3``). Here each statement is SQL text in the
driver's parameter style, built once per table, column list and row count, and run on the
driver's own cursor of the session's connection, in its transaction (``_run``: even
``exec_driver_sql``'s execution context and result cost 2-3x the driver's own work for a
small statement, issue 36): the driver binds and executes it, and SQLAlchemy's own error
handling still wraps whatever the driver raises in its exception classes (an
``IntegrityError`` on a version conflict, a disconnect marked as one and its connection
invalidated), which eventsourcing and ``ledger.errors`` read as before. Nothing converts
values: callers bind what the column stores (``uuid_param`` for the event table's
originator id, bytes for hashes).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import Any
from uuid import UUID

from sqlalchemy.engine import Connection

from ledger.store.event_store import StoreSession, connection_of

# Rows per multi-row INSERT … RETURNING: 4 parameters a row stay far below SQLite's 32,766
# and PostgreSQL's 65,535 bound parameters.
RETURNING_CHUNK = 500
# Bound parameters per multi-row INSERT (``_many``): far below both bounds.
_PARAMETERS = 4000

Row = Sequence[Any]


def _placeholder(dialect: str) -> str:
    # sqlite3's paramstyle is qmark; psycopg's is format.
    return "?" if dialect == "sqlite" else "%s"


@functools.lru_cache(maxsize=256)
def _insert_sql(dialect: str, table: str, columns: tuple[str, ...], rows: int = 1) -> str:
    mark = _placeholder(dialect)
    one = "(" + ", ".join(mark for _ in columns) + ")"
    # Table and column names are the ledger's own constants; every value is bound.
    names = ", ".join(columns)
    return f"INSERT INTO {table} ({names}) VALUES " + ", ".join([one] * rows)  # noqa: S608


def insert_rows(
    session: StoreSession,
    table: str,
    columns: tuple[str, ...],
    rows: Sequence[Row],
    *,
    keep: tuple[str, ...] = (),
) -> None:
    """INSERT ``rows`` (tuples in ``columns``' order) into ``table``: on SQLite one
    executemany, on PostgreSQL one multi-row VALUES list a chunk (``_many``).
    ``keep``: a key whose row, if stored already, stays as it is (ON CONFLICT DO NOTHING,
    which SQLite and PostgreSQL both spell so)."""
    if not rows:
        return
    connection = connection_of(session)
    dialect = connection.dialect.name
    tail = f" ON CONFLICT ({', '.join(keep)}) DO NOTHING" if keep else ""
    if dialect == "sqlite" or len(rows) == 1:
        sql = _insert_sql(dialect, table, columns) + tail
        if len(rows) > 1:
            _run(connection, sql, rows, many=True).close()
        else:
            _run(connection, sql, tuple(rows[0])).close()
        return
    for chunk in _many(rows, len(columns)):
        sql = _insert_sql(dialect, table, columns, len(chunk)) + tail
        _run(connection, sql, tuple(value for row in chunk for value in row)).close()


def _run(connection: Connection, sql: str, params: Any, *, many: bool = False) -> Any:
    """Execute (``many``: executemany) ``sql`` on a cursor of the driver connection under
    ``connection``, in its transaction; return the cursor. A driver error goes through
    SQLAlchemy's own handling, as one from ``exec_driver_sql`` would: wrapped in its
    exception class, the connection invalidated if it was lost."""
    if not connection.in_transaction():
        connection.begin()  # what exec_driver_sql's autobegin does
    driver = connection.connection.dbapi_connection
    assert driver is not None  # a live connection (an invalidated one raised above)
    cursor = driver.cursor()
    # The engine's cursor events fire as for any statement it runs (a listener sees every
    # statement sent: the tests that hold reads to writing nothing rely on it).
    events = connection._has_events or connection.engine._has_events
    if events:
        for fn in connection.dispatch.before_cursor_execute:
            sql, params = fn(connection, cursor, sql, params, None, many)
    try:
        if many:
            cursor.executemany(sql, params)
        else:
            cursor.execute(sql, params)
    except BaseException as exc:
        # SQLAlchemy's own handler (private, but what its ``_cursor_execute`` calls for a
        # statement run outside an execution context): wraps, invalidates, raises.
        connection._handle_dbapi_exception(exc, sql, params, cursor, None)
    if events:
        connection.dispatch.after_cursor_execute(connection, cursor, sql, params, None, many)
    return cursor


# (table, columns, rows, keep) of one INSERT: what ``insert_tables`` takes.
Insert = tuple[str, tuple[str, ...], Sequence[Row], tuple[str, ...]]


def insert_tables(session: StoreSession, inserts: Sequence[Insert]) -> None:
    """``insert_rows`` for several tables at once: on PostgreSQL one statement (each INSERT
    but the last a data-modifying WITH clause, all run once, on one snapshot: for rows that
    depend on none of the others) where the rows fit one statement's chunk, which saves a
    round trip a table (issue 36: ~40 µs of psycopg's client CPU each on a quiet machine,
    several times that on a busy one); elsewhere, and for larger batches, one by one."""
    connection = connection_of(session)
    present = [i for i in inserts if i[2]]
    params = sum(len(rows) * len(columns) for _, columns, rows, _ in present)
    if connection.dialect.name == "sqlite" or len(present) < 2 or params > _PARAMETERS:
        for table, columns, rows, keep in present:
            insert_rows(session, table, columns, rows, keep=keep)
        return
    parts = []
    for table, columns, rows, keep in present:
        sql = _insert_sql("postgresql", table, columns, len(rows))
        parts.append(sql + (f" ON CONFLICT ({', '.join(keep)}) DO NOTHING" if keep else ""))
    sql = "WITH " + ", ".join(f"w{n} AS ({p})" for n, p in enumerate(parts[:-1])) + " " + parts[-1]
    flat = tuple(value for _, _, rows, _ in present for row in rows for value in row)
    _run(connection, sql, flat).close()


def _many(rows: Sequence[Row], width: int) -> Iterator[Sequence[Row]]:
    """``rows`` in chunks of one multi-row statement each. Measured (issue 36, a group of
    32 small rows): psycopg's executemany costs ~20 µs of client CPU a row even pipelined,
    ~3.5x a multi-row VALUES list; SQLite is the other way round (its executemany steps one
    prepared statement, a VALUES list is built as a compound SELECT first), so only
    PostgreSQL takes these. Chunks stay far below either database's bound parameters."""
    size = max(1, _PARAMETERS // width)
    for at in range(0, len(rows), size):
        yield rows[at : at + size]


def insert_returning(
    session: StoreSession,
    table: str,
    columns: tuple[str, ...],
    rows: Sequence[Row],
    returning: tuple[str, ...],
) -> list[Row]:
    """INSERT ``rows`` with a multi-row VALUES list a chunk, returning ``returning`` of each
    row (in no promised order: SQLite documents none, so callers match rows by a key)."""
    connection = connection_of(session)
    dialect = connection.dialect.name
    found: list[Row] = []
    for at in range(0, len(rows), RETURNING_CHUNK):
        chunk = rows[at : at + RETURNING_CHUNK]
        sql = (
            _insert_sql(dialect, table, columns, len(chunk)) + " RETURNING " + ", ".join(returning)
        )
        cursor = _run(connection, sql, tuple(value for row in chunk for value in row))
        found.extend(cursor.fetchall())
        cursor.close()
    return found


def select_rows(session: StoreSession, sql: str, params: tuple[Any, ...] = ()) -> list[Row]:
    """Run one SELECT written in the driver's parameter style (``placeholder``)."""
    cursor = _run(connection_of(session), sql, params)
    found: list[Row] = cursor.fetchall()
    cursor.close()
    return found


def placeholder(session: StoreSession) -> str:
    """The driver's parameter mark: ``?`` for sqlite3, ``%s`` for psycopg."""
    return _placeholder(connection_of(session).dialect.name)


def dialect_of(session: StoreSession) -> str:
    return connection_of(session).dialect.name


@functools.lru_cache(maxsize=64)
def uuid_in(dialect: str, column: str, count: int) -> str:
    """``column`` among ``count`` bound uuids: one array parameter on PostgreSQL (one SQL
    text whatever the count), ``count`` marks on SQLite (its statement cache keeps each)."""
    if dialect == "sqlite":
        return f"{column} IN ({', '.join('?' for _ in range(count))})"
    return f"{column} = ANY(%s)"


def uuid_in_params(dialect: str, ids: dict[Any, UUID]) -> tuple[Any, ...]:
    """The parameters ``uuid_in`` takes for ids keyed as ``uuid_keys`` keys them."""
    if dialect == "sqlite":
        return tuple(ids)
    return (list(ids.values()),)


def uuid_keys(dialect: str, ids: Sequence[UUID]) -> dict[Any, UUID]:
    """Each id by the value the driver binds and returns for it (its 16 bytes on SQLite),
    so rows read back map to the ids asked for without making a ``UUID`` a row (Python's
    ``UUID`` costs ~4 µs to make, more than the row's share of the query)."""
    if dialect == "sqlite":
        return {i.bytes: i for i in ids}
    return {i: i for i in ids}
