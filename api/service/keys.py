"""Keys: the registered keys, a page at a time, and one key as the log holds it."""

from __future__ import annotations

from api.service.freshness import Views
from api.service.models.keys import KeyList, KeyRecord
from api.service.paging import Cursor, page_size
from ledger.errors import NotFoundError


class Keys:
    def __init__(self, views: Views) -> None:
        self.ledger = views.ledger

    def list_page(self, cursor: str | None = None, limit: int = 50) -> KeyList:
        """A page of registered keys in registration order (anyone may add attester keys:
        a page costs its keys, read in one query)."""
        size = page_size(limit)
        after = Cursor.decode(cursor).after if cursor is not None else 0
        page = self.ledger.registered_keys(after, size + 1)
        more = len(page) > size
        page = page[:size]
        states = self.ledger.key_states(k for _, k in page)
        items = [KeyRecord.of(states[k]) for _, k in page if k in states]
        return KeyList(items=items, next=Cursor(page[-1][0]).encode() if more and page else None)

    def get(self, key_id: str) -> KeyRecord:
        record = self.ledger.key_state(key_id)
        if record is None:
            raise NotFoundError(f"no key {key_id} is registered")
        return KeyRecord.of(record)
