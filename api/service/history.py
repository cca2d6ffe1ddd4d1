"""Histories: a run's or a key's events, re-verified, a page at a time, with what each changed.

What an event of a run changed (its evidence level, its place in the rankings) is found by
folding the run's verified events in order with the same domain fold the views use, so a
history shows exactly which event moved the level (and that attestations never do). It
depends only on the run's state events before it, so a page costs the page, however long
the run.
"""

from __future__ import annotations

from typing import Any

from api.service.freshness import Views
from api.service.models.history import (
    CheckResult,
    EventChange,
    EvidenceChange,
    HistoryEvent,
    KeyHistory,
    RunHistory,
)
from api.service.runs import Runs
from domain.event_names import EventName
from domain.run_facts import RunFold
from ledger.errors import NotFoundError
from ledger.event_verification import EventVerification
from ledger.history import DEFAULT_PAGE, MAX_PAGE, describe, history_page, state_events_before
from ledger.ids import principal_id, run_id

__all__ = ["DEFAULT_PAGE", "MAX_PAGE", "History", "changes_by_event"]


def _level(fold: RunFold) -> str:
    return fold.evidence.level.name.lower()


def changes_by_event(run_digest: str, entries: list[EventVerification]) -> dict[int, EventChange]:
    """Position → what each event changed; events that failed verification change nothing
    and say so."""
    changes: dict[int, EventChange] = {}
    fold: RunFold | None = None
    for entry in entries:
        if not entry.ok or entry.predicate is None:
            changes[entry.position] = EventChange(ignored="failed verification: changes nothing")
            continue
        before = None if fold is None else _level(fold)
        was_ranked = fold is not None and not (fold.retracted or fold.superseded_by)
        if entry.event == EventName.RUN_INGESTED:
            fold = RunFold.ingested(entry.position, run_digest, entry.predicate)
        elif fold is not None:
            fold.apply(entry.event, entry.position, entry.signer or "", entry.predicate)
        if fold is None:
            continue
        change = EventChange()
        after = _level(fold)
        if after != before:
            change.evidence = EvidenceChange(
                from_=before, to=after, reasons=list(fold.evidence.reasons)
            )
        if was_ranked and (fold.retracted or fold.superseded_by):
            change.ranking = "left the rankings"
        changes[entry.position] = change
    return changes


def history_event(
    entry: EventVerification, leaf_index: int | None, changed: EventChange | None
) -> HistoryEvent:
    return HistoryEvent(
        position=entry.position,
        version=entry.version,
        event=entry.event,
        received_at=entry.received_at,
        signer=entry.signer,
        role=entry.role,
        predicate_type=entry.predicate_type,
        predicate=entry.predicate,
        envelope=entry.envelope,
        verified=entry.ok,
        checks=[CheckResult(name=c.name, ok=c.ok, detail=c.detail) for c in entry.checks],
        says=describe(entry),
        leaf_index=leaf_index,
        changed=changed,
    )


class History:
    def __init__(self, views: Views, runs: Runs) -> None:
        self.ledger = views.ledger
        self.runs = runs

    def run(self, reference: str, start: int = 1, limit: int = DEFAULT_PAGE) -> RunHistory:
        """One page of a run's history (versions ``start`` ..), re-verified, with what each
        event changed."""
        digest = self.runs.resolve(reference)
        page = history_page(self.ledger, run_id(digest), start, limit)
        earlier = state_events_before(self.ledger, digest, page.start)
        leaves = self._leaves([e.position for e in page.entries])
        changes = changes_by_event(digest, [*earlier, *page.entries])
        return RunHistory(
            run=digest,
            events=[
                history_event(e, leaves.get(e.position), changes.get(e.position, EventChange()))
                for e in page.entries
            ],
            all_verified=all(e.ok for e in page.entries),  # of this page
            start=page.start,
            next=page.next_start,
            total=page.total,
        )

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
        if not positions:
            return {}
        with self.ledger.store.transaction(commit=False) as session:
            found: dict[int, Any] = self.ledger.tlog.leaves_for_positions(session, positions)
        return {int(k): int(v) for k, v in found.items()}
