"""The worker pool: event lines gathered into batches, shipped to worker processes (or
verified here), and their results merged back strictly in dispatch order.

A batch closes at :data:`BATCH_EVENTS` lines or :data:`BATCH_CHARS` characters: small enough
that the last batch, which one worker verifies while the others have nothing left, is a small
part of a bundle's time, and that the workers start after few events. Workers start once the
bundle has shown :data:`START_BATCHES` batches' worth of event lines; until then its batches
are *held* (read, not verified), and verified here only if the bundle turns out smaller. So a
small bundle never pays for the workers, and a large one never waits while this process
verifies its first events alone (held events cost only their reading, so the threshold can be
generous). At most :data:`IN_FLIGHT_PER_WORKER` batches per worker are out at a time, so
memory stays flat however long the bundle.

Workers are forked with ``os.fork`` and fed through pipes (:class:`ForkedWorkers`) where this
process may fork (one thread alive): no process-pool import, no manager and feeder threads
pickling on the verifying process's cores beside the workers. Elsewhere (another thread
alive, no fork) they start from a fork server or spawn, through ``ProcessPoolExecutor``.
"""

from __future__ import annotations

import gc
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from ledger.verify.batches import Batch, BatchResult, verify_batch
from ledger.verify.events import EventContext
from ledger.verify.forked import ForkedWorkers, WorkerError

if TYPE_CHECKING:
    # Imported where the workers start: a small bundle never starts them, and importing
    # the process pool is part of every `kernelindex verify`'s start-up otherwise.
    import multiprocessing.context
    from concurrent.futures import Future

__all__ = [
    "BATCH_CHARS",
    "BATCH_EVENTS",
    "IN_FLIGHT_PER_WORKER",
    "START_BATCHES",
    "WARM_EVENTS",
    "BatchPool",
    "ForkedWorkers",
    "WorkerError",
    "default_workers",
    "pool_context",
]

# A batch closes at this many event lines or this many characters, whichever comes first.
BATCH_EVENTS = 64
BATCH_CHARS = 1 << 18
# Batches' worth of event lines a bundle shows before workers start (256 events): past where
# verifying them on two cores instead of one saves what starting the workers costs (~15 ms
# of this process's CPU: importing the process pool, forking).
START_BATCHES = 4
# Forked workers inherit what this process loaded: it verifies this many of the first held
# events itself before forking, so what verifying loads on first use (the statement and
# manifest schemas, the memo of the manifests every run shares) is loaded once, not in
# every worker.
WARM_EVENTS = 4
# Batches in flight per worker: enough to keep workers busy, few enough to keep memory flat.
IN_FLIGHT_PER_WORKER = 3


class _Ticket:
    """A batch shipped to the workers, in the queue of results to merge."""

    __slots__ = ("ticket",)

    def __init__(self, ticket: object) -> None:
        self.ticket = ticket


def default_workers() -> int:
    return os.cpu_count() or 1


def _may_fork() -> bool:
    """Whether this process may fork its workers: it can, and has no other thread (a fork
    copies no thread, so a lock another one held would stay held in the workers)."""
    return hasattr(os, "fork") and threading.active_count() == 1


def pool_context() -> multiprocessing.context.BaseContext:
    """Fork when this process has no other thread (fast start); else a fork server."""
    import multiprocessing  # noqa: PLC0415 - see the imports

    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        context = multiprocessing.get_context("forkserver")
        # The server imports what the workers run once, not each worker.
        context.set_forkserver_preload([verify_batch.__module__])
        return context
    return multiprocessing.get_context("spawn")


class Workers(Protocol):
    """Worker processes batches are shipped to; each batch's result is taken by its ticket,
    in the order the batches were shipped."""

    def submit(self, batch: Batch) -> object: ...

    def take(self, ticket: object, *, block: bool) -> BatchResult | None: ...

    def shutdown(self) -> None: ...


class _Executor:
    """Workers from a fork server or spawn (``ProcessPoolExecutor``): where this process may
    not fork (another thread is alive)."""

    def __init__(self, workers: int, context: multiprocessing.context.BaseContext) -> None:
        from concurrent.futures import ProcessPoolExecutor  # noqa: PLC0415 - see the imports

        self._executor = ProcessPoolExecutor(workers, mp_context=context)

    def submit(self, batch: Batch) -> object:
        return self._executor.submit(verify_batch, batch)

    def take(self, ticket: object, *, block: bool) -> BatchResult | None:
        future: Future[BatchResult] = ticket  # type: ignore[assignment]
        if not block and not future.done():
            return None
        return future.result()

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


