"""The catch-up runner that folds ledger events into the read models, exactly once.

Each batch is one transaction: the view updates and the tracking row (last event position
folded in) commit together, so a crash between batches neither skips nor double-counts an
event, and a crash inside a batch leaves nothing of it. SQLite has no subscriptions, so the
runner is called in-process after writes and before reads (it is cheap when nothing is new);
on PostgreSQL the same loop runs, serialised by an advisory lock.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import operator
import os
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from eventsourcing.persistence import Tracking
from sqlalchemy import Table, bindparam, create_engine, delete, func, insert, select, text, update

from domain.canonical import canonical_json
from domain.errors import DomainError
from domain.event_names import EventName
from domain.ranking import View, rank_group
from domain.rerun_binding import DeviceClass
from domain.run_facts import (
    RunFold,
)
from ledger.aggregates import STATE_TOPICS, run_id
from ledger.application import Ledger
from ledger.errors import is_store_failure
from ledger.store.connections import begin_snapshot
from ledger.store.event_store import StoreSession, connection_of, hold_sqlite_write_lock
from projections.fold_pool import FoldPool, shared_database
from projections.records import Arrival, record_history, record_row
from projections.run_views import (
    RUN_TOPICS,
    RUNNER_NAME,
    RunViews,
    ViewsTracking,
    field_reader,
    stored_fold_events,
)
from projections.tables import (
    VIEW_TABLES,
    create_indexes,
    ensure_views,
    manifests,
    positional_insert,
    positional_rows,
    ranks,
    records,
    recreate_views,
    runs,
    stale_groups,
    views_current,
)
from projections.view_rows import (
    RANKED_BY,
    Pending,
    chunks,
    evidence_columns,
    jsonable,
    profile_columns,
    ranked_entry,
    tied_json,
)

T = TypeVar("T")
_log = logging.getLogger(__name__)
# Re-ranking more groups than this reads the whole runs view once (ranking needs the members
# of every group it ranks, whatever order they come in).
_SCAN_GROUPS = 500
_RANKED = len(RANKED_BY)
_RANK_KEY = operator.itemgetter("run_digest", "view")
DEFAULT_BATCH = 1000
# A rebuild folds in larger batches: fewer commits, and each index page it touches is
# written once per batch rather than once per thousand events.
REBUILD_BATCH = 5000
# A rebuild of a log this long has worker processes fold its batches (``rebuild``'s default).
POOL_MIN_EVENTS = 20_000
_ADVISORY_LOCK_ID = 0x4B49_5649_4557  # "KIVIEW"


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


class ViewsStalledError(DomainError):
    """The read models cannot fold the log past an event: the ledger's fault, never the
    reader's (admission and the folds disagree about an event the log holds). Reads fail
    with this, naming where, rather than answer from views that silently stopped, or blame
    the request (a fold's own refusal would otherwise be answered as the client's 422)."""

    code = "views-stalled"
    status = 500


class RanksBehindError(Exception):
    """A snapshot found groups whose ranks a fold has still to redo (``snapshot``)."""


@dataclass(frozen=True)
class CatchUp:
    events: int
    position: int


# The engines whose views this process has brought to this build's VIEWS_VERSION (one check
# per database per process, not one per runner: the server makes a runner per request).
_ENSURED: weakref.WeakSet[Any] = weakref.WeakSet()


def _lock_views(executor: StoreSession, postgres: bool) -> None:
    """One folder of the views at a time, from before it reads the position it folds from:
    an advisory lock on PostgreSQL, the database's write lock on SQLite."""
    if postgres:
        executor.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _ADVISORY_LOCK_ID})
    else:
        hold_sqlite_write_lock(executor)


