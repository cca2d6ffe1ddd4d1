"""A page of the registered keys: the one reading of it, for every face (issue 33).

The page and every event of its keys are one statement of ``ledger.store.read_statements``,
run on whatever door holds the connection: the server's and a full command's SQLAlchemy
connection (``Keys.list_page``), or a short command's driver connection
(``api.service.driver_reads``), which then loads no SQLAlchemy.
"""

from __future__ import annotations

import json

from api.service.models.keys import KeyList, KeyRecord
from api.service.paging import Cursor, page_size
from domain.event_names import EventName
from ledger.admission_cache import fold_key_events
from ledger.aggregates import topic_of
from ledger.store.read_door import Rows, uuid_of
from ledger.store.stored_events import StoredRecord

REGISTERED = topic_of(EventName.KEY_REGISTERED)
LIMIT = 50  # keys a page, unless asked


def key_page(rows: Rows, cursor: str | None = None, limit: int = LIMIT) -> KeyList:
    """A page of registered keys in registration order (anyone may add attester keys: a
    page costs its keys, read in one query)."""
    size = page_size(limit)
    after = Cursor.decode(cursor).after if cursor is not None else 0
    events: dict[object, list[StoredRecord]] = {}
    registered: list[tuple[int, str, object]] = []  # (position, key id, aggregate)
    for aggregate, position, version, topic, state in rows.rows(
        "key_page", topic=REGISTERED, after=after, limit=size + 1
    ):
        record = StoredRecord(int(position), uuid_of(aggregate), int(version), topic, bytes(state))
        events.setdefault(record.aggregate_id, []).append(record)
        if topic == REGISTERED and (key_id := _registered_key(record.state)) is not None:
            registered.append((record.position, key_id, record.aggregate_id))
    # A registration whose record does not decode is left out (history and audit report
    # it); it still counted towards the rows the page read, as before.
    more = len(registered) > size
    page = registered[:size]
    states = {key_id: fold_key_events(key_id, events[aggregate]) for _, key_id, aggregate in page}
    items = [KeyRecord.of(state) for state in states.values() if state is not None]
    return KeyList(items=items, next=Cursor(page[-1][0]).encode() if more and page else None)


def _registered_key(state: bytes) -> str | None:
    try:
        decoded = json.loads(state)
    except ValueError:
        return None
    return str(decoded["key_id"]) if isinstance(decoded, dict) and "key_id" in decoded else None
