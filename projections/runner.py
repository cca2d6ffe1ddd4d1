"""The catch-up runner that folds ledger events into the read models, exactly once.

Each batch is one transaction: the view updates and the tracking row (last event position
folded in) commit together, so a crash between batches neither skips nor double-counts an
event, and a crash inside a batch leaves nothing of it. SQLite has no subscriptions, so the
runner is called in-process after writes and before reads (it is cheap when nothing is new);
on PostgreSQL the same loop runs, serialised by an advisory lock.
"""

from __future__ import annotations

import hashlib
import json
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from eventsourcing.persistence import Tracking
from sqlalchemy import bindparam, create_engine, delete, insert, select, text, update

from domain.canonical import canonical_json
from domain.errors import DomainError
from domain.event_names import EventName
from domain.ranking import RankEntry, View, rank_group
from domain.run_facts import (
    RunFold,
)
from ledger.aggregates import run_id
from ledger.application import Ledger
from ledger.store.event_store import StoreSession, connection_of
from projections.run_views import (
    RUNNER_NAME,
    RunViews,
    ViewsTracking,
    decode,
    event_name,
    statement_of,
)
from projections.tables import (
    VIEW_TABLES,
    ensure_views,
    manifests,
    ranks,
    recreate_views,
    runs,
    stale_groups,
)
from projections.view_rows import (
    Pending,
    chunks,
    evidence_columns,
    jsonable,
    profile_columns,
    rank_entry,
)

T = TypeVar("T")
DEFAULT_BATCH = 1000
_ADVISORY_LOCK_ID = 0x4B49_5649_4557  # "KIVIEW"


class ProjectionBusyError(DomainError):
    code = "unavailable"
    status = 503


@dataclass(frozen=True)
class CatchUp:
    events: int
    position: int


# The engines whose views this process has brought to this build's VIEWS_VERSION (one check
# per database per process, not one per runner: the server makes a runner per request).
_ENSURED: weakref.WeakSet[Any] = weakref.WeakSet()


def _lock_views(executor: StoreSession, postgres: bool) -> None:
    """One folder of the views at a time on PostgreSQL (SQLite's write lock does it there)."""
    if postgres:
        executor.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _ADVISORY_LOCK_ID})


def prepare_views(db_url: str) -> bool:
    """``ensure_views`` on a database, for ``kernelindex db upgrade`` and ``init`` (a runner
    does the same on first use): True when the views were made anew."""
    engine = create_engine(db_url)
    try:
        with engine.begin() as conn:
            _lock_views(conn, engine.dialect.name == "postgresql")
            return ensure_views(conn)
    finally:
        engine.dispose()


