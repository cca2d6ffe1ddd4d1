"""A page of the registered keys: the one reading of it, for every face (issue 33).

The page and every event of its keys are one statement of ``ledger.store.read_statements``,
run on whatever door holds the connection: the server's and a full command's SQLAlchemy
connection (``Keys``), or a short command's driver connection
(``api.service.driver_reads``), which then loads no SQLAlchemy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from uuid import UUID

from api.service.models.keys import KeyList, KeyRecord
from api.service.paging import Cursor, page_size
from domain.event_names import EventName
from ledger.authority import KeyState
from ledger.event_verification import verify_record
from ledger.ids import principal_id, topic_of
from ledger.key_fold import fold_key_events
from ledger.signing.trust import TrustRoot
from ledger.store.read_door import Rows, uuid_result
from ledger.store.stored_events import StoredRecord, aggregate_records

REGISTERED = topic_of(EventName.KEY_REGISTERED)
LIMIT = 50  # keys a page, unless asked


@dataclass(frozen=True)
class VerifiedKeys:
    """A page of keys, and whether each key's stored events verify (re-checked now, each
    against its signer's key as the log holds it, as the key's history shows them)."""

    page: KeyList
    verified: dict[str, bool]


@dataclass(frozen=True)
class _Read:
    keys: list[tuple[int, str, UUID]]  # (registration position, key id, aggregate)
    events: dict[UUID, list[StoredRecord]]
    states: dict[str, KeyState]
    next: str | None

    @property
    def page(self) -> KeyList:
        items = [KeyRecord.of(self.states[k]) for _, k, _ in self.keys if k in self.states]
        return KeyList(items=items, next=self.next)


def _read(rows: Rows, cursor: str | None, limit: int) -> _Read:
    size = page_size(limit)
    after = Cursor.decode(cursor).after if cursor is not None else 0
    events: dict[UUID, list[StoredRecord]] = {}
    # Every registration row read, in order, its key id None where the record does not
    # decode: such a one is left out of the page (history and audit report it) but still
    # takes its place, so the page and its cursor go by rows read and none after it is lost.
    read: list[tuple[int, str | None, UUID]] = []
    for aggregate, position, version, topic, state in rows.rows(
        "key_page", topic=REGISTERED, after=after, limit=size + 1
    ):
        record = StoredRecord(
            int(position), uuid_result(aggregate), int(version), topic, bytes(state)
        )
        events.setdefault(record.aggregate_id, []).append(record)
        if topic == REGISTERED:
            read.append((record.position, _registered_key(record.state), record.aggregate_id))
    more = len(read) > size
    last = read[size - 1][0] if more else None
    page = [(at, key_id, aggregate) for at, key_id, aggregate in read[:size] if key_id]
    folded = {key_id: fold_key_events(key_id, events[aggregate]) for _, key_id, aggregate in page}
    return _Read(
        keys=page,
        events=events,
        states={k: state for k, state in folded.items() if state is not None},
        next=None if last is None else Cursor(last).encode(),
    )


def key_page(rows: Rows, cursor: str | None = None, limit: int = LIMIT) -> KeyList:
    """A page of registered keys in registration order (anyone may add attester keys: a
    page costs its keys, read in one query)."""
    return _read(rows, cursor, limit).page


def verified_key_page(
    rows: Rows, trust_root: TrustRoot, cursor: str | None = None, limit: int = LIMIT
) -> VerifiedKeys:
    """``key_page``, each key's events re-verified (``ledger.event_verification``, as
    ``ledger.history`` verifies them); a signer off the page is read by its own statement."""
    read = _read(rows, cursor, limit)
    states: dict[str, KeyState | None] = dict(read.states)

    def key(key_id: str) -> KeyState | None:
        if key_id not in states:
            records = aggregate_records(rows, principal_id(key_id))
            states[key_id] = fold_key_events(key_id, records)
        return states[key_id]

    verified = {
        key_id: all(verify_record(r, key, trust_root).ok for r in read.events[aggregate])
        for _, key_id, aggregate in read.keys
        if key_id in read.states
    }
    return VerifiedKeys(read.page, verified)


def _registered_key(state: bytes) -> str | None:
    try:
        decoded = json.loads(state)
    except ValueError:
        return None
    return str(decoded["key_id"]) if isinstance(decoded, dict) and "key_id" in decoded else None
