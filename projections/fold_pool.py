"""A rebuild's batches folded by worker processes while this process writes them.

A batch's fold is a function of its events alone: ``RunViews`` over the same rows makes the
same ``Pending`` in any process. Only writing it needs the views. So a rebuild of a long log
has worker processes read and fold the batches ahead of the writer, each from a read-only
ledger of its own on the same database, and send back what the writer needs of each
(``Pending.prepare``: the rows made, the decoded documents left behind). The writer
(``ProjectionRunner.rebuild``) writes the batches in log order, one transaction per batch
with its tracking row, as it writes a batch it folded itself; before each it checks that the
views stand where the batch starts, and if another folder moved them it drops what is ahead
and goes on in-process from where they stand.

Once every batch is written, the workers rank the groups the folds marked, a share of them
each (``rank_ahead``): ranking reads only the runs view, committed by then, and the writer
deletes the groups' old ranks and inserts what each share comes back with, under the folders'
lock, in one transaction that clears the marks (as ``ProjectionRunner._rerank_stale`` does
in-process).

Workers start by ``fork`` when this process has one thread (instant), else by a fork server.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import make_url

from projections.view_writes import SCAN_GROUPS, CatchUp, paused_gc

if TYPE_CHECKING:
    # multiprocessing and the process pool are imported where the workers start: a command
    # that reads (and folds, if at all, in its own process) never starts them (issue 33).
    import multiprocessing.context
    from concurrent.futures import Future

    from ledger.application import Ledger
    from ledger.store.event_store import StoreSession
    from projections.runner import ProjectionRunner
    from projections.view_rows import Pending

# Batches folded ahead of the writer, per worker.
AHEAD_PER_WORKER = 2
# A rebuild's re-ranking, in shares of its groups per worker: the writer inserts the first
# shares while the workers rank the rest.
RANK_TASKS_PER_WORKER = 4

_FOLDER: ProjectionRunner | None = None  # a worker's own runner, on its read-only ledger
# The manifests whose rows this worker's batches carried so far (``Pending.prepare``): the
# writer writes batches in log order, and a worker takes its batches in that order too.
_SENT: set[str] = set()


def _start(db_url: str, trust_root: dict[str, Any]) -> None:
    """A worker's start: its own read-only ledger on the database."""
    from ledger.application import Ledger  # noqa: PLC0415 - in the worker only
    from ledger.signing.trust import TrustRoot  # noqa: PLC0415
    from projections.runner import ProjectionRunner  # noqa: PLC0415

    global _FOLDER, _SENT  # noqa: PLW0603 - one runner per worker process
    _FOLDER = ProjectionRunner(Ledger(db_url, TrustRoot.from_json(trust_root), read_only=True))
    _SENT = set()  # a forked worker's own, whatever its parent's held


def _fold(after: int, upto: int) -> tuple[int, Pending]:
    """(events folded, the batch prepared for the writer): the events after position
    ``after`` up to ``upto``."""
    if _FOLDER is None:
        raise RuntimeError("the fold worker was not started")
    return _FOLDER.fold_range(after, upto, _SENT)


def _rank(keys: list[str]) -> tuple[list[Any], list[Any]]:
    """The rows of these groups' ranks and #1 history, made for the writer."""
    if _FOLDER is None:
        raise RuntimeError("the fold worker was not started")
    return _FOLDER.ranked_for_writer(keys)


def shared_database(ledger: Ledger) -> str | None:
    """The URL other processes reach the ledger's database by, or None (an in-memory
    SQLite database is this process's own)."""
    url = ledger.store.engine.url
    if url.get_backend_name() == "sqlite":
        database = url.database or ""
        if database in ("", ":memory:") or "mode=memory" in str(url):
            return None
    return url.render_as_string(hide_password=False)


def _context() -> multiprocessing.context.BaseContext:
    import multiprocessing  # noqa: PLC0415 - see the imports

    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["projections.runner"])
        return context
    return multiprocessing.get_context("spawn")


class FoldPool:
    """Worker processes folding batches of a ledger's events, ``ahead`` at a time."""

    def __init__(self, db_url: str, ledger: Ledger, workers: int) -> None:
        make_url(db_url)  # a URL, checked here rather than in every worker
        self.workers = workers
        self.ahead = workers * AHEAD_PER_WORKER
        from concurrent.futures import ProcessPoolExecutor  # noqa: PLC0415 - see the imports

        self._pool = ProcessPoolExecutor(
            workers,
            mp_context=_context(),
            initializer=_start,
            initargs=(db_url, ledger.trust_root.to_json()),
        )

    def submit(self, after: int, upto: int) -> Future[tuple[int, Pending]]:
        return self._pool.submit(_fold, after, upto)

    def submit_ranking(self, keys: list[str]) -> Future[tuple[list[Any], list[Any]]]:
        return self._pool.submit(_rank, keys)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def fold_ahead(
    runner: ProjectionRunner, batch: int, progress: Callable[[int], None] | None, pool: FoldPool
) -> CatchUp:
    """The runner's ``_fold_batches`` with the folding done by ``pool``'s workers, batches
    ahead of the writing (``runner``: the writer). A batch is the events at the ``batch``
    positions after the previous one's end, up to the last stored event (positions left by
    a rolled-back write hold none, then a batch has fewer); the writer records the batch's
    end as its position."""
    with runner.ledger.store.transaction(commit=False) as session:
        position = runner._position(session)
    ahead: deque[tuple[int, int, Future[tuple[int, Pending]]]] = deque()
    after, last, total = position, position, 0
    try:
        while True:
            while len(ahead) < pool.ahead:
                if after >= last:
                    last = int(runner.ledger.store.last_position())  # any new since?
                    if after >= last:
                        break
                upto = min(after + batch, last)
                ahead.append((after, upto, pool.submit(after, upto)))
                after = upto
            if not ahead:
                return CatchUp(total, position)
            start, upto, folding = ahead.popleft()
            folded, pending = folding.result()
            with paused_gc(), runner.ledger.store.transaction(commit=True) as session:
                runner._lock(session)
                moved = runner._position(session) != start
                if not moved:
                    runner._write(session, pending, upto)
            if moved:  # another folder wrote batches meanwhile: go on from where it left
                rest = runner._fold_batches(batch, None, progress)
                return CatchUp(total + rest.events, rest.position)
            total, position = total + folded, upto
            if progress is not None:
                progress(position)
    finally:
        for _, _, left in ahead:
            left.cancel()


def rank_ahead(runner: ProjectionRunner, pool: FoldPool) -> None:
    """The runner's ``_rerank_stale`` with the groups ranked by ``pool``'s workers, a share
    of them each, while this process deletes their old rows and inserts what comes back.
    Under the folders' lock from before it reads which groups are marked until it commits,
    so the runs view the workers rank (committed, read in their own transactions) is the
    one the marks are of: no folder changes it meanwhile."""

    def by_workers(session: StoreSession, keys: list[str]) -> None:
        # A share of more groups than SCAN_GROUPS reads the whole runs view (``members``):
        # once per share, which is every share of a log with many small groups.
        size = min(-(-len(keys) // (pool.workers * RANK_TASKS_PER_WORKER)), SCAN_GROUPS)
        ranking = [pool.submit_ranking(keys[at : at + size]) for at in range(0, len(keys), size)]
        try:
            runner.clear_ranks(session, keys)
            for done in ranking:
                runner.write_ranked(session, *done.result())
        finally:
            for left in ranking:
                left.cancel()

    runner._rerank_stale(by_workers)
