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
import itertools
import multiprocessing
import os
import queue
import secrets
import shutil
import signal
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from multiprocessing.connection import (
    Connection,
    answer_challenge,
    deliver_challenge,
    wait,
)
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import TYPE_CHECKING, Any

from domain.errors import DomainError
from ledger.errors import StoreError, store_error
from ledger.group_commit import MAX_GROUP, WriterClosedError, commit_group
from ledger.logged_event import LoggedEvent
from ledger.long_lived import freeze_long_lived

if TYPE_CHECKING:
    from ledger.application import Ledger

__all__ = ["ADDRESS_ENV", "KEY_ENV", "RemoteWriter", "WriterProcess", "how_it_ended"]

# How a server's worker processes find the writer: its socket and the key to it (hex).
ADDRESS_ENV = "KERNELINDEX_WRITER_ADDRESS"
KEY_ENV = "KERNELINDEX_WRITER_KEY"
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
# Bytes taken from a worker's socket per read.
_CHUNK = 1 << 16
# A handshake (each side's challenge) is bounded the same way: a peer that stops midway is
# dropped, not waited for by every later connection.
HANDSHAKE_TIMEOUT = 5.0
# A send that cannot go on for this long (the other side reads nothing) gives up: the
# connection is shut down, and both sides treat it as lost (a worker's callers are told to
# send again, and it connects anew).
SEND_TIMEOUT = 30.0
# The listener itself failing (out of file descriptors, say) is retried after a pause that
# doubles up to the last, so it does not spin a core; a failed handshake is one client's
# and is not waited on.
ACCEPT_BACKOFF = (0.01, 1.0)


def _set_timeouts(sock: socket.socket, receive_s: float, send_s: float) -> None:
    """The socket's own read and write time limits (0: none). Options of the socket, so
    they hold for every descriptor of it, and a blocking read or write ends with an error."""
    for option, seconds in ((socket.SO_RCVTIMEO, receive_s), (socket.SO_SNDTIMEO, send_s)):
        whole = int(seconds)
        sock.setsockopt(
            socket.SOL_SOCKET, option, struct.pack("ll", whole, int((seconds - whole) * 1e6))
        )


def _set_connection_timeouts(connection: Connection, receive_s: float, send_s: float) -> None:
    with socket.socket(fileno=os.dup(connection.fileno())) as shared:
        _set_timeouts(shared, receive_s, send_s)


