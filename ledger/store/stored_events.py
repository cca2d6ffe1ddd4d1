"""Stored events read as the database holds them: for admission's lookups, history, audit,
bundles and the key book. Nothing here decodes more than it is asked to, or verifies.

SQLAlchemy is imported by the functions that query through it: a record and its decoding
are also what a command reading through the driver alone folds (``ledger.store.read_door``,
issue 33), and it must not load SQLAlchemy for them."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ledger.signing.dsse import stored_statement
from ledger.store.read_door import Row, Rows, SessionRows, uuid_param

if TYPE_CHECKING:
    from ledger.store.event_store import EventStore

_CHUNK = 500  # ids per IN (...) list
_PAGE = 1000  # rows per page of a scan
_ALL = 2**62  # a page's limit when it has none (SQLite takes no NULL limit)


@dataclass(frozen=True)
class StoredRecord:
    """A stored event exactly as the database holds it (for history, audit and export)."""

    position: int
    aggregate_id: UUID
    version: int
    topic: str
    state: bytes

    @property
    def event_name(self) -> str:
        return self.topic.rsplit(":", 1)[-1]


def _transcoded(found: dict[str, Any]) -> dict[str, Any]:
    """An object as the ledger's mapper reads it (eventsourcing's ``JSONTranscoder``): one of
    exactly the keys ``_type_`` and ``_data_`` must be a value of a transcoding the ledger
    registers, or the record does not decode. Checked, and left as it was stored."""
    if len(found) == 2 and "_type_" in found and "_data_" in found:
        kind, data = found["_type_"], found["_data_"]
        check = _TRANSCODINGS.get(kind) if isinstance(kind, str) else None
        if check is None:
            raise ValueError(f"a stored value of type {kind!r} is not readable")
        try:
            check(data)
        except Exception as exc:  # as the transcoding's own decode fails
            raise ValueError(f"a stored {kind} value is not readable") from exc
    return found


def _uuid_hex(data: object) -> None:
    if not isinstance(data, str):
        raise TypeError("not a string")
    UUID(data)


def _datetime_iso(data: object) -> None:
    if not isinstance(data, str):
        raise TypeError("not a string")
    datetime.fromisoformat(data)


# The transcodings eventsourcing's Application registers, by stored name (UUIDAsHex,
# DecimalAsStr, DatetimeAsISO): tests/ledger/test_stored_state.py holds them to the
# ledger's own mapper, so a reader without eventsourcing refuses what the mapper refuses.
_TRANSCODINGS: dict[str, Any] = {
    "uuid_hex": _uuid_hex,
    "decimal_str": Decimal,
    "datetime_iso": _datetime_iso,
}
_STATE = json.JSONDecoder(object_hook=_transcoded)


def stored_fields(state: bytes) -> dict[str, Any]:
    """A stored event's fields, read as the ledger's mapper reads them (strict UTF-8, the
    standard library's JSON reader, every transcoded value decodable), without building the
    event. Raises ValueError (or RecursionError, nested too deep) where the mapper fails."""
    found = _STATE.decode(state.decode("utf-8"))
    if not isinstance(found, dict):
        raise ValueError("a stored event is a JSON object")
    return found


def decode_stored(state: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """(stored event fields, the statement its envelope carries), without verifying anything.

    For readers that fold already-admitted events (the key book, a run's manifests); history
    and audit re-verify instead. Raises ValueError/KeyError/TypeError on a damaged record,
    where the mapper would fail too (``stored_fields``).
    """
    try:
        stored = stored_fields(state)
    except RecursionError:
        raise ValueError("a stored event nests too deeply") from None
    return stored, statement_of(stored)


def statement_of(stored: dict[str, Any]) -> dict[str, Any]:
    """The statement inside a stored event's envelope (decoded, not verified)."""
    return stored_statement(stored["envelope"])


def stored_records(
    store: EventStore,
    aggregate_id: UUID,
    version: int | None = None,
    *,
    start: int = 1,
    limit: int | None = None,
    topics: Sequence[str] | None = None,
    newest: bool = False,
) -> list[StoredRecord]:
    """One aggregate's events in version order: all, one ``version``, or a page (from
    ``start``, at most ``limit``, of ``topics`` only, or the ``newest``, still oldest first)."""
    from sqlalchemy import select  # noqa: PLC0415 - see the module's docstring

    e = store.events.c
    paged = topics is None and not newest
    of_topics = topics is not None and start == 1 and newest == (limit is not None)
    if version is None and (paged or of_topics):
        from ledger.store.event_store import connection_of  # noqa: PLC0415 - as select

        # A page, a topic's events or the newest of them: the statements a command reading
        # through the driver alone runs too (``aggregate_page`` and below).
        with store.transaction(commit=False) as session:
            rows = SessionRows(connection_of(session))
            if topics is None:
                return aggregate_page(rows, aggregate_id, start, limit)
            if limit is None:
                return topic_records(rows, aggregate_id, topics)
            return newest_records(rows, aggregate_id, topics, limit)
    query = select(e.id, e.originator_version, e.topic, e.state).where(
        e.originator_id == aggregate_id
    )
    if version is not None:
        query = query.where(e.originator_version == version)
    if start > 1:
        query = query.where(e.originator_version >= start)
    if topics is not None:
        query = query.where(e.topic.in_(topics))
    query = query.order_by(e.originator_version.desc() if newest else e.originator_version)
    if limit is not None:
        query = query.limit(limit)
    with store.transaction(commit=False) as session:
        found = session.execute(query).all()
    records = [StoredRecord(r[0], aggregate_id, r[1], r[2], bytes(r[3])) for r in found]
    return records[::-1] if newest else records


def aggregate_records(rows: Rows, aggregate_id: UUID) -> list[StoredRecord]:
    """Every event of one aggregate in version order, on whichever door ``rows`` is
    (``ledger.store.read_door``)."""
    found = rows.rows("aggregate_events", aggregate=uuid_param(rows.dialect, aggregate_id))
    return _records(aggregate_id, found)


def aggregate_page(
    rows: Rows, aggregate_id: UUID, start: int = 1, limit: int | None = None
) -> list[StoredRecord]:
    """One aggregate's events from version ``start``, at most ``limit`` (all: None)."""
    if limit is None and start <= 1:
        return aggregate_records(rows, aggregate_id)
    found = rows.rows(
        "aggregate_page",
        aggregate=uuid_param(rows.dialect, aggregate_id),
        start=start,
        limit=_ALL if limit is None else limit,
    )
    return _records(aggregate_id, found)


def topic_records(rows: Rows, aggregate_id: UUID, topics: Sequence[str]) -> list[StoredRecord]:
    """One aggregate's events of ``topics``, in version order."""
    if not topics:
        return []
    aggregate = uuid_param(rows.dialect, aggregate_id)
    return _records(
        aggregate_id, rows.rows("aggregate_topics", aggregate=aggregate, topics=list(topics))
    )


def newest_records(
    rows: Rows, aggregate_id: UUID, topics: Sequence[str], limit: int
) -> list[StoredRecord]:
    """The ``limit`` newest of one aggregate's events of ``topics``, oldest first."""
    if not topics or limit <= 0:
        return []
    found = rows.rows(
        "aggregate_newest",
        aggregate=uuid_param(rows.dialect, aggregate_id),
        topics=list(topics),
        limit=limit,
    )
    return _records(aggregate_id, found)[::-1]


def event_count(rows: Rows, aggregate_id: UUID) -> int:
    """How many events an aggregate has (its last version; versions run 1, 2, ...)."""
    found = rows.rows("aggregate_version", aggregate=uuid_param(rows.dialect, aggregate_id))
    return int(found[0][0])


def leaf_indices(rows: Rows, positions: Sequence[int]) -> dict[int, int]:
    """Position -> the transparency log's leaf index of these events (those sequenced):
    the history's and the log's one read of them."""
    found: dict[int, int] = {}
    ordered = sorted(set(positions))
    for at in range(0, len(ordered), _CHUNK):  # one IN list a chunk
        chunk = ordered[at : at + _CHUNK]
        found.update({int(p): int(i) for p, i in rows.rows("log_leaves", positions=chunk)})
    return found


def _records(aggregate_id: UUID, found: list[Row]) -> list[StoredRecord]:
    return [StoredRecord(int(r[0]), aggregate_id, int(r[1]), r[2], bytes(r[3])) for r in found]


def stored_versions(store: EventStore, ids: set[UUID]) -> dict[UUID, int]:
    """The stored version of each of these aggregates, in one query a chunk (absent: none).
    Every write asks this (twice, the second time under the log's lock): written for the
    driver (``ledger.store.driver_rows``), as SQLAlchemy's expanding IN with a type
    processor per id cost ~20 µs an id."""
    from ledger.store.driver_rows import (  # noqa: PLC0415 - see the module's docstring
        dialect_of,
        select_rows,
        uuid_in,
        uuid_in_params,
        uuid_keys,
    )

    if not ids:
        return {}
    found: dict[UUID, int] = {}
    ordered = list(ids)
    table = store.events.fullname
    with store.transaction(commit=False) as session:
        dialect = dialect_of(session)
        for at in range(0, len(ordered), _CHUNK):
            keys = uuid_keys(dialect, ordered[at : at + _CHUNK])
            where = uuid_in(dialect, "originator_id", len(keys))
            rows = select_rows(
                session,
                f"SELECT originator_id, max(originator_version) FROM {table} "  # noqa: S608
                f"WHERE {where} GROUP BY originator_id",
                uuid_in_params(dialect, keys),
            )
            found.update({keys[r[0]]: int(r[1]) for r in rows})
    return found


def records_of(store: EventStore, ids: Sequence[UUID]) -> dict[UUID, list[StoredRecord]]:
    """Every event of each of these aggregates, in version order, in one query a chunk."""
    from sqlalchemy import select  # noqa: PLC0415 - see the module's docstring

    e = store.events.c
    found: dict[UUID, list[StoredRecord]] = {}
    ordered = sorted(set(ids), key=str)
    with store.transaction(commit=False) as session:
        for at in range(0, len(ordered), _CHUNK):
            rows = session.execute(
                select(e.originator_id, e.id, e.originator_version, e.topic, e.state)
                .where(e.originator_id.in_(ordered[at : at + _CHUNK]))
                .order_by(e.originator_id, e.originator_version)
            )
            for aggregate, position, version, topic, state in rows:
                aggregate_id = UUID(str(aggregate))
                found.setdefault(aggregate_id, []).append(
                    StoredRecord(position, aggregate_id, version, topic, bytes(state))
                )
    return found


def _page(store: EventStore, topic: str, after: int, limit: int) -> list[tuple[int, bytes]]:
    from sqlalchemy import select  # noqa: PLC0415 - see the module's docstring

    e = store.events.c
    with store.transaction(commit=False) as session:
        rows = session.execute(
            select(e.id, e.state).where(e.topic == topic, e.id > after).order_by(e.id).limit(limit)
        ).all()
    return [(int(r[0]), bytes(r[1])) for r in rows]


def stored_states(store: EventStore, topic: str) -> Iterator[dict[str, Any]]:
    """The decoded stored fields of every event of one topic, in ledger order. A record
    that does not decode is left out: history and audit report it."""
    after = 0
    while True:
        page = _page(store, topic, after, _PAGE)
        for _, state in page:
            try:
                yield json.loads(state)
            except ValueError:
                continue
        if len(page) < _PAGE:
            return
        after = page[-1][0]