class BatchPool:
    """The open batch, the worker processes and the results not merged yet.

    ``context_of(key_ids)`` is the state a batch closed now is checked against, holding the
    keys its envelopes name; ``merge(result)`` applies one result, called in dispatch order.
    """

    def __init__(
        self,
        workers: int,
        batch_events: int,
        context_of: Callable[[Iterable[str]], EventContext],
        merge: Callable[[BatchResult], None],
    ) -> None:
        self.workers = workers
        self.batch_events = batch_events
        self.start_events = START_BATCHES * batch_events
        self._context_of = context_of
        self._merge = merge
        self.pool: Workers | None = None
        self._lines: list[tuple[int, str | dict[str, Any]]] = []
        self._chars = 0
        self._hints: set[str] = set()
        # Results not merged yet, in dispatch order: a shipped batch, or an event verified
        # here while batches shipped before it were still out.
        # A shipped batch is its ticket (``Workers.submit``).
        self._queue: deque[_Ticket | BatchResult] = deque()
        self._in_flight = 0
        # Before the workers start: batches closed but not verified yet, in order, and how
        # many event lines the bundle has shown so far.
        self._held: list[Batch] = []
        self._shown = 0

    def add(self, number: int, line: str, record: dict[str, Any] | None, hint: str | None) -> None:
        """Add an event line (not a key event) to the open batch; ship it once full.
        ``record``: the line as read here, or None where it was only routed by its type
        (``format.route_line``); ``hint``: the key id its envelope names."""
        # Workers get the text and read it there; verified here, the record already read.
        self._lines.append((number, line if self.workers > 1 or record is None else record))
        self._chars += len(line)
        self._shown += 1
        if hint is not None:
            self._hints.add(hint)
        if len(self._lines) >= self.batch_events or self._chars >= BATCH_CHARS:
            self.close_batch(full=True)

    def close_batch(self, *, full: bool = False) -> None:
        """Close the open batch with the state its lines are checked against (the current),
        and ship it, hold it, or verify it here (see the module). Not ``full`` (another line
        follows, or the end), the batches held so far are shipped or verified here too: the
        results of every event before must be merged before anything after."""
        if self._lines:
            batch = Batch(self._context_of(self._hints), self._lines)
            self._lines, self._chars, self._hints = [], 0, set()
            if self.pool is not None:
                self._ship(batch)
                return
            if self.workers == 1:
                # Nothing was ever shipped, so nothing is queued ahead of this batch.
                self._merge(verify_batch(batch))
                return
            self._held.append(batch)
        if not self._held:
            return
        if self._shown >= self.start_events:
            self._start_workers()
        elif not full:
            # The events end here, and the bundle has shown too few to start workers for
            # (a later stretch of events may still start them).
            held, self._held = self._held, []
            for each in held:
                self._merge(verify_batch(each))

    def _ship(self, batch: Batch) -> None:
        assert self.pool is not None
        while self._in_flight >= self.workers * IN_FLIGHT_PER_WORKER:
            self._merge_next(block=True)
        self._queue.append(_Ticket(self.pool.submit(batch)))
        self._in_flight += 1
        while self._queue and self._merge_next(block=False):
            pass

    def _start_workers(self) -> None:
        """Start the worker processes and ship the held batches to them.

        A forked worker inherits this process's memory: the modules verifying loads on first
        use (the statement and manifest schemas) and the memo of manifest digests every run
        shares. So the first :data:`WARM_EVENTS` held events are verified here first, and
        those are loaded and computed once, not once in every worker (a fork server or spawn
        inherits nothing, so those start at once).
        """
        held, self._held = self._held, []
        # Forking needs no process-pool module (``multiprocessing`` either): decided here.
        context = None if _may_fork() else pool_context()
        if context is None or context.get_start_method() == "fork":
            first = held[0]
            self._merge(verify_batch(Batch(first.context, first.lines[:WARM_EVENTS])))
            rest = first.lines[WARM_EVENTS:]
            held[0:1] = [Batch(first.context, rest)] if rest else []
            # Objects alive now are moved out of the collector's walks (the permanent
            # generation) before the workers fork: their collections then neither spend CPU
            # walking what they inherited nor write to its pages, which stay shared.
            gc.freeze()
            self.pool = ForkedWorkers(self.workers, verify_batch)
        else:
            self.pool = _Executor(self.workers, context)
        for batch in held:
            self._ship(batch)

    @property
    def pending(self) -> bool:
        """Whether results of batches shipped earlier are still to be merged."""
        return bool(self._queue)

    def merge_in_turn(self, result: BatchResult) -> None:
        """Merge a result verified here, after those of the batches shipped before it."""
        if self._queue:
            self._queue.append(result)
        else:
            self._merge(result)

    def drain(self) -> None:
        """Merge every result still out, waiting for the workers."""
        while self._queue:
            self._merge_next(block=True)

    def shutdown(self) -> None:
        """Stop the worker processes, if they were started."""
        if self.pool is not None:
            pool, self.pool = self.pool, None
            pool.shutdown()

    def _merge_next(self, *, block: bool) -> bool:
        head = self._queue[0]
        if isinstance(head, _Ticket):  # a shipped batch
            assert self.pool is not None
            result = self.pool.take(head.ticket, block=block)
            if result is None:
                return False
            self._queue.popleft()
            self._in_flight -= 1
            self._merge(result)
        else:
            self._queue.popleft()
            self._merge(head)
        return True
