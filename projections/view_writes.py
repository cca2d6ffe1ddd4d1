"""What a fold writes into the views, in its batch's transaction: the batch's new runs and
their changes (a few multi-row statements), the manifests not held yet, and a run's evidence
recomputed from its state events; and how the views are read back whole (their digests).

``ProjectionRunner`` decides when and in which transaction; this is how the rows are written.
"""

from __future__ import annotations

import gc
import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, bindparam, case, insert, select, update

from domain.canonical import canonical_json
from domain.event_names import EventName
from domain.rerun_binding import DeviceClass
from domain.run_facts import RunFold
from ledger.aggregates import STATE_TOPICS, run_id
from ledger.application import Ledger
from ledger.store.event_fields import EventFieldReader
from ledger.store.event_store import EventStore, StoreSession, connection_of
from ledger.store.fold_fields import event_fold_fields
from ledger.store.fold_manifests import ManifestBodies
from projections.records import Arrival
from projections.run_views import StoredLookups, stored_fold_events
from projections.tables import VIEW_TABLES, manifests, positional_insert, positional_rows, runs
from projections.view_rows import (
    RANKED_BY,
    Pending,
    chunks,
    evidence_columns,
    jsonable,
    profile_columns,
    ranked_entry,
)

# Re-ranking more groups than this reads the whole runs view once (ranking needs the members
# of every group it ranks, whatever order they come in).
SCAN_GROUPS = 500
_RANKED = len(RANKED_BY)


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector paused for the duration (restored as it was).

    A batch's fold and a re-ranking make tens of thousands of short-lived objects (decoded
    statements, rows, rank entries) and hold thousands at once; none of them is part of a
    reference cycle, so reference counting frees them all, while the collector's passes over
    them cost about a fifth of the fold's time. Anything cyclic made meanwhile is collected
    once it runs again."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@dataclass(frozen=True)
class _Lookups:
    """``run_views.StoredLookups`` in one transaction."""

    session: StoreSession
    events: Any  # the event table's columns
    cache: ManifestBodies

    def originator(self, position: int) -> tuple[Any, int]:
        e = self.events
        found = self.session.execute(
            select(e.originator_id, e.originator_version).where(e.id == position)
        ).one()
        return found[0], int(found[1])

    def state(self, position: int) -> bytes:
        found = self.session.execute(select(self.events.state).where(self.events.id == position))
        return bytes(found.scalar_one())

    def bodies(self, digests: Iterable[bytes]) -> Mapping[bytes, bytes]:
        return self.cache.read(self.session, digests)


@dataclass(frozen=True)
class CatchUp:
    """What a catch-up did: how many events it folded, and the views' position after."""

    events: int
    position: int


