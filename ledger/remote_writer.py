"""A server worker's handle on the writer process: ``RemoteWriter``, and its reconnecting."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import struct
import threading
from concurrent.futures import Future
from multiprocessing.connection import Connection

from ledger.checked_wire import encode_request
from ledger.errors import StoreError
from ledger.group_commit import WriterClosedError
from ledger.logged_event import LoggedEvent
from ledger.writer_wire import ADDRESS_ENV, KEY_ENV, dial, shut_down

__all__ = ["RemoteWriter"]


# How long a worker waits between attempts to reach its writer again, at most.
_RECONNECT_MAX_WAIT = 1.0

# A caller's reply: a thread's (``submit``), or an event loop's (``submit_async``).
_Reply = Future[LoggedEvent] | tuple[asyncio.AbstractEventLoop, asyncio.Future[LoggedEvent]]


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
        self._waiting: dict[int, _Reply] = {}
        # Frames the event loop's callers submitted this turn, sent as one write at its end.
        self._outgoing: list[bytes] = []
        # The loops with a ``_flush`` due (by loop: one closed before its turn ended would
        # otherwise leave every later loop's frames unsent).
        self._flushing: set[asyncio.AbstractEventLoop] = set()
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
                self._outgoing.append(_framed(encode_request(number, envelope)))
                self._send_outgoing(connection)
            except OSError:
                self._waiting.pop(number, None)
                orphaned = self._lost(connection)
            else:
                return reply
        _tell_writer_gone(orphaned)
        raise WriterClosedError("the ledger's writer is not running; try again shortly")

    def submit_async(self, envelope: object) -> asyncio.Future[LoggedEvent]:
        """``submit`` for a caller on the running event loop, without a thread's future
        chained to the loop's: what the loop's callers submit in one turn goes to the writer
        in one write at the turn's end (the same frames, which the writer reads together),
        and each batch of answers wakes the loop once for all its callers (a thread's future
        wakes it once per answer). Raises ``WriterClosedError`` at once while the writer is
        not reached; a write that fails tells each caller waiting to send again."""
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[LoggedEvent] = loop.create_future()
        number = next(self._numbers)  # atomic: a unique number, whoever takes the next
        frame = _framed(encode_request(number, envelope))
        with self._lock:
            if self._connection is None or self._closing.is_set():
                raise WriterClosedError("the ledger's writer is not running; try again shortly")
            self._waiting[number] = (loop, reply)
            self._outgoing.append(frame)
            if loop not in self._flushing:
                self._flushing.add(loop)
                loop.call_soon(self._flush, loop)
        return reply

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        """The end of the loop's turn: what its callers submitted goes as one write."""
        with self._lock:
            self._flushing.discard(loop)
            connection = self._connection
            if connection is None or not self._outgoing:
                return  # sent already (by ``submit``), or lost and its callers told
            try:
                self._send_outgoing(connection)
            except OSError:
                orphaned = self._lost(connection)
            else:
                return
        _tell_writer_gone(orphaned)

    def _send_outgoing(self, connection: Connection) -> None:
        """Every frame waiting, in order, in one write (the caller holds the lock)."""
        data = b"".join(self._outgoing)
        self._outgoing.clear()
        view = memoryview(data)
        while view:  # as ``Connection.send_bytes`` writes: all of it, or an OSError
            view = view[os.write(connection.fileno(), view) :]

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
                    _settle([(r, _outcome(ok, v)) for r, ok, v in replies if r is not None])
        finally:
            with self._lock:
                orphaned = self._lost(connection)
            _tell_writer_gone(orphaned)

    def _lost(self, connection: Connection) -> list[_Reply]:
        """The connection to the writer is gone (caller holds the lock, and settles the
        futures returned once it has let go of it: a future's callbacks run as it settles).
        Its reader wakes (a shut-down socket reads as EOF)."""
        if connection is not self._connection:
            return []  # already lost
        self._connection = None
        shut_down(connection)
        orphaned = list(self._waiting.values())
        self._waiting.clear()
        self._outgoing.clear()  # their callers are told to send again: never sent later
        return orphaned

    def close(self, timeout: float = 30.0) -> None:
        with self._lock:
            self._closing.set()
            orphaned = [] if self._connection is None else self._lost(self._connection)
        _tell_writer_gone(orphaned)
        self._reader.join(timeout)


def _tell_writer_gone(replies: list[_Reply]) -> None:
    """Whether an envelope sent before the connection went was stored, its receipt would
    have said: sending it again returns the original's receipt if it was (appends are
    idempotent)."""
    _settle([(reply, _writer_gone()) for reply in replies])


def _writer_gone() -> WriterClosedError:
    return WriterClosedError(
        "the ledger's writer stopped before answering; send the envelope "
        "again (a stored one returns its original receipt)"
    )


def _framed(body: bytes) -> bytes:
    """``body`` framed as ``Connection.send_bytes`` frames it (what the writer reads)."""
    size = len(body)
    if size > 0x7FFFFFFF:
        return struct.pack("!iQ", -1, size) + body
    return struct.pack("!i", size) + body


def _outcome(ok: bool, value: object) -> LoggedEvent | BaseException:
    """A receipt, or the exception to raise: the caller is answered, never left waiting on
    a bad answer."""
    if ok and isinstance(value, LoggedEvent):
        return value
    if not ok and isinstance(value, BaseException):
        return value
    return StoreError(
        f"the ledger's writer answered neither a receipt nor a refusal ({type(value).__name__})"
    )


def _settle(settled: list[tuple[_Reply, LoggedEvent | BaseException]]) -> None:
    """Each reply's outcome: a thread's future at once; an event loop's futures in one call
    on that loop, once per batch (one wake-up of the loop, not one per caller)."""
    loops: dict[
        asyncio.AbstractEventLoop,
        list[tuple[asyncio.Future[LoggedEvent], LoggedEvent | BaseException]],
    ] = {}
    for reply, outcome in settled:
        if isinstance(reply, tuple):
            loops.setdefault(reply[0], []).append((reply[1], outcome))
        elif reply.set_running_or_notify_cancel():
            if isinstance(outcome, BaseException):
                reply.set_exception(outcome)
            else:
                reply.set_result(outcome)
    for loop, batch in loops.items():
        # A closed loop has no caller left to answer.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle_on_loop, batch)


def _settle_on_loop(
    batch: list[tuple[asyncio.Future[LoggedEvent], LoggedEvent | BaseException]],
) -> None:
    for reply, outcome in batch:
        # Its caller gave up (its request went away): a settled future takes nothing more,
        # and raising here would leave every caller after it in the batch unanswered.
        if reply.done():
            continue
        if isinstance(outcome, BaseException):
            reply.set_exception(outcome)
        else:
            reply.set_result(outcome)
