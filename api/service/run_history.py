"""A run's history, a page at a time: its events re-verified, with what each changed, read
on any door (``ledger.store.read_door``): the service on its session's connection
(``api.service.history``), a short command on its driver's (issue 33), so both answer alike.

What an event of a run changed (its evidence level, its place in the rankings) is found by
folding the run's verified events in order with the same domain fold the views use, so a
history shows exactly which event moved the level (and that attestations never do). It
depends only on the run's state events before it, so a page costs the page, however long
the run.

Loads no SQLAlchemy and no eventsourcing.
"""

from __future__ import annotations

from api.service.models.history import (
    CheckResult,
    EventChange,
    EvidenceChange,
    HistoryEvent,
    RunHistory,
)
from domain.event_names import EventName
from domain.run_facts import RunFold
from ledger.event_verification import EventVerification
from ledger.history_reads import (
    DEFAULT_PAGE,
    KeySource,
    describe,
    history_page,
    require_run,
    state_events_before,
)
from ledger.ids import run_id
from ledger.signing.trust import TrustRoot
from ledger.store.read_door import Rows
from ledger.store.stored_events import leaf_indices
from projections.reference_text import full_digest
from projections.references import resolve_run


def run_digest(rows: Rows, reference: str) -> str:
    """The run ``reference`` names: a full digest looked up in the log itself (a run whose
    record is damaged is still found, for its audit), else by prefix, name or external id
    in the views (``projections.references``)."""
    full = full_digest(reference)
    return require_run(rows, full) if full is not None else resolve_run(rows, reference)


def run_history(
    rows: Rows,
    reference: str,
    keys: KeySource,
    trust_root: TrustRoot,
    start: int = 1,
    limit: int = DEFAULT_PAGE,
) -> RunHistory:
    """One page of a run's history (versions ``start`` ..), re-verified, with what each
    event changed, read in ``rows``'s snapshot."""
    digest = run_digest(rows, reference)
    page = history_page(rows, run_id(digest), keys, trust_root, start, limit)
    earlier = state_events_before(rows, digest, page.start, keys, trust_root)
    leaves = leaf_indices(rows, [e.position for e in page.entries])
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
