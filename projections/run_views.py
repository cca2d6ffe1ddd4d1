"""The runs' read models as an eventsourcing ``Projection`` over the ledger's event classes.

``RunViews.process_event`` dispatches on the event's class (``Run.Ingested``,
``Run.Attested`` …), never on a topic string. Events come decoded by the ledger's own mapper
(``decode``), so a field the projection reads is the field the aggregate stored. The runner
(``projections.runner``) feeds a batch of events, then writes what they add up to and the
tracking position in one transaction: exactly once, whether the events came from a catch-up
read (SQLite, and on demand everywhere) or a subscription (PostgreSQL's LISTEN/NOTIFY).

Typed decoding against decoding the stored JSON by hand (``json.loads`` of the row, then of
the envelope's payload): 49 against 46 µs per event on the catalog ledger
(``benchmarks.bench_projections.decode_costs``), about 1.5 % of a rebuild's time per event,
and the rebuild's rate and table digests are the same either way. One decoder, the ledger's
own, is kept: a second would be a second rule for what a stored event says.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from eventsourcing.dispatch import singledispatchmethod
from eventsourcing.persistence import Mapper, StoredEvent, Tracking, TrackingRecorder
from eventsourcing.projection import Projection
from sqlalchemy import insert, select, update

from domain.event_names import EventName
from ledger.aggregates import Run, SignedEvent, topic_of
from ledger.signing.dsse import stored_statement
from ledger.store.event_store import EventStore, StoreSession
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

# position, originator id, version, topic, state (a row of the events table)
StoredRow = Sequence[Any]


def decode(mapper: Mapper[Any], rows: Iterable[StoredRow]) -> Iterator[tuple[Any, Tracking]]:
    """Stored rows as the ledger's typed events, each with its place in the log."""
    for position, originator_id, version, topic, state in rows:
        stored = StoredEvent(originator_id, int(version), str(topic), bytes(state))
        yield mapper.to_domain_event(stored), Tracking(RUNNER_NAME, int(position))


def event_name(event: object) -> EventName | None:
    """The domain's name of a run event (None for the key book's events)."""
    return RUN_EVENTS.get(type(event))


def statement_of(event: Run.Ingested | SignedEvent) -> dict[str, Any]:
    return stored_statement(event.envelope)


def subject_of(statement: dict[str, Any]) -> str:
    return "sha256:" + str(statement["subject"][0]["digest"]["sha256"])


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
        for event, tracking in events:
            self.process_event(event, tracking)

    @singledispatchmethod
    def process_event(self, domain_event: object, tracking: Tracking) -> None:
        """An event with no read model here (the key book's): only its position counts."""
        self.last = tracking.notification_id

    @process_event.register
    def _ingested(self, event: Run.Ingested, tracking: Tracking) -> None:
        position = self._track(tracking)
        statement = statement_of(event)
        predicate = statement["predicate"]
        self.pending.remember_manifests(position, predicate["manifests"])
        row = new_run_row(position, subject_of(statement), event.received_at, predicate)
        self.pending.new_rows[row["run_digest"]] = row
        if row["comparison_key"] is not None:
            self.pending.touched_groups.add(row["comparison_key"])

    @process_event.register
    def _attested(self, event: Run.Attested, tracking: Tracking) -> None:
        change = self._change(subject_of(statement_of(event)), tracking)
        change["attestations"] = change.get("attestations", 0) + 1

    @process_event.register
    def _retracted(self, event: Run.Retracted, tracking: Tracking) -> None:
        digest = subject_of(statement_of(event))
        self._change(digest, tracking)["retracted"] = True
        self.pending.regroup.add(digest)

    @process_event.register
    def _superseded(self, event: Run.Superseded, tracking: Tracking) -> None:
        digest = subject_of(statement_of(event))
        self._change(digest, tracking)["superseded_by"] = event.superseded_by or "unspecified"
        self.pending.regroup.add(digest)

    @process_event.register
    def _attached(self, event: Run.ManifestsAttached, tracking: Tracking) -> None:
        statement = statement_of(event)
        digest = subject_of(statement)
        self.pending.remember_manifests(
            tracking.notification_id, statement["predicate"]["manifests"]
        )
        self._change(digest, tracking)
        self.pending.dirty_evidence.add(digest)  # its refold gives the run its new group

    @process_event.register
    def _rerun_recorded(self, event: Run.RerunRecorded, tracking: Tracking) -> None:
        digest = subject_of(statement_of(event))
        change = self._change(digest, tracking)
        change["reruns"] = change.get("reruns", 0) + 1
        self.pending.dirty_evidence.add(digest)

    @process_event.register
    def _rerun_job(self, event: Run.RerunRequested | Run.RerunClaimed, tracking: Tracking) -> None:
        # A job moves no view, only the run's last position.
        self._change(subject_of(statement_of(event)), tracking)

    def _track(self, tracking: Tracking) -> int:
        self.last = tracking.notification_id
        return tracking.notification_id

    def _change(self, digest: str, tracking: Tracking) -> dict[str, Any]:
        """The batch's change to a run (its new row, if it was ingested in this batch), with
        the run's last position moved to this event."""
        new_row = self.pending.new_rows.get(digest)
        change = new_row if new_row is not None else self.pending.changes.setdefault(digest, {})
        change["last_position"] = self._track(tracking)
        return change
