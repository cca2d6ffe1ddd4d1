"""The event store as the commands that only read it open it: eventsourcing persistence over
SQLAlchemy, without eventsourcing-sqlalchemy.

``kernelindex show``, ``history``, ``leaderboard``, ``compare`` and ``search`` read the log and
fold the read models; they never append an event. eventsourcing-sqlalchemy, which every writer
uses (its table lock orders concurrent appends), imports ``sqlalchemy_utils`` for one column
type, and that package loads every SQL dialect SQLAlchemy has: a tenth of a second, a fifth
of such a command's run (``benchmarks/bench_cli.py``). This module reads the same table with
the same column types and the same transaction behaviour (one transaction per context, nested
uses join it, failures mapped to eventsourcing's errors), and refuses to append.
``tests/ledger/test_read_store.py`` checks it against eventsourcing-sqlalchemy's own record
class and recorder.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Any
from uuid import UUID

import sqlalchemy.exc
from eventsourcing import persistence as es
from eventsourcing.utils import Environment
from sqlalchemy import (
    BINARY,
    BigInteger,
    Column,
    Dialect,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    TypeDecorator,
    Uuid,
    func,
    select,
)
from sqlalchemy import create_engine as _create_engine
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.types import TypeEngine

from ledger.store.schema import EVENTS_TABLE

_ERRORS: dict[type[sqlalchemy.exc.SQLAlchemyError], type[es.PersistenceError]] = {
    sqlalchemy.exc.InterfaceError: es.InterfaceError,
    sqlalchemy.exc.DataError: es.DataError,
    sqlalchemy.exc.OperationalError: es.OperationalError,
    sqlalchemy.exc.IntegrityError: es.IntegrityError,
    sqlalchemy.exc.InternalError: es.InternalError,
    sqlalchemy.exc.ProgrammingError: es.ProgrammingError,
    sqlalchemy.exc.NotSupportedError: es.NotSupportedError,
    sqlalchemy.exc.DatabaseError: es.DatabaseError,
}


class OriginatorId(TypeDecorator[UUID]):
    """An aggregate id as eventsourcing-sqlalchemy stores it: PostgreSQL's native ``uuid``,
    else the 16 raw bytes (``sqlalchemy_utils.UUIDType``'s storage)."""

    impl = BINARY(16)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(Uuid(as_uuid=True))
        return dialect.type_descriptor(BINARY(16))

    def process_bind_param(self, value: UUID | str | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        uuid = value if isinstance(value, UUID) else UUID(str(value))
        return uuid if dialect.name == "postgresql" else uuid.bytes

    def process_result_value(self, value: Any, dialect: Dialect) -> UUID | None:
        if value is None or isinstance(value, UUID):
            return value
        return UUID(bytes=bytes(value))


_ROW_NUMBER = BigInteger().with_variant(Integer(), "sqlite")

# A row of the ledger's event table (made by eventsourcing-sqlalchemy; read here). Core, not
# an ORM class: loading the ORM is a tenth of a read command's start.
events_table = Table(
    EVENTS_TABLE,
    MetaData(),
    Column("id", _ROW_NUMBER, primary_key=True, autoincrement=True),
    Column("originator_id", OriginatorId(), nullable=False),
    Column("originator_version", _ROW_NUMBER, nullable=False),
    Column("topic", Text(), nullable=False),
    Column("state", LargeBinary(), nullable=False),
)
_events = events_table.c


_current: ContextVar[_Transaction] = ContextVar("kernelindex_read_store_transaction")


class _Transaction:
    """One connection per outermost context; inner contexts join it (as
    eventsourcing-sqlalchemy does with its session, so code written for it behaves the same)."""

    def __init__(self, engine: Engine, commit: bool) -> None:
        self.engine = engine
        self.commit = commit
        self.depth = 0
        self.token: Token[_Transaction] | None = None
        self.connection: Connection | None = None

    def __enter__(self) -> Connection:
        if self.connection is None:
            self.connection = self.engine.connect()
            self.connection.begin()
        self.depth += 1
        return self.connection

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.depth -= 1
        if self.depth or self.connection is None:
            return
        try:
            if exc is not None or not self.commit:
                self.connection.rollback()
            else:
                self.connection.commit()
        except sqlalchemy.exc.SQLAlchemyError as error:
            kind = next((v for k, v in _ERRORS.items() if isinstance(error, k)), None)
            raise (kind or es.PersistenceError)(error) from error
        finally:
            self.connection.close()
            self.connection = None
            if self.token is not None:
                _current.reset(self.token)


class ReadDatastore:
    def __init__(self, url: str) -> None:
        self.engine: Engine = _create_engine(url, echo=False)

    def transaction(self, commit: bool) -> _Transaction:
        try:
            found = _current.get()
        except LookupError:
            found = _Transaction(self.engine, commit)
            found.token = _current.set(found)
            return found
        if commit and not found.commit:
            raise es.ProgrammingError("Transaction already started with commit=False")
        return found


class ReadRecorder(es.ApplicationRecorder):
    """Selects stored events and notifications; refuses to insert."""

    events_table = events_table

    def __init__(self, datastore: ReadDatastore) -> None:
        self.datastore = datastore

    def transaction(self, commit: bool = True) -> _Transaction:
        return self.datastore.transaction(commit=commit)

    def insert_events(
        self, stored_events: Sequence[es.StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        raise es.ProgrammingError("this ledger was opened to read: it appends nothing")

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> list[es.StoredEvent]:
        query = select(events_table).where(_events.originator_id == originator_id)
        if gt is not None:
            query = query.where(_events.originator_version > gt)
        if lte is not None:
            query = query.where(_events.originator_version <= lte)
        order = _events.originator_version
        query = query.order_by(order.desc() if desc else order)
        if limit is not None:
            query = query.limit(limit)
        with self.transaction(commit=False) as connection:
            return [
                es.StoredEvent(
                    originator_id=r.originator_id,
                    originator_version=r.originator_version,
                    topic=r.topic,
                    state=bytes(r.state),
                )
                for r in connection.execute(query)
            ]

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> list[es.Notification]:
        query = select(events_table)
        if start is not None:
            query = query.where(_events.id >= start if inclusive_of_start else _events.id > start)
        if stop is not None:
            query = query.where(_events.id <= stop)
        if topics:
            query = query.where(_events.topic.in_(topics))
        with self.transaction(commit=False) as connection:
            return [
                es.Notification(
                    id=r.id,
                    originator_id=r.originator_id,
                    originator_version=r.originator_version,
                    topic=r.topic,
                    state=bytes(r.state),
                )
                for r in connection.execute(query.order_by(_events.id).limit(limit))
            ]

    def max_notification_id(self) -> int | None:
        with self.transaction(commit=False) as connection:
            found = connection.scalar(select(func.max(_events.id)))
            return int(found) if found is not None else None

    def subscribe(
        self, gt: int | None = None, topics: Sequence[str] = ()
    ) -> es.Subscription[es.ApplicationRecorder]:
        raise es.ProgrammingError("this ledger was opened to read: it has no subscriptions")


class ReadFactory(es.InfrastructureFactory[es.TrackingRecorder]):
    """``PERSISTENCE_MODULE=ledger.store.read_only:ReadFactory`` (``read_only=True``)."""

    def __init__(self, env: Environment) -> None:
        super().__init__(env)
        url = self.env.get("SQLALCHEMY_URL")
        if not url:
            raise es.InfrastructureFactoryError("SQLALCHEMY_URL is not set")
        self.datastore = ReadDatastore(url)

    def application_recorder(self) -> es.ApplicationRecorder:
        return ReadRecorder(self.datastore)

    def aggregate_recorder(self, purpose: str = "events") -> es.AggregateRecorder:
        raise es.ProgrammingError(f"no {purpose} recorder: the ledger keeps no snapshots")

    def tracking_recorder(
        self, tracking_recorder_class: type[es.TrackingRecorder] | None = None
    ) -> es.TrackingRecorder:
        raise es.ProgrammingError("no tracking recorder when the ledger is opened to read")

    def process_recorder(self) -> es.ProcessRecorder:
        raise es.ProgrammingError("no process recorder when the ledger is opened to read")
