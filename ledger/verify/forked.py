"""The offline verifier's worker processes where this process may fork: each forked with
``os.fork`` and fed batches through a pipe of its own, answering through another, with no
process-pool import and no manager or feeder threads pickling on the verifying process's
cores (``ledger.verify.pool`` decides when to use them)."""

from __future__ import annotations

import os
import pickle
import select
import signal
import time
import traceback
from collections import deque
from collections.abc import Callable
from typing import cast

from ledger.verify.batches import Batch, BatchResult

__all__ = ["ForkedWorkers", "WorkerError"]


class WorkerError(RuntimeError):
    """A forked worker process failed (verify_batch raised) or ended without answering."""


_LENGTH = 8  # bytes of a frame's length prefix (little-endian)
_READ_CHUNK = 1 << 18


def _frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(_LENGTH, "little") + payload


def _read_exactly(fd: int, size: int) -> bytes | None:
    """``size`` bytes from a blocking pipe; None at its end (the other side closed it)."""
    parts, left = [], size
    while left:
        chunk = os.read(fd, min(left, _READ_CHUNK))
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _serve(tasks: int, results: int, verify: Callable[[Batch], BatchResult]) -> None:
    """A forked worker's loop: a batch in, its result out (or the traceback of what it
    raised), until this process closes the worker's pipe."""
    while (head := _read_exactly(tasks, _LENGTH)) is not None:
        payload = _read_exactly(tasks, int.from_bytes(head, "little"))
        if payload is None:
            return
        try:
            answer: tuple[bool, object] = (True, verify(pickle.loads(payload)))  # noqa: S301 - see ForkedWorkers
            out = pickle.dumps(answer, pickle.HIGHEST_PROTOCOL)
        except BaseException as exc:  # reported to the verifying process, which raises it
            # The exception itself, pickled on its own, where it makes the round trip (the
            # caller's handlers see its own type, as through a process pool), with the
            # worker's traceback; else the traceback's text alone.
            remote = traceback.format_exc()
            try:
                raised: bytes | None = pickle.dumps(exc, pickle.HIGHEST_PROTOCOL)
            except Exception:  # an exception that does not pickle
                raised = None
            out = pickle.dumps((False, (raised, remote)), pickle.HIGHEST_PROTOCOL)
        view = memoryview(_frame(out))
        while view:
            view = view[os.write(results, view) :]


class _Forked:
    """One forked worker: its pid, the pipe this process writes batches to and the bytes not
    written yet, the pipe it reads results from (non-blocking) and the results read whole."""

    def __init__(self, pid: int, tasks: int, results: int) -> None:
        self.pid, self.tasks, self.results = pid, tasks, results
        self.outbox = bytearray()
        self.received = bytearray()
        self.answers: deque[bytes] = deque()  # whole result frames' payloads, in order
        self.outstanding = 0  # batches submitted whose results have not been read whole
        self.ended = False  # its results pipe reached its end


# How long shutdown lets a worker take to end at its pipe's end before killing it.
_ENDING_S = 10.0
# The verifying side's pipe ends of every live pool in this process. A forked worker closes
# them all: a worker of one pool holding another pool's batch pipe open would keep that
# pool's workers from ever reading its end (and their shutdown from returning).
_LIVE_ENDS: set[int] = set()


def _widen(fd: int) -> None:
    """A pipe of 256 KiB where Linux allows it: a batch (~160 KiB) written in one call. Not
    more: pipe pages count against the user's quota (pipe-user-pages-soft, 64 MiB by
    default), shared with every other process of the user, and there are two per worker."""
    try:
        import fcntl  # noqa: PLC0415 - POSIX only, as is fork

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 18)
    except (ImportError, OSError):
        pass  # the default size: the batch is written in parts


