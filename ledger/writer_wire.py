"""The writer process's wire: dialling it, listening, reading and answering each worker."""

from __future__ import annotations

import contextlib
import os
import queue
import socket
import struct
import tempfile
import threading
import time
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge

from ledger.checked_wire import decode_request
from ledger.errors import StoreError
from ledger.signing.dsse import MAX_ENVELOPE_BYTES

# The largest request a worker may send: an envelope at its limit, pickled with its parsed
# statement and a refusal beside it (each at most the envelope's size), with room to spare.
MAX_REQUEST_BYTES = 4 * MAX_ENVELOPE_BYTES

__all__ = [
    "ADDRESS_ENV",
    "HANDSHAKE_TIMEOUT",
    "KEY_ENV",
    "SEND_TIMEOUT",
    "BrokenFrameError",
    "HandshakeFailedError",
    "Inbox",
    "Listener",
    "Worker",
    "dial",
    "parse_request",
    "set_connection_timeouts",
    "shut_down",
]

# How a server's worker processes find the writer: its socket and the key to it (hex).
ADDRESS_ENV = "KERNELINDEX_WRITER_ADDRESS"
KEY_ENV = "KERNELINDEX_WRITER_KEY"
# Bytes taken from a worker's socket per read.
CHUNK = 1 << 16
# A handshake (each side's challenge) is bounded the same way: a peer that stops midway is
# dropped, not waited for by every later connection.
HANDSHAKE_TIMEOUT = 5.0
# A send that cannot go on for this long (the other side reads nothing) gives up: the
# connection is shut down, and both sides treat it as lost (a worker's callers are told to
# send again, and it connects anew).
SEND_TIMEOUT = 30.0


def _set_timeouts(sock: socket.socket, receive_s: float, send_s: float) -> None:
    """The socket's own read and write time limits (0: none). Options of the socket, so
    they hold for every descriptor of it, and a blocking read or write ends with an error."""
    for option, seconds in ((socket.SO_RCVTIMEO, receive_s), (socket.SO_SNDTIMEO, send_s)):
        whole = int(seconds)
        sock.setsockopt(
            socket.SOL_SOCKET, option, struct.pack("ll", whole, int((seconds - whole) * 1e6))
        )


def set_connection_timeouts(connection: Connection, receive_s: float, send_s: float) -> None:
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
        set_connection_timeouts(connection, 0, SEND_TIMEOUT)
    except BaseException:
        connection.close()
        raise
    return connection


class HandshakeFailedError(Exception):
    """One connecting peer failed its handshake (or its socket's set-up): that peer's."""


class Listener:
    """``multiprocessing.connection.Listener`` for the workers, each handshake bounded in
    time (one worker stopped midway through its handshake holds up no later one). ``accept``
    raises ``HandshakeFailedError`` for a peer that failed, anything else for the
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
            raise HandshakeFailedError(str(exc)) from exc
        except BaseException:
            sock.close()
            raise
        connection = Connection(sock.detach())
        try:
            deliver_challenge(connection, self._key)
            answer_challenge(connection, self._key)
        except Exception as exc:
            connection.close()
            raise HandshakeFailedError(str(exc)) from exc
        except BaseException:  # an interpreter exit: the socket closed all the same
            connection.close()
            raise
        return connection

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked accepting
        self._socket.close()


class BrokenFrameError(Exception):
    """A worker sent what multiprocessing's framing cannot be: a negative length."""


class Inbox:
    """A worker's requests as their bytes arrive, read without blocking and cut into whole
    messages by ``multiprocessing.connection``'s framing (a 4-byte big-endian length, or -1
    and an 8-byte one, then the body: ``ledger.checked_wire``). ``Connection.recv`` would
    wait for the rest of a message begun, and a worker that trickles one byte at a time
    would hold the serving thread, and every group, for as long as it liked; here an
    unfinished message only has a clock (``begun``), and its worker is cut off when that
    runs out."""

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
                chunk = self._socket.recv(CHUNK, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                break
            if not chunk:
                self._cut()
                return False
            self._buffer += chunk
            if len(chunk) < CHUNK:
                break
        self._cut()
        return True

    def overdue(self, now: float, limit_s: float) -> bool:
        """Whether the unfinished message was begun more than ``limit_s`` ago."""
        return self.begun is not None and now - self.begun > limit_s

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
                raise BrokenFrameError(f"a frame of {size} bytes")
            if size > MAX_REQUEST_BYTES:
                # Refused from its header: a worker's frame is never buffered past what
                # the largest envelope it may send can take (an attack review filled 1 GiB).
                raise BrokenFrameError(f"a frame of {size} bytes (at most {MAX_REQUEST_BYTES})")
            if len(buffer) - taken < head + size:
                break
            body = bytes(buffer[taken + head : taken + head + size])
            self.messages.append(decode_request(body))
            taken += head + size
        if taken:
            del buffer[:taken]
            self.begun = None
        if buffer and self.begun is None:
            self.begun = time.monotonic()


class Worker:
    """One worker's connection: read by the serving thread, answered by a thread of its own,
    so a worker slow to read its answers holds up nobody else's group."""

    def __init__(self, connection: Connection, receive_s: float) -> None:
        self.connection = connection
        set_connection_timeouts(connection, receive_s, SEND_TIMEOUT)
        self.inbox = Inbox(connection)
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


def parse_request(message: object) -> tuple[int, object] | None:
    """A worker's message as a request: its number and its envelope (None: not one)."""
    if not isinstance(message, tuple) or len(message) != 2:
        return None
    number, envelope = message
    try:
        return int(number), envelope
    except (TypeError, ValueError, OverflowError):
        return None


def shut_down(connection: Connection) -> None:
    """Shut a connection's socket down (a plain close need not wake a thread blocked
    reading it)."""
    with (
        contextlib.suppress(OSError),
        socket.socket(fileno=os.dup(connection.fileno())) as shared,
    ):
        shared.shutdown(socket.SHUT_RDWR)


# A Unix socket's path is at most 107 bytes on Linux (sun_path); the folder holds
# "kernelindex-writer-XXXXXXXX/writer.sock" (39 bytes) under it.
_SOCKET_PATH_MAX = 107
_SOCKET_TAIL = len("/kernelindex-writer-XXXXXXXX/writer.sock")
# mkdtemp makes a private (0700) folder with an unguessable name under it.
_SHORT_TEMP = "/tmp"  # noqa: S108


def socket_folder(temp: str | None = None) -> str:
    """Where the writer's socket folder goes: the temporary directory, unless its path is
    too long for a socket (a deep TMPDIR, as test runners and CI give), then ``/tmp``."""
    temp = temp if temp is not None else tempfile.gettempdir()
    if len(os.fsencode(temp)) + _SOCKET_TAIL <= _SOCKET_PATH_MAX:
        return temp
    if os.access(_SHORT_TEMP, os.W_OK | os.X_OK):
        return _SHORT_TEMP
    raise StoreError(
        f"the temporary directory {temp!r} is too long a path for the writer's socket "
        "and /tmp is not writable: set TMPDIR to a shorter writable folder"
    )
