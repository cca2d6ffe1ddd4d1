"""The ledger's database schema, created and upgraded explicitly (`kernelindex db upgrade`).

Nothing creates tables as a side effect of opening a ledger: several API workers opening one
PostgreSQL database at once must not race to create or alter tables, and an operator should
see a schema change happen, not discover it. The schema has a version stamped in
``kernelindex_schema``; a ledger refuses to open a database whose version is not the one this
build was written for, and says which command fixes it.

Each upgrade step is idempotent (tables are created only where missing), so a database made
before versioning existed is brought to version 1 by stamping it, and an interrupted upgrade
can simply be run again. On PostgreSQL one upgrade runs at a time (advisory lock).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from uuid import UUID

from eventsourcing.application import Application
from sqlalchemy import (
    Column,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    Table,
    Text,
    create_engine,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from domain.errors import DomainError
from domain.run_facts import comparison_key_of
from domain.timestamps import format_time, utc_now
from ledger.signing.dsse import stored_statement
from ledger.store import (
    artifacts,
    fold_fields,
    fold_manifests,
    group_index,
    log_tables,
    transparency_log,
)

SCHEMA_VERSION = 6
APPLICATION_NAME = "KernelIndex"  # eventsourcing names the event table after it
EVENTS_TABLE = APPLICATION_NAME.lower() + "_events"
# The topic ingestions are stored under, as the builds that wrote them stored it: a schema
# step reads stored rows, so it names what is stored, not what the aggregates' module is
# called now (tests/ledger/test_schema_topics.py holds the two equal).
INGESTED_TOPIC = "ledger.aggregates:Run.Ingested"
_ADVISORY_LOCK_ID = 0x4B49_5343_4845  # "KISCHE"

_metadata = MetaData()
schema_table = Table(
    "kernelindex_schema",
    _metadata,
    Column("id", SmallInteger, primary_key=True),  # always 1: one row
    Column("version", Integer, nullable=False),
    Column("upgraded_at", Text, nullable=False),
    Column("software", Text, nullable=False),
)


class SchemaError(DomainError):
    """The database's schema is missing, older or newer than this build's."""

    code = "schema-not-current"
    status = 503


@dataclass(frozen=True)
class SchemaStatus:
    version: int | None  # None: no KernelIndex schema stamped
    required: int
    upgraded_at: str | None
    software: str | None

    @property
    def current(self) -> bool:
        return self.version == self.required


def _software() -> str:
    try:
        return "kernelindex-ledger " + version("kernelindex-ledger")
    except PackageNotFoundError:  # running from a source tree without installing
        return "kernelindex-ledger (source)"


class _EventStore(Application[UUID]):
    """Only to have the eventsourcing library create its own tables, with the ledger's name."""

    name = APPLICATION_NAME


def _create_event_store(db_url: str) -> None:
    app = _EventStore(
        env={
            "PERSISTENCE_MODULE": "eventsourcing_sqlalchemy",
            "SQLALCHEMY_URL": db_url,
            "CREATE_TABLE": "y",  # the library creates its tables (checkfirst) on construction
        }
    )
    app.close()


def _version_1(db_url: str, conn: Connection) -> None:
    """Event store, transparency log (leaves, nodes, checkpoints), artifacts. (It made the
    read-model tables too, once; they are the read models' own now: projections.tables.)"""
    _create_event_store(db_url)
    for metadata in (transparency_log.metadata, artifacts.metadata):
        metadata.create_all(conn, checkfirst=True)


def _version_2(db_url: str, conn: Connection) -> None:
    """The ledger's group index (heads of comparison groups), filled from the ingestions
    already stored, so bundles of an older ledger prove their groups too; and an index of
    each aggregate's events by class, so a run record reads its few state events without
    scanning every attestation anyone added to the run."""
    group_index.metadata.create_all(conn, checkfirst=True)
    events = Table(EVENTS_TABLE, MetaData(), autoload_with=conn)
    Index(
        f"{EVENTS_TABLE}_by_topic",
        events.c.originator_id,
        events.c.topic,
        events.c.originator_version,  # the newest N of a class, without sorting them all
    ).create(conn, checkfirst=True)
    members = group_index.group_members
    done = select(members.c.position)
    last = 0
    while True:
        rows = conn.execute(
            select(events.c.id, events.c.state)
            .where(
                events.c.topic == INGESTED_TOPIC,
                events.c.id > last,
                events.c.id.not_in(done),
            )
            .order_by(events.c.id)
            .limit(500)
        ).all()
        if not rows:
            return
        found = []
        for position, state in rows:
            run_digest, key = _ingested_group(bytes(state))
            if key is not None:
                found.append(
                    {"run_digest": run_digest, "comparison_key": key, "position": position}
                )
        if found:
            conn.execute(members.insert(), found)
        last = int(rows[-1][0])


def _ingested_group(state: bytes) -> tuple[str, str | None]:
    """(run digest, comparison key) of a stored ingestion (admitted, so it decodes)."""
    statement = stored_statement(json.loads(state)["envelope"])
    run_digest = "sha256:" + statement["subject"][0]["digest"]["sha256"]
    return run_digest, comparison_key_of(statement["predicate"]["manifests"])


