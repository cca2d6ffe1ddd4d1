"""Reads through the database driver, without SQLAlchemy (issue 33): the door a short read
command opens when all it needs are statements of ``ledger.store.read_statements``.

The statements are SQL text compiled ahead from their Core definitions
(``ledger.store.read_queries``); ``Rows`` runs one by name on whatever holds the connection:
``DriverRows`` on a ``sqlite3`` or psycopg connection of its own (a command), ``SessionRows``
on a SQLAlchemy connection (the server, in its own transaction: ``exec_driver_sql``). So a
query is written once and every face runs the same text.

``open_driver`` opens only what it can open exactly as the full stack would read it: a
``sqlite:///FILE`` or a ``postgresql+psycopg://`` URL, on a database whose schema is the
version this build was written for. For anything else it answers None, and the command
takes the full path (which opens, or refuses, the database as it always did).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote, urlsplit
from uuid import UUID

from ledger.store.read_statements import SCHEMA_VERSION, STATEMENTS

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

Row = Sequence[Any]
# A generated registry (``ledger.store.read_queries.generated_module``): dialect -> statement
# name -> (SQL text, the values it fixes itself). The ledger's is ``read_statements``; the
# views' is their own (``projections.view_statements``: the ledger imports no read model).
Statements = dict[str, dict[str, tuple[str, dict[str, Any]]]]


class Rows(Protocol):
    """Runs a generated statement by name, in ``dialect``'s SQL: ``rows`` one of
    ``ledger.store.read_statements``, ``run`` one of another registry."""

    @property
    def dialect(self) -> str: ...

    def rows(self, name: str, **params: Any) -> list[Row]: ...

    def run(self, statements: Statements, name: str, /, **params: Any) -> list[Row]: ...


def _bound(
    statements: Statements, dialect: str, name: str, params: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The statement's text and its values. A list is an ``IN`` list (an expanding
    ``bindparam``, compiled as ``__[POSTCOMPILE_name]``): it becomes one parameter a value,
    named as SQLAlchemy names them."""
    sql, fixed = statements[dialect][name]
    bound = dict(fixed)
    for key, value in params.items():
        if not isinstance(value, list):
            bound[key] = value
            continue
        if not value:  # SQLAlchemy's empty-set expression is not compiled ahead
            raise ValueError(f"{name}: the IN list {key} is empty")
        names = [f"{key}_{at}" for at in range(1, len(value) + 1)]
        slots = (f":{n}" if dialect == "sqlite" else f"%({n})s" for n in names)
        sql = sql.replace(f"__[POSTCOMPILE_{key}]", ", ".join(slots))
        bound.update(zip(names, value, strict=True))
    return sql, bound


class DriverRows:
    """Statements run on a driver connection this door opened (and closes)."""

    def __init__(self, connection: Any, dialect: str, errors: tuple[type[Exception], ...]) -> None:
        self.connection = connection
        self.dialect = dialect
        self.errors = errors  # what the driver raises

    def rows(self, name: str, **params: Any) -> list[Row]:
        return self.run(STATEMENTS, name, **params)

    def run(self, statements: Statements, name: str, /, **params: Any) -> list[Row]:
        sql, bound = _bound(statements, self.dialect, name, params)
        cursor = self.connection.execute(sql, bound)
        return list(cursor.fetchall())

    def close(self) -> None:
        self.connection.close()


class SessionRows:
    """Statements run on a SQLAlchemy connection, in the transaction it is in."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    @property
    def dialect(self) -> str:
        return self.connection.dialect.name

    def rows(self, name: str, **params: Any) -> list[Row]:
        return self.run(STATEMENTS, name, **params)

    def run(self, statements: Statements, name: str, /, **params: Any) -> list[Row]:
        sql, bound = _bound(statements, self.dialect, name, params)
        return list(self.connection.exec_driver_sql(sql, bound).all())


def uuid_param(dialect: str, value: UUID) -> Any:
    """An originator id as the event table's column takes it from the driver: SQLite stores
    sqlalchemy-utils' ``UUIDType`` as its 16 bytes, PostgreSQL as its native uuid."""
    return value.bytes if dialect == "sqlite" else value


def uuid_result(value: Any) -> UUID:
    """An originator id as the driver returns it (16 bytes from SQLite, a UUID from psycopg)."""
    if type(value) is UUID:
        return value
    if isinstance(value, bytes | memoryview):
        return UUID(bytes=bytes(value))
    return UUID(str(value))


def _connect(url: str) -> DriverRows | None:
    parts = urlsplit(url)
    if parts.fragment or "%" in parts.path:
        # SQLAlchemy takes a database name as written where a file URI or libpq would
        # decode a percent escape: the full path opens what the URL names (a review found
        # the door opening another ledger for ``%41.db``).
        return None
    if (
        parts.scheme == "sqlite"
        and not parts.query
        and parts.path.startswith("/")
        and parts.path != "/"
    ):
        # sqlite:///relative or sqlite:////absolute, as SQLAlchemy reads the URL; the file
        # opened read-only, never created (the full path says what is missing).
        path = quote(parts.path[1:])
        try:
            connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
            # One read transaction for the command: every statement sees one snapshot, as
            # the full path's session does.
            connection.execute("BEGIN")
        except sqlite3.OperationalError:
            return None
        return DriverRows(connection, "sqlite", (sqlite3.Error,))
    if parts.scheme == "postgresql+psycopg":  # a plain postgresql:// is psycopg2's
        import psycopg  # noqa: PLC0415 - only for a PostgreSQL ledger

        try:
            # In a transaction, as the full path's session reads; a host that does not answer
            # is given up on soon (the full path then says what is wrong, in its own time).
            conninfo = parts._replace(scheme="postgresql").geturl()
            if "connect_timeout" not in parts.query:
                conninfo += ("&" if parts.query else "?") + "connect_timeout=10"
            served = psycopg.connect(conninfo)
            # Every statement of the command in one snapshot (READ COMMITTED would give each
            # its own), and nothing it runs can write.
            served.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            served.read_only = True
        except psycopg.Error:
            return None
        return DriverRows(served, "postgresql", (psycopg.Error,))
    return None


def open_driver(url: str) -> DriverRows | None:
    """The driver's connection to the ledger at ``url``, if this door reads it as the full
    stack would (see above); None: take the full path."""
    door = _connect(url)
    if door is None:
        return None
    try:
        found = door.rows("schema_version")
    except door.errors:  # no schema table, say: the full path says what is wrong
        found = []
    if [tuple(r) for r in found] != [(SCHEMA_VERSION,)]:
        door.close()
        return None
    return door
