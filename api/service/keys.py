"""Keys: the registered keys, a page at a time, and one key as the log holds it."""

from __future__ import annotations

from api.service.freshness import Views
from api.service.key_pages import LIMIT, VerifiedKeys, key_page, verified_key_page
from api.service.models.keys import KeyList, KeyRecord
from ledger.errors import NotFoundError
from ledger.store.event_store import connection_of
from ledger.store.read_door import SessionRows


class Keys:
    def __init__(self, views: Views) -> None:
        self.ledger = views.ledger

    def list_page(self, cursor: str | None = None, limit: int = LIMIT) -> KeyList:
        """A page of registered keys in registration order (``api.service.key_pages``)."""
        with self.ledger.store.transaction(commit=False) as session:
            return key_page(SessionRows(connection_of(session)), cursor, limit)

    def verified_page(self, cursor: str | None = None, limit: int = LIMIT) -> VerifiedKeys:
        """``list_page``, each key's events re-verified."""
        with self.ledger.store.transaction(commit=False) as session:
            rows = SessionRows(connection_of(session))
            return verified_key_page(rows, self.ledger.trust_root, cursor, limit)

    def get(self, key_id: str) -> KeyRecord:
        record = self.ledger.key_state(key_id)
        if record is None:
            raise NotFoundError(f"no key {key_id} is registered")
        return KeyRecord.of(record)
