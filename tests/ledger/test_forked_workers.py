"""The forked worker processes of the offline verifier (``ledger.verify.forked.ForkedWorkers``):
results come back in the order batches were shipped, whatever their size against the pipes';
a batch that raises, or a worker that dies, is an error here, never a hang or a lost batch.

The verifier's reports with these workers are held to one process's in
``test_parallel_verify.py``."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from ledger.verification_report import Report
from ledger.verify import forked as _forked
from ledger.verify.batches import Batch, BatchResult
from ledger.verify.events import EventContext
from ledger.verify.forked import ForkedWorkers, WorkerError

CONTEXT = EventContext(None, None)


def _echo(batch: Batch) -> BatchResult:
    """A result as large as its batch: each line's text back as a note, with the worker."""
    report = Report(subject="batch")
    report.notes.extend(f"{os.getpid()}:{text}" for _, text in batch.lines)
    return BatchResult(report, [])


def _raises(batch: Batch) -> BatchResult:
    if batch.lines[0][0] == 2:
        raise ValueError("a batch this worker could not verify")
    return _echo(batch)


def _dies(batch: Batch) -> BatchResult:
    if batch.lines[0][0] == 1:
        os._exit(3)
    return _echo(batch)


def _batch(number: int, chars: int) -> Batch:
    return Batch(CONTEXT, [(number, f"{number:04d}" + "x" * chars)])


@pytest.fixture
def small_pipes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pipes of the default 64 KiB: batches and results many times larger."""
    monkeypatch.setattr(_forked, "_widen", lambda fd: None)


@pytest.mark.usefixtures("small_pipes")
def test_results_come_back_in_order_however_large_batches_and_results(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Twelve batches of 300 KB shipped before any result is taken (every worker then
    blocks writing a result larger than its pipe while batches wait for it): each result is
    its own batch's, in order, and both workers verified some."""
    workers = ForkedWorkers(2, _echo)
    try:
        tickets = [workers.submit(_batch(n, 300_000)) for n in range(12)]
        pids = set()
        for n, ticket in enumerate(tickets):
            result = workers.take(ticket, block=True)
            assert result is not None
            (note,) = result.report.notes
            pid, text = note.split(":", 1)
            assert text == _batch(n, 300_000).lines[0][1]
            pids.add(pid)
        assert len(pids) == 2
    finally:
        workers.shutdown()


@pytest.mark.usefixtures("small_pipes")
def test_a_result_not_ready_is_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    workers = ForkedWorkers(1, _echo)
    try:
        ticket = workers.submit(_batch(0, 10))
        result = None
        while result is None:  # ``block=False`` answers at once, done or not
            result = workers.take(ticket, block=False)
        assert result.report.notes[0].endswith("0000xxxxxxxxxx")
    finally:
        workers.shutdown()


def test_a_batch_that_raises_is_an_error_here_and_the_worker_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    workers = ForkedWorkers(1, _raises)
    try:
        tickets = [workers.submit(_batch(n, 10)) for n in range(4)]
        assert workers.take(tickets[0], block=True) is not None
        assert workers.take(tickets[1], block=True) is not None
        # Its own type, as a process pool raises it (the CLI turns a DomainError or an
        # OSError into a clean error line), with the worker's traceback as its cause.
        with pytest.raises(ValueError, match="a batch this worker could not") as raised:
            workers.take(tickets[2], block=True)
        assert isinstance(raised.value.__cause__, WorkerError)
        assert "Traceback" in str(raised.value.__cause__)
        assert workers.take(tickets[3], block=True) is not None
    finally:
        workers.shutdown()


class _Unpicklable(Exception):
    def __reduce__(self) -> str | tuple[object, ...]:
        raise TypeError("not this one")


class _NotUnpicklable(Exception):
    """Pickles, but its __init__ cannot be called again with its args (unpickling fails)."""

    def __init__(self, a: int, b: int) -> None:
        super().__init__(f"{a}/{b}")


def _raises_unpicklable(batch: Batch) -> BatchResult:
    if batch.lines[0][0] == 1:
        raise _NotUnpicklable(1, 2)
    raise _Unpicklable("held a lock")


def test_an_exception_that_does_not_pickle_arrives_as_its_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    workers = ForkedWorkers(1, _raises_unpicklable)
    try:
        first, second = workers.submit(_batch(0, 10)), workers.submit(_batch(1, 10))
        with pytest.raises(WorkerError, match="_Unpicklable: held a lock"):
            workers.take(first, block=True)
        with pytest.raises(WorkerError, match="_NotUnpicklable: 1/2"):
            workers.take(second, block=True)
    finally:
        workers.shutdown()