class ProjectionRunner:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._events = ledger.store.events.c
        self._engine = ledger.store.engine
        self._is_postgres = ledger.store.postgres
        self.tracking = ViewsTracking(ledger.store, RUNNER_NAME)

    def ensure_views(self) -> None:
        """The read-model tables as this build folds them (``tables.ensure_views``): made
        where missing, refolded from the log when another build made them."""
        if self._engine in _ENSURED:
            return
        with self.ledger.store.transaction(commit=True) as session:
            self._lock(session)
            ensure_views(connection_of(session))
        _ENSURED.add(self._engine)

    # ------------------------------------------------------------- the loop

    def catch_up(
        self,
        batch: int = DEFAULT_BATCH,
        max_batches: int | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> CatchUp:
        """Fold every new event into the views; return how many and the position reached.
        ``progress`` hears the position after each committed batch."""
        self.ensure_views()
        total = 0
        done = 0
        position = 0
        while max_batches is None or done < max_batches:
            with self.ledger.store.transaction(commit=True) as session:
                folded, position = self._one_batch(session, batch)
            total += folded
            done += 1
            if progress is not None:
                progress(position)
            if folded < batch:
                break
        # Ranks are refreshed once per catch-up, not per batch: a rebuild re-ranks each group
        # once. Until then the stale marks say which groups lag.
        self._rerank_stale()
        return CatchUp(total, position)

    def fold_delivered(self, events: Sequence[tuple[Any, Tracking]]) -> int:
        """Fold events a subscription delivered, in log order, as one batch: those another
        folder (a reader's catch-up) has already folded are skipped, so each event counts
        once. Returns how many were folded; re-ranks what they touched."""
        with self.ledger.store.transaction(commit=True) as session:
            self._lock(session)
            done = self._position(session)
            fresh = [item for item in events if item[1].notification_id > done]
            if fresh:
                views = RunViews(self.tracking)
                views.fold(fresh)
                pending, _ = views.take()
                self._write(session, pending, fresh[-1][1].notification_id)
        self._rerank_stale()
        return len(fresh)

    def snapshot(self, read: Callable[[StoreSession], T], attempts: int = 10) -> tuple[int, T]:
        """``read`` the views as they stand at one position of the log: nothing folded and
        no group left to re-rank while reading (else catch up and read again). Returns the
        position and what ``read`` returned. Takes no lock: readers never wait on writers."""
        self.ensure_views()
        for _ in range(attempts):
            with self.ledger.store.transaction(commit=False) as session:
                before = self._position(session)
                stale = session.execute(select(stale_groups.c.comparison_key).limit(1)).first()
                value = read(session)
                after = self._position(session)
            if before == after and stale is None:
                return before, value
            self.catch_up()
        raise ProjectionBusyError(
            "the read models kept changing while they were read; try again shortly"
        )

    def _lock(self, session: StoreSession) -> None:
        _lock_views(session, self._is_postgres)

    def _position(self, session: StoreSession) -> int:
        return self.tracking.position(session)

    def _one_batch(self, session: StoreSession, batch: int) -> tuple[int, int]:
        self._lock(session)
        start = self._position(session)
        e = self._events
        rows = session.execute(
            select(e.id, e.originator_id, e.originator_version, e.topic, e.state)
            .where(e.id > start)
            .order_by(e.id)
            .limit(batch)
        ).all()
        if not rows:
            return 0, start
        views = RunViews(self.tracking)
        views.fold(decode(self.ledger.mapper, rows))
        pending, _ = views.take()
        last = int(rows[-1][0])
        self._write(session, pending, last)
        return len(rows), last

    def _write(self, session: StoreSession, pending: Pending, last: int) -> None:
        """A batch's view changes, the groups they leave to re-rank and the position
        reached, in the batch's transaction."""
        self._flush(session, pending)
        for digest in sorted(pending.dirty_evidence):
            key = self._recompute_evidence(session, digest, last)
            if key is not None:
                pending.touched_groups.add(key)
        self._mark_stale(session, pending.touched_groups)
        self.tracking.record(session, last)

    def _mark_stale(self, session: StoreSession, keys: set[str]) -> None:
        if not keys:
            return
        already: set[str] = set()
        for chunk in chunks(sorted(keys), 500):
            already.update(
                session.execute(
                    select(stale_groups.c.comparison_key).where(
                        stale_groups.c.comparison_key.in_(chunk)
                    )
                ).scalars()
            )
        fresh = [{"comparison_key": k} for k in sorted(keys - already)]
        if fresh:
            session.execute(insert(stale_groups), fresh)

    def _rerank_stale(self) -> None:
        """Re-rank every group marked stale, in one transaction that clears the marks."""
        with self.ledger.store.transaction(commit=False) as session:
            if session.execute(select(stale_groups.c.comparison_key).limit(1)).first() is None:
                return  # nothing to do, so no write: a full or read-only store still serves reads
        with self.ledger.store.transaction(commit=True) as session:
            self._lock(session)
            keys = set(session.execute(select(stale_groups.c.comparison_key)).scalars())
            self._rerank(session, keys)
            session.execute(delete(stale_groups))

    def _flush(self, session: StoreSession, pending: Pending) -> None:
        """Write the batch's new runs and changes with a few multi-row statements."""
        if pending.new_rows:
            session.execute(insert(runs), list(pending.new_rows.values()))
        self._insert_manifests(session, pending.manifests)
        for digest in pending.regroup:
            row = pending.new_rows.get(digest)
            if row is not None and row["comparison_key"] is not None:
                pending.touched_groups.add(row["comparison_key"])
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

    def _insert_manifests(self, session: StoreSession, found: dict[str, dict[str, Any]]) -> None:
        """Manifests not seen before (the first event that carried one keeps it)."""
        if not found:
            return
        known: set[str] = set()
        for chunk in chunks(sorted(found), 500):
            known.update(
                session.execute(
                    select(manifests.c.digest).where(manifests.c.digest.in_(chunk))
                ).scalars()
            )
        fresh = [row for digest, row in sorted(found.items()) if digest not in known]
        if fresh:
            session.execute(insert(manifests), fresh)

    def _run_events(self, session: StoreSession, digest: str, up_to: int) -> Sequence[Any]:
        e = self._events
        return session.execute(
            select(e.id, e.originator_id, e.originator_version, e.topic, e.state)
            .where(e.originator_id == run_id(digest), e.id <= up_to)
            .order_by(e.id)
        ).all()

    def _recompute_evidence(self, session: StoreSession, digest: str, up_to: int) -> str | None:
        """Evidence from the run's events (only reruns move it), the verified value, and the
        profile (an attached workload gives the run its comparison group)."""
        fold: RunFold | None = None
        for event, tracking in decode(self.ledger.mapper, self._run_events(session, digest, up_to)):
            name = event_name(event)
            if name is None:
                continue
            predicate = statement_of(event)["predicate"]
            if name == EventName.RUN_INGESTED:
                fold = RunFold.ingested(tracking.notification_id, digest, predicate)
            elif fold is not None:
                fold.apply(name, tracking.notification_id, str(event.signer), predicate)
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

    def _rerank(self, session: StoreSession, keys: set[str]) -> None:
        """Recompute both views' ranks of the touched groups."""
        if not keys:
            return
        members: dict[str, list[RankEntry]] = {key: [] for key in keys}
        for chunk in chunks(sorted(keys), 500):
            for row in session.execute(
                select(runs).where(runs.c.comparison_key.in_(chunk))
            ).mappings():
                members[str(row["comparison_key"])].append(rank_entry(row))
            session.execute(delete(ranks).where(ranks.c.comparison_key.in_(chunk)))
        new_rows = []
        for key in sorted(keys):
            for view in (View.SOURCE_NATIVE, View.VERIFIED):
                for ranked in rank_group(members[key], view):
                    new_rows.append(
                        {
                            "view": str(view),
                            "run_digest": ranked.run,
                            "comparison_key": key,
                            "rank": ranked.rank,
                            "of_count": ranked.of,
                            "value": ranked.value,
                            "tied_with": json.dumps(list(ranked.tied_with)),
                            "policy_version": ranked.policy_version,
                        }
                    )
        if new_rows:
            session.execute(insert(ranks), new_rows)

    # ------------------------------------------------------------- rebuild

    def rebuild(
        self, batch: int = DEFAULT_BATCH, progress: Callable[[int], None] | None = None
    ) -> CatchUp:
        """Drop every read model (tables included, so schema changes apply) and fold the
        whole event log again."""
        with self.ledger.store.transaction(commit=True) as session:
            self._lock(session)
            recreate_views(connection_of(session))
        _ENSURED.add(self._engine)
        return self.catch_up(batch, progress=progress)

    def table_digests(self) -> dict[str, str]:
        """sha256 over the canonical rows of each view, in key order: equal views, equal digests."""
        digests: dict[str, str] = {}
        with self.ledger.store.transaction(commit=False) as session:
            for table in VIEW_TABLES:
                order = [c for c in table.primary_key.columns]
                hasher = hashlib.sha256()
                for row in session.execute(select(table).order_by(*order)).mappings():
                    hasher.update(canonical_json(jsonable(dict(row))) + b"\n")
                digests[table.name] = "sha256:" + hasher.hexdigest()
        return digests
