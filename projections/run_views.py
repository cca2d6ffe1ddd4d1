"""The runs' read models as an eventsourcing ``Projection`` over the ledger's event classes.

``RunViews.process_event`` dispatches on the event's class (``Run.Ingested``,
``Run.Attested`` …), never on a topic string: that is how a subscription delivers events
(PostgreSQL's LISTEN/NOTIFY, decoded by the ledger's own mapper). A catch-up reads stored
rows instead (``RunViews.fold_stored``): the fields the commit wrote for the fold beside
each event (``ledger.store.fold_fields``), decoded alone; for an event with none (stored
before that table existed and not backfilled), ``ledger.store.event_fields`` reads the same
fields straight from the stored event, and hands any row it cannot read exactly as the
mapper would to the mapper. Either way each run event becomes one :class:`FoldEvent`, and one
handler per event name folds it (``RunViews.apply``). The runner
(``projections.runner``) feeds a batch of events, then writes what they add up to and the
tracking position in one transaction: exactly once, whether the events came from a catch-up
read (SQLite, and on demand everywhere) or a subscription.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from eventsourcing.dispatch import singledispatchmethod
from eventsourcing.persistence import Mapper, StoredEvent, Tracking, TrackingRecorder
from eventsourcing.projection import Projection
from sqlalchemy import insert, select, update

from domain.event_names import EventName
from ledger.aggregates import Run, SignedEvent, topic_of
from ledger.signing.dsse import stored_statement
from ledger.store.event_fields import EventFieldReader
from ledger.store.event_store import EventStore, StoreSession
from ledger.store.fold_fields import (
    FoldFields,
    decode_fields,
    fields_of_payload,
    predicate_of,
    predicate_with,
)
from projections.tables import tracking as tracking_table
from projections.view_rows import Pending, new_run_row

RUNNER_NAME = "views"

# The class of each run event, and the name the domain's folds know it by.
RUN_EVENTS: dict[type[Any], EventName] = {
    Run.Ingested: EventName.RUN_INGESTED,
    Run.Attested: EventName.RUN_ATTESTED,
    Run.Retracted: EventName.RUN_RETRACTED,
    Run.Superseded: EventName.RUN_SUPERSEDED,
    Run.ManifestsAttached: EventName.RUN_MANIFESTS_ATTACHED,
    Run.RerunRequested: EventName.RUN_RERUN_REQUESTED,
    Run.RerunClaimed: EventName.RUN_RERUN_CLAIMED,
    Run.RerunRecorded: EventName.RUN_RERUN_RECORDED,
}
RUN_TOPICS = tuple(topic_of(str(name)) for name in RUN_EVENTS.values())

# position, topic, fold fields, state: what a catch-up reads of an event (``fields``: the
# row the commit wrote for the fold, None if none; ``state``: only where it has none)
StoredRow = Sequence[Any]


_UNREAD: Any = object()


class FoldEvent(NamedTuple):
    """A run event as the views fold it: its name, its place in the log, the run its
    statement is about and the statement's predicate, and what the ledger stored beside the
    envelope."""

    name: EventName
    position: int
    subject: str
    predicate: Any
    received_at: Any
    signer: Any
    superseded_by: str | None  # a supersession's (None for the other events)


def fold_event(position: int, fields: FoldFields, predicate: Any = _UNREAD) -> FoldEvent | None:
    """The fold's fields as the views fold them (None: no run event); ``predicate``: their
    predicate, where the caller read it already (``fold_fields.predicate_with``)."""
    name = fields.event_name
    if name is None:
        return None
    return FoldEvent(
        name,
        position,
        fields.subject,
        predicate_of(fields) if predicate is _UNREAD else predicate,
        fields.received_at,
        fields.signer,
        fields.superseded_by,
    )


def decode(mapper: Mapper[Any], rows: Iterable[Sequence[Any]]) -> Iterator[tuple[Any, Tracking]]:
    """Stored rows ``(position, originator id, version, topic, state)`` as the ledger's typed
    events, each with its place in the log."""
    for position, originator_id, version, topic, state in rows:
        stored = StoredEvent(originator_id, int(version), str(topic), bytes(state))
        yield mapper.to_domain_event(stored), Tracking(RUNNER_NAME, int(position))


def event_name(event: object) -> EventName | None:
    """The domain's name of a run event (None for the key book's events)."""
    return RUN_EVENTS.get(type(event))


def statement_of(event: Run.Ingested | SignedEvent) -> dict[str, Any]:
    return stored_statement(event.envelope)


def typed_fold_event(event: Any, position: int) -> FoldEvent | None:
    """A typed event (the mapper's) as the views fold it; None for the key book's events."""
    name = RUN_EVENTS.get(type(event))
    if name is None:
        return None
    superseded_by = event.superseded_by if name is EventName.RUN_SUPERSEDED else None
    payload = binascii.a2b_base64(event.envelope["payload"])  # as ``stored_statement`` does
    fields = fields_of_payload(name, payload, event.received_at, event.signer, superseded_by)
    return fold_event(position, fields)


def field_reader(mapper: Mapper[Any]) -> EventFieldReader:
    """The reader of the run events' stored fields, for rows the ``mapper`` wrote."""
    return EventFieldReader(mapper, RUN_EVENTS, Run.Superseded)


class StoredLookups(Protocol):
    """What a catch-up reads beside its rows, for the few events they do not carry whole."""

    def originator(self, position: int) -> tuple[Any, int]:
        """(aggregate id, version) of the event at ``position``."""

    def state(self, position: int) -> bytes:
        """The stored state of the event at ``position``."""

    def bodies(self, digests: Iterable[bytes]) -> Mapping[bytes, bytes]:
        """The shared manifest documents stored under ``digests``, each checked against its
        key (``ledger.store.fold_manifests``); one missing or wrong is absent."""


def stored_fold_events(
    rows: Iterable[StoredRow], mapper: Mapper[Any], reader: EventFieldReader, lookups: StoredLookups
) -> Iterator[tuple[int, FoldEvent | None]]:
    """Stored rows ``(position, topic, fields, state)`` as the views fold them: (position,
    the run event or None for the key book's events). From the fold fields the commit wrote
    where the row has them, with the shared documents they name (read for all the rows at
    once); else (no row, or a document missing) read by ``reader`` from the state where it
    can, else decoded by the ``mapper``, with the event's ``lookups.originator``."""
    decoded = [
        (int(position), topic, None if folded is None else decode_fields(folded), state)
        for position, topic, folded, state in rows
    ]
    wanted = {key for _, _, fields, _ in decoded if fields for _, key in fields.shared}
    bodies = lookups.bodies(wanted) if wanted else {}
    for at, topic, fields, stored_state in decoded:
        state = stored_state
        if fields is not None:
            if fields.name is None:
                yield at, None  # the key book's: nothing to fold but its position
                continue
            predicate = predicate_with(fields, bodies)
            if predicate is not None:
                yield at, fold_event(at, fields, predicate)
                continue
            state = lookups.state(at)  # as if it had no row: decode the event
        data = state if type(state) is bytes else bytes(state)
        read = reader.read(topic, data)
        if read is None:
            originator_id, version = lookups.originator(at)
            stored = StoredEvent(originator_id, int(version), str(topic), data)
            yield at, typed_fold_event(mapper.to_domain_event(stored), at)
        else:
            name = RUN_EVENTS[read.event_class]
            made = fields_of_payload(
                name, read.payload, read.received_at, read.signer, read.superseded_by
            )
            yield at, fold_event(at, made)


class ViewsTracking(TrackingRecorder):
    """The views' tracking row: the position of the last event folded into them.

    The views follow one ledger, so the row is keyed by the projection's name; it is written
    in the transaction that writes the batch's view changes (``record``)."""

    def __init__(self, store: EventStore, name: str = RUNNER_NAME) -> None:
        self.store = store
        self.name = name

    def position(self, session: StoreSession) -> int:
        value = session.execute(
            select(tracking_table.c.position).where(tracking_table.c.name == self.name)
        ).scalar()
        return int(value) if value is not None else 0

    def record(self, session: StoreSession, position: int) -> None:
        exists = session.execute(
            select(tracking_table.c.name).where(tracking_table.c.name == self.name)
        ).scalar()
        if exists is None:
            session.execute(insert(tracking_table).values(name=self.name, position=position))
        else:
            session.execute(
                update(tracking_table)
                .where(tracking_table.c.name == self.name)
                .values(position=position)
            )

    def max_tracking_id(self, application_name: str) -> int | None:
        with self.store.transaction(commit=False) as session:
            found = self.position(session)
        return found or None

    def insert_tracking(self, tracking: Tracking) -> None:
        with self.store.transaction(commit=True) as session:
            self.record(session, tracking.notification_id)


class RunViews(Projection[ViewsTracking]):
    """What a batch of run events changes in the views.

    eventsourcing's ``process_event`` writes each event's change with its tracking; here a
    batch's changes gather in ``pending`` and the runner writes them, and the position of
    the batch's last event, through ``view`` in one transaction (a rebuild folds thousands
    of events per commit instead of one).
    """

    name = RUNNER_NAME
    topics = RUN_TOPICS

    def __init__(self, view: ViewsTracking) -> None:
        super().__init__(view)
        self.pending = Pending()
        self.last: int | None = None

    def take(self) -> tuple[Pending, int | None]:
        """The batch so far, and the position of its last event; starts a new batch."""
        batch, last = self.pending, self.last
        self.pending, self.last = Pending(), None
        return batch, last

    def fold(self, events: Iterable[tuple[Any, Tracking]]) -> None:
        """Fold typed events (a subscription's)."""
        for event, tracking in events:
            self.process_event(event, tracking)

    def fold_stored(
        self,
        rows: Iterable[StoredRow],
        mapper: Mapper[Any],
        reader: EventFieldReader,
        lookups: StoredLookups,
    ) -> None:
        """Fold stored rows ``(position, topic, fields, state)`` (a catch-up's), in log order."""
        for position, event in stored_fold_events(rows, mapper, reader, lookups):
            if event is None:
                self.last = position
            else:
                self.apply(event)

    @singledispatchmethod
    def process_event(self, domain_event: object, tracking: Tracking) -> None:
        """An event with no read model here (the key book's): only its position counts."""
        self.last = tracking.notification_id

    @process_event.register
    def _run_event(
        self,
        event: Run.Ingested
        | Run.Attested
        | Run.Retracted
        | Run.Superseded
        | Run.ManifestsAttached
        | Run.RerunRequested
        | Run.RerunClaimed
        | Run.RerunRecorded,
        tracking: Tracking,
    ) -> None:
        folded = typed_fold_event(event, tracking.notification_id)
        if folded is not None:
            self.apply(folded)

    def apply(self, event: FoldEvent) -> None:
        """Fold one run event into the batch."""
        _HANDLERS[event.name](self, event)

    def _ingested(self, event: FoldEvent) -> None:
        position = self._track(event.position)
        predicate = event.predicate
        self.pending.remember_manifests(position, predicate["manifests"])
        row = new_run_row(position, event.subject, event.received_at, predicate)
        self.pending.new_rows[row["run_digest"]] = row
        if row["comparison_key"] is not None:
            self.pending.touched_groups.add(row["comparison_key"])

    def _attested(self, event: FoldEvent) -> None:
        change = self._change(event.subject, event.position)
        change["attestations"] = change.get("attestations", 0) + 1

    def _retracted(self, event: FoldEvent) -> None:
        digest = event.subject
        self._change(digest, event.position)["retracted"] = True
        self.pending.regroup.add(digest)

    def _superseded(self, event: FoldEvent) -> None:
        digest = event.subject
        self._change(digest, event.position)["superseded_by"] = event.superseded_by or "unspecified"
        self.pending.regroup.add(digest)

    def _attached(self, event: FoldEvent) -> None:
        digest = event.subject
        self.pending.remember_manifests(event.position, event.predicate["manifests"])
        self._change(digest, event.position)
        self.pending.dirty_evidence.add(digest)  # its refold gives the run its new group

    def _rerun_recorded(self, event: FoldEvent) -> None:
        digest = event.subject
        change = self._change(digest, event.position)
        change["reruns"] = change.get("reruns", 0) + 1
        self.pending.dirty_evidence.add(digest)

    def _rerun_job(self, event: FoldEvent) -> None:
        # A job moves no view, only the run's last position.
        self._change(event.subject, event.position)

    def _track(self, position: int) -> int:
        self.last = position
        return position

    def _change(self, digest: str, position: int) -> dict[str, Any]:
        """The batch's change to a run (its new row, if it was ingested in this batch), with
        the run's last position moved to this event."""
        new_row = self.pending.new_rows.get(digest)
        change = new_row if new_row is not None else self.pending.changes.setdefault(digest, {})
        change["last_position"] = self._track(position)
        return change


_HANDLERS: dict[EventName, Callable[[RunViews, FoldEvent], None]] = {
    EventName.RUN_INGESTED: RunViews._ingested,
    EventName.RUN_ATTESTED: RunViews._attested,
    EventName.RUN_RETRACTED: RunViews._retracted,
    EventName.RUN_SUPERSEDED: RunViews._superseded,
    EventName.RUN_MANIFESTS_ATTACHED: RunViews._attached,
    EventName.RUN_RERUN_REQUESTED: RunViews._rerun_job,
    EventName.RUN_RERUN_CLAIMED: RunViews._rerun_job,
    EventName.RUN_RERUN_RECORDED: RunViews._rerun_recorded,
}