def _interrupted(batch: Batch) -> BatchResult:
    if batch.lines[0][0] == 0:
        raise KeyboardInterrupt
    return _echo(batch)


def test_an_interrupt_inside_a_batch_is_reported_and_the_worker_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    workers = ForkedWorkers(1, _interrupted)
    try:
        first, second = workers.submit(_batch(0, 10)), workers.submit(_batch(1, 10))
        with pytest.raises(KeyboardInterrupt):
            workers.take(first, block=True)
        assert workers.take(second, block=True) is not None
    finally:
        workers.shutdown()


def test_a_fork_refused_partway_leaves_no_worker_or_pipe_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_fork = os.fork
    forks: list[int] = []

    def fork_twice() -> int:
        if len(forks) == 2:
            raise BlockingIOError(11, "Resource temporarily unavailable")
        pid = real_fork()
        if pid:
            forks.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", fork_twice)
    open_before = set(os.listdir("/proc/self/fd"))
    with pytest.raises(BlockingIOError):
        ForkedWorkers(3, _echo)
    assert set(os.listdir("/proc/self/fd")) <= open_before
    for pid in forks:  # reaped: waiting again finds no such child
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_a_worker_that_dies_is_an_error_here_not_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    workers = ForkedWorkers(1, _dies)
    try:
        tickets = [workers.submit(_batch(n, 10)) for n in range(3)]
        assert workers.take(tickets[0], block=True) is not None
        with pytest.raises(WorkerError, match="ended without answering"):
            workers.take(tickets[1], block=True)
    finally:
        workers.shutdown()


@pytest.fixture
def hang_is_a_failure() -> Iterator[None]:
    """A liveness bound, not a speed claim: a shutdown that waits for ever fails after 60 s."""

    def fail(signum: int, frame: object) -> None:
        raise TimeoutError("shutdown did not return: a worker is waited for ever")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(60)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.usefixtures("hang_is_a_failure")
def test_two_pools_alive_at_once_each_shut_down_without_the_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A second pool's workers, forked while the first is alive, do not hold the first's
    pipes open: shutting the first down returns (it waited for ever when they did)."""
    first = ForkedWorkers(2, _echo)
    second = ForkedWorkers(2, _echo)

    def no_kill(pid: int, signum: int) -> None:
        raise AssertionError("a worker that ends at its pipe's end is not killed")

    monkeypatch.setattr(os, "kill", no_kill)
    try:
        ticket = first.submit(_batch(0, 10))
        assert first.take(ticket, block=True) is not None
        pids = [worker.pid for worker in first._workers]
        first.shutdown()  # returns: its workers are reaped
        for pid in pids:
            with pytest.raises(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        ticket = second.submit(_batch(1, 10))
        assert second.take(ticket, block=True) is not None
    finally:
        second.shutdown()


@pytest.mark.usefixtures("hang_is_a_failure")
def test_a_worker_whose_pipe_another_child_holds_is_still_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A child forked elsewhere while a pool is alive holds its pipes open, so a worker
    never reads their end; shutdown ends the worker anyway instead of waiting for ever."""
    monkeypatch.setattr(_forked, "_ENDING_S", 0.2)
    workers = ForkedWorkers(1, _echo)
    other = os.fork()
    if other == 0:  # holds every descriptor it inherited until killed
        try:
            signal.pause()
        finally:
            os._exit(0)
    try:
        (pid,) = [worker.pid for worker in workers._workers]
        workers.shutdown()
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    finally:
        os.kill(other, signal.SIGKILL)
        os.waitpid(other, 0)


def test_a_pipe_refused_partway_leaves_no_descriptor_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Out of descriptors at the second worker's second pipe: what was opened is closed and
    the first worker is reaped."""
    real_pipe = os.pipe
    pipes: list[int] = []

    def pipe_thrice() -> tuple[int, int]:
        if len(pipes) == 3:
            raise OSError(24, "Too many open files")
        pipes.append(1)
        return real_pipe()

    monkeypatch.setattr(os, "pipe", pipe_thrice)
    open_before = set(os.listdir("/proc/self/fd"))
    with pytest.raises(OSError, match="Too many open files"):
        ForkedWorkers(2, _echo)
    assert set(os.listdir("/proc/self/fd")) <= open_before
