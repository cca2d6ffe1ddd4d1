"""Histories: a run's or a key's events, re-verified, a page at a time, with what each
changed (a run's: ``api.service.run_history``, which a short command reads through the
driver too)."""

from __future__ import annotations

from api.service.freshness import Views
from api.service.models.history import KeyHistory, RunHistory
from api.service.run_history import changes_by_event, history_event, run_history
from ledger.errors import NotFoundError
from ledger.history import DEFAULT_PAGE, MAX_PAGE, history_page, ledger_keys
from ledger.ids import principal_id
from ledger.store.event_store import StoreSession
from ledger.store.stored_events import leaf_indices
from projections.queries import rows_of
from projections.reference_text import full_digest

__all__ = ["DEFAULT_PAGE", "MAX_PAGE", "History", "changes_by_event"]


class History:
    def __init__(self, views: Views) -> None:
        self.views = views
        self.ledger = views.ledger

    def run(self, reference: str, start: int = 1, limit: int = DEFAULT_PAGE) -> RunHistory:
        """One page of a run's history (``api.service.run_history``), in one snapshot: of
        the views too where the run is named by what they resolve."""

        def read(session: StoreSession) -> RunHistory:
            keys = ledger_keys(self.ledger)
            rows = rows_of(session)
            return run_history(rows, reference, keys, self.ledger.trust_root, start, limit)

        if full_digest(reference) is None:
            return self.views.read(read)
        with self.ledger.store.transaction(commit=False) as session:
            return read(session)

    def key(self, key_id: str) -> KeyHistory:
        if self.ledger.key_state(key_id) is None:
            raise NotFoundError(f"no key {key_id} is registered")
        page = history_page(self.ledger, principal_id(key_id))  # a key has at most 2 events
        leaves = self._leaves([e.position for e in page.entries])
        return KeyHistory(
            key_id=key_id,
            events=[history_event(e, leaves.get(e.position), None) for e in page.entries],
            all_verified=all(e.ok for e in page.entries),
            start=page.start,
            next=page.next_start,
            total=page.total,
        )

    def _leaves(self, positions: list[int]) -> dict[int, int]:
        with self.ledger.store.transaction(commit=False) as session:
            return leaf_indices(rows_of(session), positions)
