"""The ledger's one writer in a process of its own, and the client other processes reach it by.

A writer thread that shares its process with the HTTP handlers shares their interpreter lock:
measured under 32 clients, the group-commit writer waited for the lock about half the time it
was busy, and the handlers waited for it in turn (issue 16). So ``kernelindex serve`` commits
groups in a process of its own (``WriterProcess``), and its HTTP workers hand it envelopes
over a Unix socket (``RemoteWriter``): ``multiprocessing.connection``, authenticated with a
key only the server's processes hold. The process serves on one thread (``_Serving``): what
has arrived from every worker is one group, settled as the in-process writer settles its
groups (``group_commit.commit_group``), so each caller gets exactly what that writer gives
it: the receipt (inclusion proof included, once the group is committed and sequenced) or
the refusal, as the same exception.

A writer process that ends unasked (killed, crashed) is started again by the server's
watcher, on the same address: each worker's ``RemoteWriter`` connects to it by itself, and
reports itself unconnected meanwhile (``/health`` answers 503). What a killed writer had
committed stays; what it had not is answered to its callers as not taken, to send again.

The writer process ends when it is asked to (``WriterProcess.stop``: every request it has
received whole is committed or refused, and answered, first; then it closes each worker's
connection, and the worker refuses whatever it had sent that was not answered as not taken,
to send again: ``WriterClosedError``) or when the process that started it is gone (its end
of a pipe closes), so a server killed outright leaves no writer behind.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import secrets
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

from domain.errors import DomainError
from ledger.errors import StoreError, store_error
from ledger.group_commit import MAX_GROUP, commit_group
from ledger.logged_event import LoggedEvent
from ledger.long_lived import settle_heap
from ledger.remote_writer import RemoteWriter
from ledger.writer_wire import (
    ADDRESS_ENV,
    HANDSHAKE_TIMEOUT,
    KEY_ENV,
    SEND_TIMEOUT,
    HandshakeFailedError,
    Worker,
    dial,
    parse_request,
    shut_down,
    socket_folder,
)
from ledger.writer_wire import Listener as _Listener

if TYPE_CHECKING:
    from ledger.application import Ledger

# ADDRESS_ENV, KEY_ENV, RemoteWriter and the wire's names stay importable from here, where
# the server and its tests have them.
__all__ = [
    "ADDRESS_ENV",
    "HANDSHAKE_TIMEOUT",
    "KEY_ENV",
    "SEND_TIMEOUT",
    "RemoteWriter",
    "WriterProcess",
    "dial",
    "how_it_ended",
    "shut_down",
]

_START_TIMEOUT = 120.0


def _answer(result: LoggedEvent | BaseException) -> tuple[bool, object]:
    """What goes back for one envelope: its receipt, or the refusal. A failure that is not
    the ledger's word (a bug, a store failure it did not name) is named here, as the store
    failure it is: the worker answers it as any refused write, and nothing was stored."""
    if isinstance(result, LoggedEvent):
        return True, result
    if isinstance(result, DomainError):
        return False, result
    return False, store_error(result) or StoreError(
        f"the ledger's writer failed ({type(result).__name__}); nothing of this write was stored"
    )


# A worker must send a whole request once it has begun one: a message whose first byte came
# longer ago than this and that is still not whole (a stopped process, or one that trickles
# its bytes) has its worker cut off, its waiting callers told to send again. The serving
# thread never waits for the rest of a message meanwhile: it reads what has arrived.
MESSAGE_TIMEOUT = 5.0
# The listener itself failing (out of file descriptors, say) is retried after a pause that
# doubles up to the last, so it does not spin a core; a failed handshake is one client's
# and is not waited on.
ACCEPT_BACKOFF = (0.01, 1.0)


class _Worker(Worker):
    """A worker's connection whose reads are bounded by this module's ``MESSAGE_TIMEOUT``."""

    def __init__(self, connection: Connection) -> None:
        super().__init__(connection, MESSAGE_TIMEOUT)


class _Serving:
    """The writer process's serving thread: it waits on every worker's connection at once,
    reads what has arrived (up to a group, shared fairly between the workers), commits it as
    one group and hands each worker its answers in one message. Requests that arrive while a
    group commits wait in the sockets and make the next group. Only this thread reads and
    commits, so the commit does not trade the interpreter lock with a reader thread per
    envelope (measured under 32 clients, threads handing each envelope and its answer
    between them cost the writer process about as much CPU as the commit itself: issue 16);
    a thread per worker only sends its answers, a group at a time."""

    def __init__(self, ledger: Ledger, listener: _Listener, parent: Connection) -> None:
        self.ledger = ledger
        self.listener = listener
        self.parent = parent
        self.workers: dict[Connection, _Worker] = {}
        self._accepted: list[Connection] = []
        self._accepting = threading.Lock()
        self._closed = False
        self._stop_accepting = threading.Event()  # wakes the accept thread from a pause
        self._wake_read, self._wake_write = os.pipe()

    def accept(self) -> None:
        """The listener's thread: a handshake can block, so it never holds up a group."""
        pause = 0.0
        while True:
            try:
                connection = self.listener.accept()
            except Exception as exc:  # a client that failed its handshake, or the listener's
                with self._accepting:
                    if self._closed:
                        return
                # A peer that gave up before its accept (ECONNABORTED) is that peer's too.
                if not isinstance(exc, HandshakeFailedError | ConnectionAbortedError):
                    first, most = ACCEPT_BACKOFF
                    pause = min(most, max(first, pause * 2))
                    if self._stop_accepting.wait(pause):
                        return
                continue
            pause = 0.0
            with self._accepting:
                if self._closed:
                    connection.close()
                    return
                self._accepted.append(connection)
                os.write(self._wake_write, b"\0")

    def serve(self) -> None:
        """Until the parent says stop, or is gone: every request received whole is committed
        or refused, and its answer queued, before this returns (``close`` sends them)."""
        stopping = False
        while not stopping:
            ready = wait([self.parent, self._wake_read, *self.workers], self._wait_s())
            if self.parent in ready:
                stopping = True  # "stop", or EOF: the parent died
            if self._wake_read in ready:
                self._take_accepted()
            self._settle(*self._read([c for c in self.workers if c in ready]))
        # Requests read whole but beyond a round's share: committed too, as promised.
        while any(worker.inbox.messages for worker in self.workers.values()):
            self._settle(*self._read([]))

    def _settle(self, group: list[tuple[_Worker, int, object]], gone: list[_Worker]) -> None:
        if group:
            started = time.monotonic()
            self._commit(group)
            # No worker was read meanwhile: the commit's time is not a worker's delay.
            spent = time.monotonic() - started
            for worker in self.workers.values():
                if worker.inbox.begun is not None:
                    worker.inbox.begun += spent
        for worker in gone:  # after their last answers were queued
            worker.close()

    def _wait_s(self) -> float | None:
        """How long the serving thread may wait for sockets: not at all while requests read
        already wait for a group; else until the first unfinished message is overdue."""
        inboxes = [worker.inbox for worker in self.workers.values()]
        if any(inbox.messages for inbox in inboxes):
            return 0.0
        begun = [inbox.begun for inbox in inboxes if inbox.begun is not None]
        if not begun:
            return None
        return max(0.0, min(begun) + MESSAGE_TIMEOUT - time.monotonic()) + 0.01

    def stop_accepting(self) -> None:
        """Before the listener closes: the accept thread ends rather than retry."""
        with self._accepting:
            self._closed = True
            self._stop_accepting.set()
            for connection in self._accepted:
                connection.close()
            self._accepted.clear()

    def close(self, timeout: float = 20.0) -> None:
        """The answers still queued sent (within ``timeout`` in all), every connection
        closed; a worker that does not read its answers is cut off."""
        self.stop_accepting()
        workers = list(self.workers.values())
        self.workers.clear()
        for worker in workers:
            worker.close()
        deadline = time.monotonic() + timeout
        for worker in workers:
            if not worker.join(max(0.0, deadline - time.monotonic())):
                worker.cut_off()
        os.close(self._wake_read)
        os.close(self._wake_write)

    def _take_accepted(self) -> None:
        os.read(self._wake_read, 4096)
        with self._accepting:
            accepted, self._accepted = self._accepted, []
        for connection in accepted:
            try:
                self.workers[connection] = _Worker(connection)
            except (OSError, RuntimeError):  # no thread or socket to spare: refused
                connection.close()

    def _read(
        self, ready: list[Connection]
    ) -> tuple[list[tuple[_Worker, int, object]], list[_Worker]]:
        """The requests that have arrived whole, in arrival order per connection, at most a
        group's share per connection this round (the rest wait for the next); and the
        workers dropped: one that closed (its worker went away), left a message unfinished
        for ``MESSAGE_TIMEOUT`` or sent what is not a request. What a dropped worker sent
        whole before is committed or refused, and answered, all the same."""
        for connection in ready:
            worker = self.workers[connection]
            if worker.ended:
                continue
            try:
                worker.ended = not worker.inbox.fill()
            except Exception:  # a reset socket, a broken frame, a pickle that does not load
                worker.ended = True
        now = time.monotonic()
        for worker in self.workers.values():
            worker.ended = worker.ended or worker.inbox.overdue(now, MESSAGE_TIMEOUT)
        waiting = [worker for worker in self.workers.values() if worker.inbox.messages]
        share = max(1, MAX_GROUP // max(1, len(waiting)))
        group: list[tuple[_Worker, int, object]] = []
        gone: list[_Worker] = []
        for worker in list(self.workers.values()):
            inbox = worker.inbox
            taken, inbox.messages = inbox.messages[:share], inbox.messages[share:]
            for message in taken:
                request = parse_request(message)
                if request is None:  # not a numbered request: nothing after it is read
                    worker.ended, inbox.messages = True, []
                    break
                group.append((worker, *request))
            if worker.ended and not inbox.messages:
                del self.workers[worker.connection]
                gone.append(worker)
        return group, gone

    def _commit(self, group: list[tuple[_Worker, int, object]]) -> None:
        try:
            results = commit_group(self.ledger, [envelope for _, _, envelope in group])
            answers = [_answer(result) for result in results]
        except Exception as exc:  # the serving thread outlives any group
            refusal = StoreError(
                f"the ledger's writer failed ({type(exc).__name__}) settling this write; send "
                "it again (a stored one returns its original receipt)"
            )
            answers = [(False, refusal)] * len(group)
        batches: dict[_Worker, list[tuple[int, bool, object]]] = {}
        for (worker, number, _), (ok, value) in zip(group, answers, strict=True):
            batches.setdefault(worker, []).append((number, ok, value))
        for worker, batch in batches.items():
            worker.answer(batch)


LogSetup = Callable[[], None] | None  # how a writer process logs: the server's own setup


def _serve_writer(
    home: str, db_url: str, address: str, key: bytes, parent: Connection, log_setup: LogSetup
) -> None:
    """The writer process: the ledger opened to write, a listener for the workers and the
    serving thread; until the parent says stop, or is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C reaches the parent's stop
    if log_setup is not None:  # first: what the process logs, it logs as the server does
        log_setup()
    from ledger.home import LedgerHome  # noqa: PLC0415 - the child imports what it runs

    # The process that writes asks the home's witnesses (if any) to cosign each checkpoint.
    ledger = LedgerHome.at(Path(home), db_url).open(witnessing=True)
    listener = _Listener(address, key)
    serving = _Serving(ledger, listener, parent)
    threading.Thread(target=serving.accept, daemon=True).start()
    settle_heap()
    parent.send("ready")
    try:
        serving.serve()
    finally:
        serving.stop_accepting()
        listener.close()
        serving.close()
        ledger.close()
        parent.close()


# A writer process that ends unasked (killed, crashed) is started again by its watcher
# (``WriterProcess.watch``): at most MAX_RESTARTS times in a row while it keeps ending within
# STEADY_S of its start or fails to start, each try after a pause that doubles up to the
# last; then the watcher gives up and says why (``kernelindex serve`` exits non-zero), so a
# server never goes on refusing every write. A writer that ran STEADY_S starts the count anew.
MAX_RESTARTS = 3
STEADY_S = 10.0
RESTART_BACKOFF = (0.5, 4.0)


def how_it_ended(exitcode: int | None) -> str:
    """A process's end in words: the signal that killed it, or its exit code."""
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"


class WriterProcess:
    """The writer process of a server over one ledger home: ``start()`` before the workers,
    ``watch()`` to have it started again should it end unasked, ``stop()`` after the
    workers; ``env`` is what the workers need to reach it (the same address and key for
    every writer process it starts: a worker connects to the new one by itself)."""

    def __init__(self, home: Path, db_url: str, *, log_setup: LogSetup = None) -> None:
        self.home = home
        self.db_url = db_url
        # Called first in each writer process: a spawned interpreter has no logging set up.
        self._log_setup = log_setup
        self._folder = Path(tempfile.mkdtemp(prefix="kernelindex-writer-", dir=socket_folder()))
        self.address = str(self._folder / "writer.sock")
        self.key = secrets.token_bytes(32)
        # spawn: a fresh interpreter, with no thread or database connection of the parent's.
        self._context = multiprocessing.get_context("spawn")
        self._pipe: Connection | None = None
        self._process: Any = None
        self._started_at = 0.0
        # One start or stop at a time: the watcher's restart and ``stop`` never overlap.
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None

    @property
    def env(self) -> dict[str, str]:
        return {ADDRESS_ENV: self.address, KEY_ENV: self.key.hex()}

    def start(self) -> WriterProcess:
        try:
            with self._lock:
                self._launch()
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self) -> None:
        """A writer process, started and ready (the caller holds the lock), or StoreError.
        It opens the ledger afresh: the log, its tree and every key are read from the
        database, where a writer killed mid-group left nothing of that group (one
        transaction), so a new one takes over where the last committed group ended."""
        # A writer that was killed leaves its socket behind; the new one binds the same
        # address, the one the workers know.
        Path(self.address).unlink(missing_ok=True)
        ours, theirs = self._context.Pipe()
        process = self._context.Process(
            target=_serve_writer,
            args=(str(self.home), self.db_url, self.address, self.key, theirs, self._log_setup),
            name="kernelindex-writer",
            daemon=False,
        )
        process.start()
        theirs.close()
        try:
            ready = ours.poll(_START_TIMEOUT) and ours.recv() == "ready"
        except (EOFError, OSError):  # it ended while starting
            ready = False
        if not ready:
            ours.close()
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join(5)
            raise StoreError(
                f"the ledger's writer process did not start ({how_it_ended(process.exitcode)})"
            )
        self._pipe, self._process = ours, process
        self._started_at = time.monotonic()

    @property
    def pid(self) -> int | None:
        process = self._process
        return None if process is None else int(process.pid)

    @property
    def running(self) -> bool:
        process = self._process
        return process is not None and bool(process.is_alive())

    def watch(self, report: Callable[[str], None], give_up: Callable[[str], None]) -> None:
        """Start the writer again whenever it ends unasked, telling ``report`` what happened;
        when it cannot be kept running (``MAX_RESTARTS``), call ``give_up`` with why, once,
        and watch no more. Both are called from the watcher's thread."""
        self._watcher = threading.Thread(
            target=self._watch, args=(report, give_up), name="kernelindex-writer-watch", daemon=True
        )
        self._watcher.start()

    def _watch(self, report: Callable[[str], None], give_up: Callable[[str], None]) -> None:
        restarts, pause = 0, 0.0  # since the writer last ran STEADY_S
        while True:
            with self._lock:
                process = self._process
            if process is None or self._stopping.is_set():
                return
            wait([process.sentinel])
            with self._lock:
                if self._stopping.is_set():
                    return  # ``stop`` ended it
                steady = time.monotonic() - self._started_at >= STEADY_S
                self._end(timeout=5)
            last = how_it_ended(process.exitcode)
            report(
                f"the ledger's writer process (pid {process.pid}) ended unasked ({last}); "
                "writes are refused (503) until it runs again"
            )
            if steady:
                restarts, pause = 0, 0.0
            while True:
                if restarts >= MAX_RESTARTS:
                    give_up(
                        f"the ledger's writer process could not be kept running: it ended or "
                        f"failed to start {restarts + 1} times in a row (the last: {last}); "
                        "nothing acknowledged was lost (check with 'kernelindex audit')"
                    )
                    return
                if restarts:
                    first, most = RESTART_BACKOFF
                    pause = min(most, max(first, pause * 2))
                    if self._stopping.wait(pause):
                        return
                restarts += 1
                try:
                    with self._lock:
                        if self._stopping.is_set():
                            return
                        self._launch()
                except Exception as exc:  # the watcher outlives a failed start, whatever failed
                    last = (
                        exc.message
                        if isinstance(exc, DomainError)
                        else f"the ledger's writer process did not start ({type(exc).__name__}: "
                        f"{exc})"
                    )
                    report(last)
                    continue
                report(f"the ledger's writer process runs again (pid {self.pid}); writes go on")
                break

    def _end(self, timeout: float) -> None:
        """Ask the writer to finish (every envelope it took is answered) and reap it; kill
        it if it takes longer than ``timeout`` (the caller holds the lock)."""
        if self._pipe is not None:
            with contextlib.suppress(OSError):
                self._pipe.send("stop")
            self._pipe.close()
            self._pipe = None
        if self._process is not None:
            self._process.join(timeout)
            if self._process.is_alive():
                self._process.kill()
                self._process.join(5)
            self._process = None

    def stop(self, timeout: float = 60.0) -> None:
        """Finish every accepted envelope, then end the writer process (and its watcher)."""
        self._stopping.set()
        with self._lock:
            self._end(timeout)
        watcher = self._watcher
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join(timeout)
        shutil.rmtree(self._folder, ignore_errors=True)