def dial(address: str, key: bytes) -> Connection:
    """``multiprocessing.connection.Client`` to the writer, the handshake bounded in time;
    then reads wait as long as answers take, and sends at most ``SEND_TIMEOUT``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        # Twice the writer's own limit: one queued behind a stalled handshake gets through.
        _set_timeouts(sock, 2 * HANDSHAKE_TIMEOUT, 2 * HANDSHAKE_TIMEOUT)
        sock.connect(address)
    except BaseException:
        sock.close()
        raise
    connection = Connection(sock.detach())
    try:
        answer_challenge(connection, key)
        deliver_challenge(connection, key)
        _set_connection_timeouts(connection, 0, SEND_TIMEOUT)
    except BaseException:
        connection.close()
        raise
    return connection


class _HandshakeFailedError(Exception):
    """One connecting peer failed its handshake (or its socket's set-up): that peer's."""


class _Listener:
    """``multiprocessing.connection.Listener`` for the workers, each handshake bounded in
    time (one worker stopped midway through its handshake holds up no later one). ``accept``
    raises ``_HandshakeFailedError`` for a peer that failed, anything else for the
    listener's own failure."""

    def __init__(self, address: str, key: bytes) -> None:
        self._key = key
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._socket.bind(address)
        self._socket.listen(64)

    def accept(self) -> Connection:
        sock, _ = self._socket.accept()
        try:
            _set_timeouts(sock, HANDSHAKE_TIMEOUT, HANDSHAKE_TIMEOUT)
        except Exception as exc:
            sock.close()
            raise _HandshakeFailedError(str(exc)) from exc
        except BaseException:
            sock.close()
            raise
        connection = Connection(sock.detach())
        try:
            deliver_challenge(connection, self._key)
            answer_challenge(connection, self._key)
        except Exception as exc:
            connection.close()
            raise _HandshakeFailedError(str(exc)) from exc
        except BaseException:  # an interpreter exit: the socket closed all the same
            connection.close()
            raise
        return connection

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked accepting
        self._socket.close()


class _BrokenFrameError(Exception):
    """A worker sent what multiprocessing's framing cannot be: a negative length."""


class _Inbox:
    """A worker's requests as their bytes arrive, read without blocking and cut into whole
    messages by ``multiprocessing.connection``'s framing (a 4-byte big-endian length, or -1
    and an 8-byte one, then the pickle). ``Connection.recv`` would wait for the rest of a
    message begun, and a worker that trickles one byte at a time would hold the serving
    thread, and every group, for as long as it liked; here an unfinished message only has
    a clock (``begun``), and its worker is cut off when that runs out."""

    def __init__(self, connection: Connection) -> None:
        # Its own descriptor of the socket: MSG_DONTWAIT per read leaves the socket blocking
        # for the sender thread's writes.
        self._socket = socket.socket(fileno=os.dup(connection.fileno()))
        self._buffer = bytearray()
        self.messages: list[object] = []
        self.begun: float | None = None  # when the unfinished message's first byte came

    def fill(self) -> bool:
        """Read what has arrived and cut out the whole messages; False at the end of the
        stream (what came whole before it stays in ``messages``)."""
        while True:
            try:
                chunk = self._socket.recv(_CHUNK, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                break
            if not chunk:
                self._cut()
                return False
            self._buffer += chunk
            if len(chunk) < _CHUNK:
                break
        self._cut()
        return True

    def overdue(self, now: float) -> bool:
        return self.begun is not None and now - self.begun > MESSAGE_TIMEOUT

    def close(self) -> None:
        self._socket.close()

    def _cut(self) -> None:
        buffer, taken = self._buffer, 0
        while len(buffer) - taken >= 4:
            (size,) = struct.unpack_from("!i", buffer, taken)
            head = 4
            if size == -1:
                if len(buffer) - taken < 12:
                    break
                (size,) = struct.unpack_from("!Q", buffer, taken + 4)
                head = 12
            elif size < 0:
                raise _BrokenFrameError(f"a frame of {size} bytes")
            if len(buffer) - taken < head + size:
                break
            body = bytes(buffer[taken + head : taken + head + size])
            self.messages.append(ForkingPickler.loads(body))
            taken += head + size
        if taken:
            del buffer[:taken]
            self.begun = None
        if buffer and self.begun is None:
            self.begun = time.monotonic()


class _Worker:
    """One worker's connection: read by the serving thread, answered by a thread of its own,
    so a worker slow to read its answers holds up nobody else's group."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        _set_connection_timeouts(connection, MESSAGE_TIMEOUT, SEND_TIMEOUT)
        self.inbox = _Inbox(connection)
        # Read no more (closed, broken, overdue): dropped once what came whole is taken.
        self.ended = False
        self._outbox: queue.SimpleQueue[list[tuple[int, bool, object]] | None] = queue.SimpleQueue()
        self._sender = threading.Thread(target=self._send, daemon=True)
        try:
            self._sender.start()
        except BaseException:  # no thread to spare: the inbox's descriptor goes too
            self.inbox.close()
            raise

    def answer(self, batch: list[tuple[int, bool, object]]) -> None:
        self._outbox.put(batch)

    def close(self) -> None:
        """No more reads: the answers queued before this go out, then the connection
        closes (the serving thread queues a round's answers before it closes a worker)."""
        self._outbox.put(None)

    def join(self, timeout: float) -> bool:
        """Whether its answers are all out (or can never go) within ``timeout``."""
        self._sender.join(timeout)
        return not self._sender.is_alive()

    def cut_off(self) -> None:
        """A sender blocked writing to a worker that never reads returns, with an error."""
        shut_down(self.connection)

    def _send(self) -> None:
        listening = True
        while (batch := self._outbox.get()) is not None:
            if not listening:
                continue
            try:
                self.connection.send(batch)  # a group's answers: one write, one wake-up
            except OSError:
                # Its worker stopped listening (or reads nothing for SEND_TIMEOUT; a message
                # may be cut short): shut down, so each side sees the connection end. What
                # it sent before is still read to the end, and answered no more.
                listening = False
                shut_down(self.connection)
        with contextlib.suppress(OSError):
            self.connection.close()
        with contextlib.suppress(OSError):
            self.inbox.close()


def _request(message: object) -> tuple[int, object] | None:
    """A worker's message as a request: its number and its envelope (None: not one)."""
    if not isinstance(message, tuple) or len(message) != 2:
        return None
    number, envelope = message
    try:
        return int(number), envelope
    except (TypeError, ValueError, OverflowError):
        return None


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
                if not isinstance(exc, _HandshakeFailedError | ConnectionAbortedError):
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
            worker.ended = worker.ended or worker.inbox.overdue(now)
        waiting = [worker for worker in self.workers.values() if worker.inbox.messages]
        share = max(1, MAX_GROUP // max(1, len(waiting)))
        group: list[tuple[_Worker, int, object]] = []
        gone: list[_Worker] = []
        for worker in list(self.workers.values()):
            inbox = worker.inbox
            taken, inbox.messages = inbox.messages[:share], inbox.messages[share:]
            for message in taken:
                request = _request(message)
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


def _serve_writer(home: str, db_url: str, address: str, key: bytes, parent: Connection) -> None:
    """The writer process: the ledger opened to write, a listener for the workers and the
    serving thread; until the parent says stop, or is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C reaches the parent's stop
    from ledger.home import LedgerHome  # noqa: PLC0415 - the child imports what it runs

    # The process that writes asks the home's witnesses (if any) to cosign each checkpoint.
    ledger = LedgerHome.at(Path(home), db_url).open(witnessing=True)
    listener = _Listener(address, key)
    serving = _Serving(ledger, listener, parent)
    threading.Thread(target=serving.accept, daemon=True).start()
    freeze_long_lived()
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

    def __init__(self, home: Path, db_url: str) -> None:
        self.home = home
        self.db_url = db_url
        self._folder = Path(tempfile.mkdtemp(prefix="kernelindex-writer-"))
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
            args=(str(self.home), self.db_url, self.address, self.key, theirs),
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


# How long a worker waits between attempts to reach its writer again, at most.
_RECONNECT_MAX_WAIT = 1.0


class RemoteWriter:
    """A worker's handle on the writer process: ``submit`` and ``append`` as
    :class:`~ledger.group_commit.GroupCommitWriter` has them. One connection at a time, read
    by a thread of its own that settles each caller's future. When the connection is lost
    (the writer cut this worker off, or is restarting) the callers waiting on it are told to
    send again, new writes are refused as unavailable, and the thread connects again in the
    background: a worker is not refused writes for good, and a handshake with a writer that
    does not answer never blocks a caller (an event loop)."""

    def __init__(self, address: str, key: bytes, *, require: bool = True) -> None:
        self._address = address
        self._key = key
        self._numbers = itertools.count()
        self._waiting: dict[int, Future[LoggedEvent]] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._connection: Connection | None = None
        try:
            self._connection = self._connect()
        except Exception:
            # ``require``: the writer must be there (``serve`` makes its own handle once the
            # writer is ready). A worker started while its writer is down (being started
            # again) comes up all the same, unconnected, and connects in the background.
            if require:
                raise
        self._reader = threading.Thread(
            target=self._run, name="kernelindex-writer-client", daemon=True
        )
        self._reader.start()

    @classmethod
    def from_env(cls) -> RemoteWriter | None:
        """The writer the environment names (a server's worker), if any; it need not be
        running yet."""
        address = os.environ.get(ADDRESS_ENV)
        key = os.environ.get(KEY_ENV)
        return cls(address, bytes.fromhex(key), require=False) if address and key else None

    @property
    def connected(self) -> bool:
        """Whether this worker reaches its writer now: False from the moment the connection
        is lost (the writer ended, or cut this worker off) until it is made again; writes
        are refused meanwhile."""
        with self._lock:
            return self._connection is not None and not self._closing.is_set()

    def append(self, envelope: object) -> LoggedEvent:
        return self.submit(envelope).result()

    def submit(self, envelope: object) -> Future[LoggedEvent]:
        reply: Future[LoggedEvent] = Future()
        with self._lock:
            connection = self._connection
            if connection is None or self._closing.is_set():
                raise WriterClosedError("the ledger's writer is not running; try again shortly")
            number = next(self._numbers)
            self._waiting[number] = reply
            try:
                connection.send((number, envelope))
            except OSError:
                self._waiting.pop(number, None)
                orphaned = self._lost(connection)
            else:
                return reply
        _tell_writer_gone(orphaned)
        raise WriterClosedError("the ledger's writer is not running; try again shortly")

    def _connect(self) -> Connection:
        return dial(self._address, self._key)

    def _run(self) -> None:
        """Read answers while connected; connect again, backing off, while not; until
        ``close``."""
        with self._lock:
            connection = self._connection
        wait_s = 0.01
        while not self._closing.is_set():
            if connection is None:
                try:
                    connection = self._connect()
                except Exception:  # not there yet, or a failed handshake
                    self._closing.wait(wait_s)
                    wait_s = min(wait_s * 2, _RECONNECT_MAX_WAIT)
                    continue
                with self._lock:
                    if self._closing.is_set():
                        connection.close()
                        return
                    self._connection = connection
                wait_s = 0.01
            self._read(connection)
            with contextlib.suppress(OSError):
                connection.close()
            connection = None

    def _read(self, connection: Connection) -> None:
        """Settle each caller's future from the answers, until the connection ends: then,
        whatever ended it (EOF, a reset, an answer that does not decode), every caller
        still waiting on it hears so."""
        try:
            # EOF, a reset, or an answer that does not decode: the connection is done with,
            # and the reader connects anew.
            with contextlib.suppress(Exception):
                while True:
                    answers: list[tuple[int, bool, object]] = connection.recv()
                    with self._lock:
                        replies = [(self._waiting.pop(n, None), ok, v) for n, ok, v in answers]
                    for reply, ok, value in replies:
                        if reply is None or not reply.set_running_or_notify_cancel():
                            continue
                        if ok:
                            reply.set_result(value)  # type: ignore[arg-type]
                        else:
                            reply.set_exception(value)  # type: ignore[arg-type]
        finally:
            with self._lock:
                orphaned = self._lost(connection)
            _tell_writer_gone(orphaned)

    def _lost(self, connection: Connection) -> list[Future[LoggedEvent]]:
        """The connection to the writer is gone (caller holds the lock, and settles the
        futures returned once it has let go of it: a future's callbacks run as it settles).
        Its reader wakes (a shut-down socket reads as EOF)."""
        if connection is not self._connection:
            return []  # already lost
        self._connection = None
        shut_down(connection)
        orphaned = list(self._waiting.values())
        self._waiting.clear()
        return orphaned

    def close(self, timeout: float = 30.0) -> None:
        with self._lock:
            self._closing.set()
            orphaned = [] if self._connection is None else self._lost(self._connection)
        _tell_writer_gone(orphaned)
        self._reader.join(timeout)


def _tell_writer_gone(replies: list[Future[LoggedEvent]]) -> None:
    """Whether an envelope sent before the connection went was stored, its receipt would
    have said: sending it again returns the original's receipt if it was (appends are
    idempotent)."""
    for reply in replies:
        if reply.set_running_or_notify_cancel():
            reply.set_exception(
                WriterClosedError(
                    "the ledger's writer stopped before answering; send the envelope "
                    "again (a stored one returns its original receipt)"
                )
            )


def shut_down(connection: Connection) -> None:
    """Shut a connection's socket down (a plain close need not wake a thread blocked
    reading it)."""
    with (
        contextlib.suppress(OSError),
        socket.socket(fileno=os.dup(connection.fileno())) as shared,
    ):
        shared.shutdown(socket.SHUT_RDWR)