def _insert_or_ignore(table: Table, postgres: bool) -> Any:
    """INSERT … ON CONFLICT DO NOTHING in the store's dialect. Imported when first needed:
    PostgreSQL's dialect module costs a read command on SQLite ~20 ms of its start-up."""
    if postgres:
        from sqlalchemy.dialects import postgresql  # noqa: PLC0415

        return postgresql.insert(table).on_conflict_do_nothing()
    from sqlalchemy.dialects import sqlite  # noqa: PLC0415

    return sqlite.insert(table).on_conflict_do_nothing()


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
        self._reader = field_reader(ledger.mapper)

    def ensure_views(self) -> None:
        """The read-model tables as this build folds them (``tables.ensure_views``): made
        where missing, refolded from the log when another build made them."""
        if self._engine in _ENSURED:
            return
        with self.ledger.store.transaction(commit=False) as session:
            current = views_current(connection_of(session))
        if not current:  # else no lock: a read command's start need not wait for the writer
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
        try:
            self.ensure_views()
            done = self._fold_batches(batch, max_batches, progress, rank=True)
            # What a batch-sized last batch or ``max_batches`` left marked (``_one_batch``).
            self._rerank_stale()
        except Exception as exc:
            stalled = self._stalled(exc)
            if stalled is exc:
                raise  # as it was, its chain whole: a store failure keeps its kind
            raise stalled from exc
        return done

    def _fold_batches(
        self,
        batch: int,
        max_batches: int | None,
        progress: Callable[[int], None] | None,
        *,
        rank: bool = False,
    ) -> CatchUp:
        """Fold batches until the log's end (or ``max_batches``). ``rank``: the batch that
        reaches the end re-ranks, in its own transaction, every group marked (``_one_batch``)."""
        total = 0
        done = 0
        position = 0
        while max_batches is None or done < max_batches:
            idle, position = self._nothing_new()
            if idle:
                break
            with paused_gc(), self.ledger.store.transaction(commit=True) as session:
                folded, position = self._one_batch(session, batch, rank)
            total += folded
            done += 1
            if progress is not None:
                progress(position)
            if folded < batch:
                break
        return CatchUp(total, position)

    def _stalled(self, exc: Exception) -> Exception:
        """A failed fold as what it is: the store's failure (retry) and any error that is
        the server's already (busy, corrupt record, schema: a 5xx) as themselves; anything
        else stops the views at an event, which ``ViewsStalledError`` names."""
        # An error class whose status is not an int is no server error of ours.
        status = getattr(exc, "status", 422)
        server_side = isinstance(exc, DomainError) and isinstance(status, int) and status >= 500
        if server_side or isinstance(exc, MemoryError) or is_store_failure(exc):
            return exc
        reason = exc.message if isinstance(exc, DomainError) else type(exc).__name__
        try:
            with self.ledger.store.transaction(commit=False) as session:
                where = f"log position {self._position(session)}"
        except Exception:  # the views' own failure is what is told, not this read's
            _log.debug("the views' position could not be read", exc_info=True)
            where = "an unknown log position"
        # Debug, not error: a CLI has no log handler, and Python's last-resort one would
        # print the traceback a command must not show; the server logs the 500 it answers.
        _log.debug("the views stop at %s: %s", where, reason, exc_info=exc)
        return ViewsStalledError(
            f"the read models stop at {where}: what follows cannot be "
            f"folded or ranked ({reason}); `kernelindex audit` checks the log itself"
        )

    def fold_delivered(self, events: Sequence[tuple[Any, Tracking]]) -> int:
        """Fold events a subscription delivered, in log order, as one batch: those another
        folder (a reader's catch-up) has already folded are skipped, so each event counts
        once. Returns how many were folded; re-ranks what they touched.

        Only when they are every event between the views' position and the last of them:
        else the views are behind what was delivered (a rebuild started them over, or
        another build's views were made anew) and folding these would move the position
        past events never folded. Then the views catch up from their own position instead,
        the delivered events among the rest."""
        with self.ledger.store.transaction(commit=True) as session:
            self._lock(session)
            done = self._position(session)
            fresh = [item for item in events if item[1].notification_id > done]
            behind = bool(fresh) and self._stored_between(
                session, done, fresh[-1][1].notification_id
            ) != len(fresh)
            if fresh and not behind:
                views = RunViews(self.tracking)
                views.fold(fresh)
                pending, _ = views.take()
                self._write(session, pending, fresh[-1][1].notification_id)
            # In the fold's transaction: no reader's snapshot holds runs its ranks lag.
            self._rerank_marked(session)
        if behind:
            return self.catch_up().events
        return len(fresh)

    def _stored_between(self, session: StoreSession, after: int, up_to: int) -> int:
        """How many run events (what a subscription delivers) the log holds past ``after`` up
        to ``up_to`` (ids may have gaps; key events are not delivered, and fold to nothing)."""
        e = self._events
        found = session.execute(
            select(func.count())
            .select_from(self.ledger.store.events)
            .where((e.id > after) & (e.id <= up_to) & e.topic.in_(RUN_TOPICS))
        ).scalar_one()
        return int(found)

    def snapshot(
        self, read: Callable[[StoreSession], T], *, rerank: bool | None = True
    ) -> tuple[int, T]:
        """``read`` the views as they stand at one position of the log; return the position
        and what ``read`` returned.

        The read is one database snapshot (``begin_snapshot``): whatever others write and
        fold meanwhile, its queries agree with each other, and it is neither repeated nor
        refused for it. It takes no lock: readers never wait on writers. Freshness is the
        caller's (a catch-up first), as before.

        Ranks must agree with the runs they rank. Every fold that reaches the log's end
        re-ranks what it touched in its own transaction, so a snapshot finds groups marked
        to re-rank only between the batches of a long catch-up or after a folder stopped
        there. Then, once (``rerank``): the marked groups are re-ranked and ``read`` reads in
        the same transaction, under the folders' lock (which waits for at most one batch).
        A reader that must not write says ``rerank=False`` (``RanksBehindError`` instead: its
        folder will re-rank them) or ``None`` (read them as they stand)."""
        if rerank:  # else a server's reader: its folder made the views as this build folds them
            self.ensure_views()
        with self.ledger.store.transaction(commit=False) as session:
            begin_snapshot(connection_of(session))
            position = self._position(session)
            if rerank is None or self._marked(session) is None:
                return position, read(session)
            if rerank is False:
                raise RanksBehindError("groups marked to re-rank: a fold is under way")
        with paused_gc(), self.ledger.store.transaction(commit=True) as session:
            self._lock(session)
            self._rerank_marked(session)
            return self._position(session), read(session)

    def _lock(self, session: StoreSession) -> None:
        _lock_views(session, self._is_postgres)

    def _position(self, session: StoreSession) -> int:
        return self.tracking.position(session)

    def _nothing_new(self) -> tuple[bool, int]:
        """Whether no event lies past the views' position, and that position, read without
        the folders' lock: a reader with nothing to fold (most reads) never waits on it,
        which on SQLite is the database's write lock. A batch re-reads the position under
        the lock, so a folder that moved it meanwhile is never folded over."""
        with self.ledger.store.transaction(commit=False) as session:
            position = self._position(session)
            newer = session.execute(
                select(self._events.id).where(self._events.id > position).limit(1)
            ).first()
        return newer is None, position

    def _one_batch(self, session: StoreSession, batch: int, rank: bool) -> tuple[int, int]:
        """Fold the next ``batch`` events in ``session``'s transaction. ``rank``, and this
        batch reaches the log's end: re-rank the marked groups in it too, so the views it
        commits have no rank that lags its runs (what readers' snapshots find, nearly always:
        a catch-up of new events is one batch). A longer catch-up (a refold, a rebuild)
        ranks each group once, at its end, not once per batch."""
        self._lock(session)
        start = self._position(session)  # again, under the lock: what to fold from
        rows = self._read_rows(session, self._events.id > start, batch)
        if not rows:
            return 0, start
        views = RunViews(self.tracking)
        views.fold_stored(rows, self.ledger.mapper, self._reader, self._originator(session))
        pending, _ = views.take()
        last = int(rows[-1][0])
        self._write(session, pending, last)
        if rank and len(rows) < batch:
            self._rerank_marked(session)
        return len(rows), last

    def _read_rows(
        self, session: StoreSession, where: Any, limit: int | None = None
    ) -> Sequence[Any]:
        """``(position, topic, state)`` of the events ``where`` says, in log order."""
        e = self._events
        query = select(e.id, e.topic, e.state).where(where).order_by(e.id)
        return session.execute(query if limit is None else query.limit(limit)).all()

    def _originator(self, session: StoreSession) -> Callable[[int], tuple[Any, int]]:
        """(aggregate id, version) of the event at a position, for the rows the field reader
        leaves to the mapper (the key book's events, mostly)."""
        e = self._events

        def originator(position: int) -> tuple[Any, int]:
            found = session.execute(
                select(e.originator_id, e.originator_version).where(e.id == position)
            ).one()
            return found[0], int(found[1])

        return originator

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
        """Mark these groups stale (those already marked stay marked)."""
        if not keys:
            return
        fresh = [{"comparison_key": k} for k in sorted(keys)]
        session.execute(_insert_or_ignore(stale_groups, self._is_postgres), fresh)

    def _rerank_stale(self) -> None:
        """Re-rank every group marked stale, in one transaction that clears the marks."""
        with self.ledger.store.transaction(commit=False) as session:
            if self._marked(session) is None:
                return  # nothing to do, so no write: a full or read-only store still serves reads
        with paused_gc(), self.ledger.store.transaction(commit=True) as session:
            self._lock(session)
            self._rerank_marked(session)

    @staticmethod
    def _marked(session: StoreSession) -> Any:
        """A group marked stale, if any (None: every group's ranks agree with its runs)."""
        return session.execute(select(stale_groups.c.comparison_key).limit(1)).first()

    def _rerank_marked(self, session: StoreSession) -> None:
        """Re-rank the groups marked stale and clear the marks, in ``session``'s transaction
        (which holds the folders' lock)."""
        keys = set(session.execute(select(stale_groups.c.comparison_key)).scalars())
        if keys:
            self._rerank(session, keys)
            session.execute(delete(stale_groups))

    def _flush(self, session: StoreSession, pending: Pending) -> None:
        """Write the batch's new runs and changes with a few multi-row statements."""
        made = pending.run_rows()  # a worker's batch: its rows made already
        if made:
            self._insert_positional(session, runs, made)
        if pending.new_rows:
            self._insert_rows(session, runs, list(pending.new_rows.values()))
        self._insert_manifests(session, pending)
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

    def _insert_manifests(self, session: StoreSession, pending: Pending) -> None:
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
            self._insert_rows(session, manifests, fresh)

    def _insert_rows(self, session: StoreSession, table: Table, rows: list[dict[str, Any]]) -> None:
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

    def _insert_positional(
        self, session: StoreSession, table: Table, rows: list[tuple[Any, ...]]
    ) -> None:
        """Insert rows made by ``positional_rows`` for this store's dialect."""
        connection = connection_of(session)
        connection.exec_driver_sql(positional_insert(table, connection.dialect), rows)

    def _devices_of(self, key_id: str) -> frozenset[DeviceClass]:
        """A signer's device classes, as its registration names them: a rerun counts only on
        one of its key's (``domain.rerun_binding``). Read when a run's rerun is folded."""
        state = self.ledger.key_states([key_id]).get(key_id)
        return frozenset() if state is None else state.devices

    def _recompute_evidence(self, session: StoreSession, digest: str, up_to: int) -> str | None:
        """Evidence from the run's events (only reruns move it), the verified value, and the
        profile (an attached workload gives the run its comparison group). Read from its
        state events alone: attestations, which anyone may add by the thousand, move none of
        these (``RunFold``), so their number costs this nothing."""
        fold: RunFold | None = None
        e = self._events
        rows = self._read_rows(
            session,
            (e.originator_id == run_id(digest)) & e.topic.in_(STATE_TOPICS) & (e.id <= up_to),
        )
        events = stored_fold_events(
            rows, self.ledger.mapper, self._reader, self._originator(session)
        )
        for _, event in events:
            if event is None:
                continue
            predicate = event.statement["predicate"]
            if event.name == EventName.RUN_INGESTED:
                fold = RunFold.ingested(event.position, digest, predicate)
                fold.devices_of = self._devices_of  # as the offline verifier reads them
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

    def _rerank(self, session: StoreSession, keys: set[str]) -> None:
        """Recompute both views' ranks, and the #1 history, of the touched groups."""
        if not keys:
            return
        members = self._members(session, keys)
        for chunk in chunks(sorted(keys), 500):
            session.execute(delete(ranks).where(ranks.c.comparison_key.in_(chunk)))
            session.execute(delete(records).where(records.c.comparison_key.in_(chunk)))
        new_rows = []
        new_records: list[dict[str, Any]] = []
        for key in sorted(keys):
            entries = [arrival.entry for arrival in members[key]]
            for view in (View.SOURCE_NATIVE, View.VERIFIED):
                for ranked in rank_group(entries, view):
                    new_rows.append(
                        {
                            "view": str(view),
                            "run_digest": ranked.run,
                            "comparison_key": key,
                            "rank": ranked.rank,
                            "of_count": ranked.of,
                            "value": ranked.value,
                            "tied_with": tied_json(ranked.tied_with),
                            "policy_version": ranked.policy_version,
                        }
                    )
            new_records.extend(record_row(key, r) for r in record_history(members[key]))
        if new_rows:
            # In the ranks view's key order: its key index is then written in order. (Where a
            # rank row sits in the table says nothing: reads order by rank and run.)
            new_rows.sort(key=_RANK_KEY)
            self._insert_rows(session, ranks, new_rows)
        if new_records:
            self._insert_rows(session, records, new_records)

    @staticmethod
    def _members(session: StoreSession, keys: set[str]) -> dict[str, list[Arrival]]:
        """The runs of each of these groups, as ranking and the record history see them."""
        members: dict[str, list[Arrival]] = {key: [] for key in keys}
        ranked_by = select(*(runs.c[name] for name in RANKED_BY), runs.c.ingested_position)
        if len(keys) > _SCAN_GROUPS:
            # Many groups (a rebuild re-ranks them all): one pass over the runs in table
            # order, not an index lookup and a random read per run.
            for row in session.execute(ranked_by).all():
                group = members.get(row[1])
                if group is not None:
                    group.append(_arrival(row))
        else:
            for chunk in chunks(sorted(keys), 500):
                for row in session.execute(ranked_by.where(runs.c.comparison_key.in_(chunk))).all():
                    members[str(row[1])].append(_arrival(row))
        return members

    # ------------------------------------------------------------- rebuild

    def rebuild(
        self,
        batch: int = REBUILD_BATCH,
        progress: Callable[[int], None] | None = None,
        workers: int | None = None,
    ) -> CatchUp:
        """Drop every read model (tables included, so schema changes apply) and fold the
        whole event log again.

        ``workers`` processes fold the batches ahead while this one writes them
        (``projections.fold_pool``); by default one per core when the log holds
        ``POOL_MIN_EVENTS`` or more and the database is one they can open, else none.

        The views' secondary indexes are made once their rows are in (a sorted build instead
        of an update per row): the runs view's before the groups are ranked (ranking reads
        the runs by group), the ranks view's after. A rebuild that stops before leaves them
        to the next ``ensure_views`` (this process's, or the next one's)."""
        with self.ledger.store.transaction(commit=True) as session:
            self._lock(session)
            recreate_views(connection_of(session), indexed=False)
        _ENSURED.add(self._engine)
        try:
            pool = self._fold_pool(batch, workers)
            try:
                if pool is None:
                    done = self._fold_batches(batch, None, progress)
                else:
                    done = self._fold_batches_ahead(batch, progress, pool)
            finally:
                if pool is not None:
                    pool.close()
            self._make_indexes(runs)
            self._rerank_stale()
        finally:
            self._make_indexes(*VIEW_TABLES)
        return done

    def _fold_pool(self, batch: int, workers: int | None) -> FoldPool | None:
        url = shared_database(self.ledger)
        if url is None:
            return None
        if workers is None:
            cores = os.cpu_count() or 1
            long_log = self.ledger.store.last_position() >= POOL_MIN_EVENTS
            workers = cores if cores > 1 and long_log else 0
        return FoldPool(url, self.ledger, workers) if workers > 0 else None

    def _fold_batches_ahead(
        self, batch: int, progress: Callable[[int], None] | None, pool: FoldPool
    ) -> CatchUp:
        """``_fold_batches`` with the folding done by ``pool``'s workers, batches ahead of
        the writing. A batch is the events at the ``batch`` positions after the previous
        one's end, up to the last stored event (positions left by a rolled-back write hold
        none, then a batch has fewer); the writer records the batch's end as its position."""
        with self.ledger.store.transaction(commit=False) as session:
            position = self._position(session)
        ahead: deque[tuple[int, int, Future[tuple[int, Pending]]]] = deque()
        after, last, total = position, position, 0
        try:
            while True:
                while len(ahead) < pool.ahead:
                    if after >= last:
                        last = int(self.ledger.store.last_position())  # any new since?
                        if after >= last:
                            break
                    upto = min(after + batch, last)
                    ahead.append((after, upto, pool.submit(after, upto)))
                    after = upto
                if not ahead:
                    return CatchUp(total, position)
                start, upto, folding = ahead.popleft()
                folded, pending = folding.result()
                with paused_gc(), self.ledger.store.transaction(commit=True) as session:
                    self._lock(session)
                    moved = self._position(session) != start
                    if not moved:
                        self._write(session, pending, upto)
                if moved:  # another folder wrote batches meanwhile: go on from where it left
                    rest = self._fold_batches(batch, None, progress)
                    return CatchUp(total + rest.events, rest.position)
                total, position = total + folded, upto
                if progress is not None:
                    progress(position)
        finally:
            for _, _, left in ahead:
                left.cancel()

    def fold_range(self, after: int, upto: int) -> tuple[int, Pending]:
        """The events after position ``after`` up to ``upto`` folded, and prepared for a
        writer in another process (a fold worker's task): (how many, the batch)."""
        e = self._events
        with paused_gc(), self.ledger.store.transaction(commit=False) as session:
            rows = self._read_rows(session, (e.id > after) & (e.id <= upto))
            views = RunViews(self.tracking)
            views.fold_stored(rows, self.ledger.mapper, self._reader, self._originator(session))
            pending, _ = views.take()
            run_row = None if self._is_postgres else positional_rows(runs, self._engine.dialect)
            pending.prepare(run_row)
        return len(rows), pending

    def _make_indexes(self, *tables: Table) -> None:
        with self.ledger.store.transaction(commit=True) as session:
            self._lock(session)
            create_indexes(connection_of(session), tables)

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


def _arrival(row: Sequence[Any]) -> Arrival:
    """A group member as ``_rerank`` selects it: the ``RANKED_BY`` columns, then where the
    log put the run."""
    return Arrival(int(row[_RANKED]), ranked_entry(row[:_RANKED]))