class ForkedWorkers:
    """Worker processes forked from this one (which must have no other thread), each fed
    batches through its own pipe and answering through another, in the order it was fed.

    A batch goes to the worker with the fewest batches out. This process never waits on one
    pipe alone: a batch that does not fit its pipe waits in memory, written as the worker
    reads, and while it waits for a result it also writes every waiting batch and reads every
    worker's results (a worker blocked on a large result and this process blocked on a large
    batch would otherwise wait on each other forever, and a worker that is done would idle)."""

    def __init__(self, workers: int, verify: Callable[[Batch], BatchResult]) -> None:
        self._workers: list[_Forked] = []
        try:
            self._start(workers, verify)
        except BaseException:
            self.shutdown()  # the workers started so far (a fork refused at a process limit)
            raise

    def _start(self, workers: int, verify: Callable[[Batch], BatchResult]) -> None:
        for _ in range(workers):
            opened: list[int] = []
            try:
                opened.extend(os.pipe())
                opened.extend(os.pipe())
                pid = os.fork()
            except BaseException:  # out of descriptors or processes: close what was opened
                for fd in opened:
                    os.close(fd)
                raise
            tasks_read, tasks_write, results_read, results_write = opened
            if pid == 0:  # the worker
                status = 0
                try:
                    for fd in (tasks_write, results_read):
                        os.close(fd)
                    for fd in _LIVE_ENDS:  # every live pool's ends, inherited
                        os.close(fd)
                    _serve(tasks_read, results_write, verify)
                except BaseException:  # this process ends here, whatever happened
                    status = 1
                finally:
                    # Never return into the caller's stack (its cleanups, a test runner's).
                    os._exit(status)
            os.close(tasks_read)
            os.close(results_write)
            for fd in (tasks_write, results_read):
                _widen(fd)
                os.set_blocking(fd, False)
            _LIVE_ENDS.update((tasks_write, results_read))
            self._workers.append(_Forked(pid, tasks_write, results_read))

    def submit(self, batch: Batch) -> object:
        index = min(range(len(self._workers)), key=lambda i: self._workers[i].outstanding)
        worker = self._workers[index]
        worker.outbox += _frame(pickle.dumps(batch, pickle.HIGHEST_PROTOCOL))
        worker.outstanding += 1
        self._write(worker)
        return index

    def take(self, ticket: object, *, block: bool) -> BatchResult | None:
        worker = self._workers[cast("int", ticket)]  # what ``submit`` returned
        self._pump(wait=False)
        while not worker.answers:
            if worker.ended:
                raise WorkerError("a verify worker process ended without answering")
            if not block:
                return None
            self._pump(wait=True)
        # Bytes our own forked worker wrote, to a pipe no other process holds.
        ok, value = pickle.loads(worker.answers.popleft())  # noqa: S301
        if not ok:
            pickled, remote = value
            cause = WorkerError(f"a verify worker process failed:\n{remote}")
            try:
                raised = pickle.loads(pickled) if pickled is not None else None  # noqa: S301
            except Exception:  # one that pickles but does not unpickle (its __init__'s arguments)
                raised = None
            if isinstance(raised, BaseException):
                raise raised from cause
            raise cause
        result: BatchResult = value
        return result

    def shutdown(self) -> None:
        """Close the workers' pipes and reap the workers, each ending at its pipe's end once
        its batch in hand is done (and its own exit work, a profiler's dump say, is done).
        A child this process forked elsewhere may hold that pipe open too, so the worker
        never sees its end: one not ended within :data:`_ENDING_S` is killed (every result
        wanted has been taken by now), never waited for without bound."""
        for worker in self._workers:
            for fd in (worker.tasks, worker.results):
                _LIVE_ENDS.discard(fd)
                os.close(fd)
        left = [worker.pid for worker in self._workers]
        give_up, pause = time.monotonic() + _ENDING_S, 0.001
        while left:
            running = []
            for pid in left:
                try:
                    # Not reaped yet, so the pid is still this child's, never another's.
                    if os.waitpid(pid, os.WNOHANG) == (0, 0):
                        running.append(pid)
                except ChildProcessError:  # reaped by someone else's waitpid(-1)
                    pass
            left = running
            if left and time.monotonic() >= give_up:
                for pid in left:
                    try:
                        os.kill(pid, signal.SIGKILL)
                        os.waitpid(pid, 0)
                    except (ProcessLookupError, ChildProcessError):
                        pass  # reaped by someone else's waitpid(-1) since it was asked
                left = []
            elif left:
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
        self._workers = []

    def _pump(self, *, wait: bool) -> None:
        """Write waiting batches and read results: what the pipes take and hold now, or
        (``wait``) once at least one of them can move."""
        if wait:
            # poll, not select: a process with 1,024 files open already (a server) would
            # get pipes select cannot watch.
            poller = select.poll()
            for w in self._workers:
                if not w.ended:
                    poller.register(w.results, select.POLLIN)
                    if w.outbox:
                        poller.register(w.tasks, select.POLLOUT)
            poller.poll()
        for worker in self._workers:
            if worker.outbox:
                self._write(worker)
            self._read(worker)

    @staticmethod
    def _write(worker: _Forked) -> None:
        try:
            written = os.write(worker.tasks, worker.outbox)
        except BlockingIOError:
            return
        except BrokenPipeError:  # it ended: its results pipe says so, and take raises
            worker.outbox.clear()
            return
        del worker.outbox[:written]

    @staticmethod
    def _read(worker: _Forked) -> None:
        """Read what ``worker``'s results pipe holds now, without waiting; whole frames go
        to its answers."""
        if worker.ended:
            return
        got = worker.received
        while True:
            try:
                chunk = os.read(worker.results, _READ_CHUNK)
            except BlockingIOError:
                break
            if not chunk:
                worker.ended = True
                break
            got += chunk
        while len(got) >= _LENGTH:
            end = _LENGTH + int.from_bytes(got[:_LENGTH], "little")
            if len(got) < end:
                break
            worker.answers.append(bytes(got[_LENGTH:end]))
            worker.outstanding -= 1
            del got[:end]