class ViewWriter:
    """Writes a ledger's batches of view changes."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._events = ledger.store.events.c
        self._is_postgres = ledger.store.postgres
        self._bodies = ManifestBodies()  # by content: valid for every catch-up
        self._joined = ledger.store.events.outerjoin(
            event_fold_fields, event_fold_fields.c.position == self._events.id
        )

    def read_rows(
        self, session: StoreSession, where: Any, limit: int | None = None
    ) -> Sequence[Any]:
        """``(position, topic, fold fields, state)`` of the events ``where`` says, in log
        order: the state only of an event with no fold fields (``run_views.StoredRow``)."""
        e = self._events
        f = event_fold_fields.c
        query = (
            select(e.id, e.topic, f.fields, case((f.fields.is_(None), e.state), else_=None))
            .select_from(self._joined)
            .where(where)
            .order_by(e.id)
        )
        return session.execute(query if limit is None else query.limit(limit)).all()

    def lookups(self, session: StoreSession) -> StoredLookups:
        """What a catch-up in ``session`` reads beside its rows (``run_views.StoredLookups``)."""
        return _Lookups(session, self._events, self._bodies)

    def flush(self, session: StoreSession, pending: Pending) -> None:
        """Write the batch's new runs and changes with a few multi-row statements."""
        made = pending.run_rows()  # a worker's batch: its rows made already
        if made:
            self.insert_positional(session, runs, made)
        if pending.new_rows:
            self.insert_rows(session, runs, list(pending.new_rows.values()))
        self.insert_manifests(session, pending)
        pending.touch_regrouped()
        if not pending.changes:
            return
        current = {
            r["run_digest"]: r
            for chunk in chunks(sorted(pending.changes), 500)
            for r in session.execute(
                select(
                    runs.c.run_digest, runs.c.attestations, runs.c.reruns, runs.c.comparison_key
                ).where(runs.c.run_digest.in_(chunk))
            ).mappings()
        }
        shapes: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for digest, change in pending.changes.items():
            now = current.get(digest)
            if now is None:
                continue  # an event for a run the views never saw ingested: nothing to update
            if digest in pending.regroup and now["comparison_key"] is not None:
                pending.touched_groups.add(str(now["comparison_key"]))
            values = {
                "key": digest,
                "new_attestations": now["attestations"] + change.get("attestations", 0),
                "new_reruns": now["reruns"] + change.get("reruns", 0),
                "new_last_position": change["last_position"],
                **{f"new_{k}": change[k] for k in ("retracted", "superseded_by") if k in change},
            }
            shapes.setdefault(tuple(sorted(values)), []).append(values)
        # One executemany per shape of change (a lifecycle change sets extra columns).
        for shape, group in shapes.items():
            columns: dict[str, Any] = {
                c.removeprefix("new_"): bindparam(c) for c in shape if c != "key"
            }
            session.execute(
                update(runs).where(runs.c.run_digest == bindparam("key")).values(**columns),
                group,
                execution_options={"synchronize_session": False},
            )

    def insert_manifests(self, session: StoreSession, pending: Pending) -> None:
        """Manifests not seen before (the first event that carried one keeps it)."""
        found = pending.manifest_digests()
        if not found:
            return
        known: set[str] = set()
        for chunk in chunks(found, 500):
            known.update(
                session.execute(
                    select(manifests.c.digest).where(manifests.c.digest.in_(chunk))
                ).scalars()
            )
        fresh = [pending.manifest_row(digest) for digest in found if digest not in known]
        if fresh:
            self.insert_rows(session, manifests, fresh)

    def insert_rows(self, session: StoreSession, table: Table, rows: list[dict[str, Any]]) -> None:
        """Insert rows (dicts with every column of ``table``) with one executemany. On SQLite
        the driver takes them as tuples, converted by the columns' own bind processors (as
        SQLAlchemy would), without SQLAlchemy's per-row parameter handling."""
        if self._is_postgres:
            session.execute(insert(table), rows)
            return
        connection = connection_of(session)
        row_of = positional_rows(table, connection.dialect)
        connection.exec_driver_sql(
            positional_insert(table, connection.dialect), list(map(row_of, rows))
        )

    def insert_positional(
        self, session: StoreSession, table: Table, rows: list[tuple[Any, ...]]
    ) -> None:
        """Insert rows made by ``positional_rows`` for this store's dialect."""
        connection = connection_of(session)
        connection.exec_driver_sql(positional_insert(table, connection.dialect), rows)

    def devices_of(self, key_id: str) -> frozenset[DeviceClass]:
        """A signer's device classes, as its registration names them: a rerun counts only on
        one of its key's (``domain.rerun_binding``). Read when a run's rerun is folded."""
        state = self.ledger.key_states([key_id]).get(key_id)
        return frozenset() if state is None else state.devices

    def recompute_evidence(
        self, session: StoreSession, digest: str, up_to: int, reader: EventFieldReader
    ) -> str | None:
        """Evidence from the run's events (only reruns move it), the verified value, and the
        profile (an attached workload gives the run its comparison group). Read from its
        state events alone: attestations, which anyone may add by the thousand, move none of
        these (``RunFold``), so their number costs this nothing."""
        fold: RunFold | None = None
        e = self._events
        rows = self.read_rows(
            session,
            (e.originator_id == run_id(digest)) & e.topic.in_(STATE_TOPICS) & (e.id <= up_to),
        )
        events = stored_fold_events(rows, self.ledger.mapper, reader, self.lookups(session))
        for _, event in events:
            if event is None:
                continue
            predicate = event.predicate
            if event.name == EventName.RUN_INGESTED:
                fold = RunFold.ingested(event.position, digest, predicate)
                fold.devices_of = self.devices_of  # as the offline verifier reads them
            elif fold is not None:
                fold.apply(event.name, event.position, str(event.signer), predicate)
        if fold is None:
            return None
        median, interval = fold.verified()
        session.execute(
            update(runs)
            .where(runs.c.run_digest == digest)
            .values(
                **profile_columns(fold),
                **evidence_columns(fold.evidence),
                rerun_median_ns=median,
                rerun_ci95_low=interval[0] if interval else None,
                rerun_ci95_high=interval[1] if interval else None,
            )
        )
        return fold.profile.comparison_key

    @staticmethod
    def members(session: StoreSession, keys: set[str]) -> dict[str, list[Arrival]]:
        """The runs of each of these groups, as ranking and the record history see them."""
        members: dict[str, list[Arrival]] = {key: [] for key in keys}
        ranked_by = select(
            *(runs.c[name] for name in RANKED_BY),
            runs.c.ingested_position,
            runs.c.observed_at,  # when the record history dates a run (its source's date)
            runs.c.ingested_at,  # ... or, when the source gave none, the ledger's admission
        )
        if len(keys) > SCAN_GROUPS:
            # Many groups (a rebuild re-ranks them all): one pass over the runs in table
            # order, not an index lookup and a random read per run.
            for row in session.execute(ranked_by).all():
                group = members.get(row[1])
                if group is not None:
                    group.append(arrival(row))
        else:
            for chunk in chunks(sorted(keys), 500):
                for row in session.execute(ranked_by.where(runs.c.comparison_key.in_(chunk))).all():
                    members[str(row[1])].append(arrival(row))
        return members


def view_digests(store: EventStore) -> dict[str, str]:
    """sha256 over the canonical rows of each view, in key order: equal views, equal digests."""
    digests: dict[str, str] = {}
    with store.transaction(commit=False) as session:
        for table in VIEW_TABLES:
            order = [c for c in table.primary_key.columns]
            hasher = hashlib.sha256()
            for row in session.execute(select(table).order_by(*order)).mappings():
                hasher.update(canonical_json(jsonable(dict(row))) + b"\n")
            digests[table.name] = "sha256:" + hasher.hexdigest()
    return digests


def arrival(row: Sequence[Any]) -> Arrival:
    """A group member as ``_rerank`` selects it: the ``RANKED_BY`` columns, then where the
    log put the run, its source's date and its admission time."""
    return Arrival(
        int(row[_RANKED]), ranked_entry(row[:_RANKED]), row[_RANKED + 1], str(row[_RANKED + 2])
    )
