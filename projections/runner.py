"""The catch-up runner that folds ledger events into the read models, exactly once.

Each batch is one transaction: the view updates and the tracking row (last event position
folded in) commit together, so a crash between batches neither skips nor double-counts an
event, and a crash inside a batch leaves nothing of it. A server runs it on a thread of its
own (``projections.folder``), so its reads never fold; a command catches up before it reads
(it is cheap when nothing is new). Folders are serialised by SQLite's write lock, or by an
advisory lock on PostgreSQL. How a batch's rows are written is ``projections.view_writes``.
"""

from __future__ import annotations

import logging
import operator
import os
import weakref
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from sqlalchemy import Table, create_engine, delete, select, text

from domain.errors import DomainError
from domain.ranking import View, rank_group
from ledger.application import Ledger
from ledger.errors import is_store_failure
from ledger.store.connections import begin_snapshot
from ledger.store.event_store import StoreSession, connection_of, hold_sqlite_write_lock
from projections.fold_pool import FoldPool, fold_ahead, rank_ahead, shared_database
from projections.records import record_history, record_row
from projections.run_views import (
    RUNNER_NAME,
    RunViews,
    ViewsTracking,
    field_reader,
)
from projections.tables import (
    VIEW_TABLES,
    create_indexes,
    ensure_views,
    positional_rows,
    ranks,
    records,
    recreate_views,
    runs,
    stale_groups,
    views_current,
)
from projections.view_rows import (
    Pending,
    chunks,
    tied_json,
)
from projections.view_writes import CatchUp, ViewWriter, paused_gc, view_digests

T = TypeVar("T")
_log = logging.getLogger(__name__)
_RANK_KEY = operator.itemgetter("run_digest", "view")
DEFAULT_BATCH = 1000
# A rebuild folds in larger batches: fewer commits, and each index page it touches is
# written once per batch rather than once per thousand events.
REBUILD_BATCH = 5000
# A rebuild of a log this long has worker processes fold its batches (``rebuild``'s default).
POOL_MIN_EVENTS = 20_000
_ADVISORY_LOCK_ID = 0x4B49_5649_4557  # "KIVIEW"


class ViewsStalledError(DomainError):
    """The read models cannot fold the log past an event: the ledger's fault, never the
    reader's (admission and the folds disagree about an event the log holds). Reads fail
    with this, naming where, rather than answer from views that silently stopped, or blame
    the request (a fold's own refusal would otherwise be answered as the client's 422)."""

    code = "views-stalled"
    status = 500