def _version_3(db_url: str, conn: Connection) -> None:
    """Nothing of the ledger's own tables. (This step dropped the read models once, so they
    refolded with manifests by digest; the read models now refold themselves when their own
    version changes: projections.tables.VIEWS_VERSION.)"""


def _version_4(db_url: str, conn: Connection) -> None:
    """The witnesses' cosignatures of the log's checkpoints (``ledger.witnessing``), one row
    per tree size and witness key; empty until witnesses are configured and answer."""
    log_tables.cosignatures.create(conn, checkfirst=True)


def _version_5(db_url: str, conn: Connection) -> None:
    """The fold's fields of each event, written at commit (``ledger.store.fold_fields``), and
    filled here for the events stored before, by the ledger's own mapper (a reader's). The
    rows this build writes name shared documents (schema 6), so their table is made here
    too when an upgrade from before 5 runs this step with this build's backfill."""
    fold_fields.event_fold_fields.create(conn, checkfirst=True)
    fold_manifests.fold_manifests.create(conn, checkfirst=True)
    reader = _EventStore(env={"PERSISTENCE_MODULE": "eventsourcing.popo"})  # no database
    try:
        fold_fields.backfill(conn, EVENTS_TABLE, reader.mapper)
    finally:
        reader.close()


def _version_6(db_url: str, conn: Connection) -> None:
    """Fold rows share manifest documents, each stored once by the hash of its text
    (``ledger.store.fold_manifests``): the rows schema 5 wrote, predicates whole, rewritten
    so. (SQLite keeps the freed pages for later writes; ``VACUUM`` returns them.)"""
    fold_manifests.fold_manifests.create(conn, checkfirst=True)
    fold_fields.share_rows(conn)


# version -> the step that brings the schema from version - 1 to it. Append, never edit.
STEPS: dict[int, Callable[[str, Connection], None]] = {
    1: _version_1,
    2: _version_2,
    3: _version_3,
    4: _version_4,
    5: _version_5,
    6: _version_6,
}


def _read(conn: Connection) -> SchemaStatus:
    if not inspect(conn).has_table(schema_table.name):
        return SchemaStatus(None, SCHEMA_VERSION, None, None)
    row = conn.execute(select(schema_table).where(schema_table.c.id == 1)).first()
    if row is None:
        return SchemaStatus(None, SCHEMA_VERSION, None, None)
    return SchemaStatus(int(row.version), SCHEMA_VERSION, row.upgraded_at, row.software)


def _engine(db_url: str) -> Engine:
    return create_engine(db_url)


def read_status(db_url: str) -> SchemaStatus:
    engine = _engine(db_url)
    try:
        with engine.connect() as conn:
            return _read(conn)
    finally:
        engine.dispose()


def upgrade(db_url: str) -> tuple[SchemaStatus, list[int]]:
    """Bring the database to this build's schema; (the status after, the steps applied)."""
    engine = _engine(db_url)
    applied: list[int] = []
    try:
        with engine.connect() as conn:
            postgres = conn.dialect.name == "postgresql"
            if postgres:  # concurrent upgraders wait for the first, then find nothing to do
                conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _ADVISORY_LOCK_ID})
                conn.commit()
            try:
                before = _read(conn)
                have = before.version or 0
                if have > SCHEMA_VERSION:
                    raise SchemaError(_newer(have))
                _metadata.create_all(conn, checkfirst=True)
                for target in range(have + 1, SCHEMA_VERSION + 1):
                    STEPS[target](db_url, conn)
                    _stamp(conn, target)
                    conn.commit()  # each step is kept once done: a rerun resumes after it
                    applied.append(target)
                return _read(conn), applied
            finally:
                if postgres:
                    # A failed step left the transaction aborted: roll it back first, or the
                    # unlock fails and hides the step's own error. (Closing the connection
                    # would release the lock anyway.)
                    conn.rollback()
                    with contextlib.suppress(DBAPIError):
                        conn.execute(
                            text("SELECT pg_advisory_unlock(:k)"), {"k": _ADVISORY_LOCK_ID}
                        )
                        conn.commit()
    finally:
        engine.dispose()


def _stamp(conn: Connection, target: int) -> None:
    values = {"version": target, "upgraded_at": format_time(utc_now()), "software": _software()}
    if conn.execute(select(schema_table.c.id).where(schema_table.c.id == 1)).first() is None:
        conn.execute(schema_table.insert().values(id=1, **values))
    else:
        conn.execute(schema_table.update().where(schema_table.c.id == 1).values(**values))


def _newer(have: int) -> str:
    return (
        f"the database's schema is version {have}, newer than this build's "
        f"({SCHEMA_VERSION}): it was upgraded by a newer KernelIndex; upgrade the software"
    )


def require_current(engine: Engine, where: str) -> None:
    """Refuse to work on a database whose schema this build was not written for."""
    with engine.connect() as conn:
        status = _read(conn)
    if status.version is None:
        raise SchemaError(
            f"{where} has no KernelIndex schema: run 'kernelindex db upgrade' "
            "(kernelindex init does it for a new ledger home)"
        )
    if status.version < SCHEMA_VERSION:
        raise SchemaError(
            f"{where} has schema version {status.version}, this build needs "
            f"{SCHEMA_VERSION}: run 'kernelindex db upgrade'"
        )
    if status.version > SCHEMA_VERSION:
        raise SchemaError(_newer(status.version))