class RanksBehindError(Exception):
    """A snapshot found groups whose ranks a fold has still to redo (``snapshot``)."""


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
        self._writes = ViewWriter(ledger)

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
        rows = self._writes.read_rows(session, self._events.id > start, batch)
        if not rows:
            return 0, start
        views = RunViews(self.tracking)
        views.fold_stored(rows, self.ledger.mapper, self._reader, self._writes.lookups(session))
        pending, _ = views.take()
        last = int(rows[-1][0])
        self._write(session, pending, last)
        if rank and len(rows) < batch:
            self._rerank_marked(session)
        return len(rows), last

    def _write(self, session: StoreSession, pending: Pending, last: int) -> None:
        """A batch's view changes, the groups they leave to re-rank and the position
        reached, in the batch's transaction."""
        self._writes.flush(session, pending)
        for digest in sorted(pending.dirty_evidence):
            key = self._writes.recompute_evidence(session, digest, last, self._reader)
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

    def _rerank_stale(
        self, rerank: Callable[[StoreSession, list[str]], None] | None = None
    ) -> None:
        """Re-rank every group marked stale, in one transaction that holds the folders' lock
        and clears the marks; ``rerank`` ranks the marked groups (their keys, sorted) and
        writes their rows, by default here (a rebuild's fold workers: ``rank_ahead``)."""
        with self.ledger.store.transaction(commit=False) as session:
            if self._marked(session) is None:
                return  # nothing to do, so no write: a full or read-only store still serves reads
        with paused_gc(), self.ledger.store.transaction(commit=True) as session:
            self._lock(session)
            if rerank is None:
                self._rerank_marked(session)
                return
            keys = sorted(session.execute(select(stale_groups.c.comparison_key)).scalars())
            if keys:
                rerank(session, keys)
                session.execute(delete(stale_groups))

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

    def _rerank(self, session: StoreSession, keys: set[str]) -> None:
        """Recompute both views' ranks, and the #1 history, of the touched groups."""
        if not keys:
            return
        new_rows, new_records = self.ranked_rows(session, keys)
        self.clear_ranks(session, keys)
        if new_rows:
            self._writes.insert_rows(session, ranks, new_rows)
        if new_records:
            self._writes.insert_rows(session, records, new_records)

    @staticmethod
    def ranked_rows(
        session: StoreSession, keys: set[str]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The rows of both views' ranks, in the ranks view's key order, and of the #1
        history, of these groups as the runs view stands in ``session``."""
        members = ViewWriter.members(session, keys)
        new_rows = []
        new_records: list[dict[str, Any]] = []
        for key in sorted(keys):
            entries = [arrival.entry for arrival in members[key]]
            native = rank_group(entries, View.SOURCE_NATIVE)
            for view, ranking in (
                (View.SOURCE_NATIVE, native),
                (View.VERIFIED, rank_group(entries, View.VERIFIED)),
            ):
                for ranked in ranking:
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
            new_records.extend(record_row(key, r) for r in record_history(members[key], native))
        # In the ranks view's key order: its key index is then written in order. (Where a
        # rank row sits in the table says nothing: reads order by rank and run.)
        new_rows.sort(key=_RANK_KEY)
        return new_rows, new_records

    def ranked_for_writer(self, keys: list[str]) -> tuple[list[Any], list[Any]]:
        """The rows of these groups' ranks and #1 history as the runs view stands, made as
        a writer in another process inserts them (a fold worker's task): positional rows on
        SQLite (``ViewWriter.insert_positional``), dicts on PostgreSQL."""
        with paused_gc(), self.ledger.store.transaction(commit=False) as session:
            rank_rows, record_rows = self.ranked_rows(session, set(keys))
        if self._is_postgres:
            return rank_rows, record_rows
        dialect = self._engine.dialect
        return (
            list(map(positional_rows(ranks, dialect), rank_rows)),
            list(map(positional_rows(records, dialect), record_rows)),
        )

    def write_ranked(
        self, session: StoreSession, rank_rows: list[Any], record_rows: list[Any]
    ) -> None:
        """Rows ``ranked_for_writer`` made, inserted in ``session``'s transaction."""
        for table, rows in ((ranks, rank_rows), (records, record_rows)):
            if not rows:
                continue
            if self._is_postgres:
                self._writes.insert_rows(session, table, rows)
            else:
                self._writes.insert_positional(session, table, rows)

    @staticmethod
    def clear_ranks(session: StoreSession, keys: Iterable[str]) -> None:
        """The ranks and #1 history of these groups deleted (to be written anew)."""
        for chunk in chunks(sorted(keys), 500):
            session.execute(delete(ranks).where(ranks.c.comparison_key.in_(chunk)))
            session.execute(delete(records).where(records.c.comparison_key.in_(chunk)))

    # ------------------------------------------------------------- rebuild

    def rebuild(
        self,
        batch: int = REBUILD_BATCH,
        progress: Callable[[int], None] | None = None,
        workers: int | None = None,
    ) -> CatchUp:
        """Drop every read model (tables included, so schema changes apply) and fold the
        whole event log again.

        ``workers`` processes fold the batches ahead while this one writes them, then rank
        the groups (``projections.fold_pool``); by default one per core when the log holds
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
                    self._make_indexes(runs)
                    self._rerank_stale()
                else:
                    done = fold_ahead(self, batch, progress, pool)
                    self._make_indexes(runs)
                    rank_ahead(self, pool)
            finally:
                if pool is not None:
                    pool.close()
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

    def fold_range(
        self, after: int, upto: int, sent: set[str] | None = None
    ) -> tuple[int, Pending]:
        """The events after position ``after`` up to ``upto`` folded, and prepared for a
        writer in another process (a fold worker's task): (how many, the batch). ``sent``:
        the manifests this worker's earlier batches carried (``Pending.prepare``)."""
        e = self._events
        with paused_gc(), self.ledger.store.transaction(commit=False) as session:
            rows = self._writes.read_rows(session, (e.id > after) & (e.id <= upto))
            views = RunViews(self.tracking)
            views.fold_stored(rows, self.ledger.mapper, self._reader, self._writes.lookups(session))
            pending, _ = views.take()
            run_row = None if self._is_postgres else positional_rows(runs, self._engine.dialect)
            pending.prepare(run_row, sent)
        return len(rows), pending

    def _make_indexes(self, *tables: Table) -> None:
        with self.ledger.store.transaction(commit=True) as session:
            self._lock(session)
            create_indexes(connection_of(session), tables)

    def table_digests(self) -> dict[str, str]:
        """sha256 over the canonical rows of each view, in key order: equal views, equal digests."""
        return view_digests(self.ledger.store)
