"""The ledger's one writer in a process of its own, and the client other processes reach it by.

A writer thread that shares its process with the HTTP handlers shares their interpreter lock:
measured under 32 clients, the group-commit writer waited for the lock about half the time it
was busy, and the handlers waited for it in turn (issue 16). So ``kernelindex serve`` runs the
:class:`~ledger.group_commit.GroupCommitWriter` in a process of its own (``WriterProcess``),
and its HTTP workers hand it envelopes over a Unix socket (``RemoteWriter``):
``multiprocessing.connection``, authenticated with a key only the server's processes hold.
Each caller gets exactly what the in-process writer gives it: the receipt (inclusion proof
included, once the group is committed and sequenced) or the refusal, as the same exception.

The writer process ends when it is asked to (``WriterProcess.stop``: every accepted envelope
is committed or refused first) or when the process that started it is gone (its end of a
pipe closes), so a server killed outright leaves no writer behind.
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
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import Future
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path
from typing import Any

from domain.errors import DomainError
from ledger.errors import StoreError, store_error
from ledger.group_commit import GroupCommitWriter, WriterClosedError
from ledger.long_lived import freeze_long_lived
from ledger.receipt import Receipt

__all__ = ["ADDRESS_ENV", "KEY_ENV", "RemoteWriter", "WriterProcess"]

# How a server's worker processes find the writer: its socket and the key to it (hex).
ADDRESS_ENV = "KERNELINDEX_WRITER_ADDRESS"
KEY_ENV = "KERNELINDEX_WRITER_KEY"
_START_TIMEOUT = 120.0


def _answer(outcome: Future[Receipt]) -> tuple[bool, object]:
    """What goes back for one envelope: its receipt, or the refusal. A failure that is not
    the ledger's word (a bug, a store failure it did not name) is named here, as the store
    failure it is: the worker answers it as any refused write, and nothing was stored."""
    error = outcome.exception()
    if error is None:
        return True, outcome.result()
    if isinstance(error, DomainError):
        return False, error
    return False, store_error(error) or StoreError(
        f"the ledger's writer failed ({type(error).__name__}); nothing of this write was stored"
    )


class _Session:
    """One worker's connection: requests read on one thread, answers sent from another, so
    the writer thread never waits on a socket."""

    def __init__(self, connection: Connection, writer: GroupCommitWriter) -> None:
        self.connection = connection
        self.writer = writer
        self.outbox: queue.SimpleQueue[tuple[int, Future[Receipt]] | None] = queue.SimpleQueue()

    def serve(self) -> None:
        sender = threading.Thread(target=self._send, daemon=True)
        sender.start()
        try:
            while True:
                number, envelope = self.connection.recv()
                try:
                    outcome = self.writer.submit(envelope)
                except DomainError as exc:  # the writer is closing
                    outcome = Future()
                    outcome.set_exception(exc)
                outcome.add_done_callback(self._answer_to(number))
        except (EOFError, OSError):
            pass  # the worker went away: what it sent is still committed or refused
        finally:
            self.outbox.put(None)
            sender.join()
            self.connection.close()

    def _answer_to(self, number: int) -> Callable[[Future[Receipt]], None]:
        def answered(outcome: Future[Receipt]) -> None:
            self.outbox.put((number, outcome))

        return answered

    def _send(self) -> None:
        """Answers go back a batch at a time: every answer ready when the sender wakes (a
        group's receipts settle together) in one message, one write and one wake-up of the
        worker's reader instead of one each."""
        ending = False
        while not ending:
            batch: list[tuple[int, bool, object]] = []
            item = self.outbox.get()
            while True:
                if item is None:
                    ending = True
                    break
                number, outcome = item
                batch.append((number, *_answer(outcome)))
                try:
                    item = self.outbox.get_nowait()
                except queue.Empty:
                    break
            if batch:
                with contextlib.suppress(OSError):
                    self.connection.send(batch)


def _serve_writer(home: str, db_url: str, address: str, key: bytes, parent: Connection) -> None:
    """The writer process: the ledger opened to write, its group-commit writer, and a
    listener for the workers; until the parent says stop, or is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C reaches the parent's stop
    from ledger.home import LedgerHome  # noqa: PLC0415 - the child imports what it runs

    ledger = LedgerHome.at(Path(home), db_url).open()
    writer = GroupCommitWriter(ledger)
    listener = Listener(address, family="AF_UNIX", authkey=key)

    def accept() -> None:
        while True:
            try:
                connection = listener.accept()
            except OSError:
                return  # closed: the writer is stopping
            except Exception:  # noqa: S112 - a client that failed the handshake: the next
                continue
            session = _Session(connection, writer)
            threading.Thread(target=session.serve, daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    freeze_long_lived()
    parent.send("ready")
    with contextlib.suppress(EOFError, OSError):
        parent.recv()  # "stop", or EOF when the parent died
    listener.close()
    writer.close()  # every accepted envelope committed or refused, and answered
    ledger.close()
    parent.close()


class WriterProcess:
    """The writer process of a server over one ledger home: ``start()`` before the workers,
    ``stop()`` after them; ``env`` is what the workers need to reach it."""

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

    @property
    def env(self) -> dict[str, str]:
        return {ADDRESS_ENV: self.address, KEY_ENV: self.key.hex()}

    def start(self) -> WriterProcess:
        ours, theirs = self._context.Pipe()
        self._process = self._context.Process(
            target=_serve_writer,
            args=(str(self.home), self.db_url, self.address, self.key, theirs),
            name="kernelindex-writer",
            daemon=False,
        )
        self._process.start()
        theirs.close()
        self._pipe = ours
        if not ours.poll(_START_TIMEOUT) or ours.recv() != "ready":
            self.stop()
            raise StoreError("the ledger's writer process did not start")
        return self

    @property
    def pid(self) -> int | None:
        return None if self._process is None else int(self._process.pid)

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.is_alive()

    def stop(self, timeout: float = 60.0) -> None:
        """Finish every accepted envelope, then end the writer process."""
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
        shutil.rmtree(self._folder, ignore_errors=True)


class RemoteWriter:
    """A worker's handle on the writer process: ``submit`` and ``append`` as
    :class:`~ledger.group_commit.GroupCommitWriter` has them. One connection; answers are
    read on a thread of their own and settle each caller's future."""

    def __init__(self, address: str, key: bytes) -> None:
        self._connection = Client(address, family="AF_UNIX", authkey=key)
        self._numbers = itertools.count()
        self._waiting: dict[int, Future[Receipt]] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._reader = threading.Thread(target=self._read, name="kernelindex-writer-client")
        self._reader.daemon = True
        self._reader.start()

    @classmethod
    def from_env(cls) -> RemoteWriter | None:
        """The writer the environment names (a server's worker), if any."""
        address = os.environ.get(ADDRESS_ENV)
        key = os.environ.get(KEY_ENV)
        return cls(address, bytes.fromhex(key)) if address and key else None

    def append(self, envelope: object) -> Receipt:
        return self.submit(envelope).result()

    def submit(self, envelope: object) -> Future[Receipt]:
        reply: Future[Receipt] = Future()
        with self._lock:
            if self._closed:
                raise WriterClosedError("the ledger's writer is not running; try again shortly")
            number = next(self._numbers)
            self._waiting[number] = reply
            try:
                self._connection.send((number, envelope))
            except OSError:
                self._waiting.pop(number, None)
                self._fail_all()
                raise WriterClosedError(
                    "the ledger's writer is not running; try again shortly"
                ) from None
        return reply

    def _read(self) -> None:
        try:
            while True:
                answers: list[tuple[int, bool, object]] = self._connection.recv()
                with self._lock:
                    replies = [(self._waiting.pop(n, None), ok, v) for n, ok, v in answers]
                for reply, ok, value in replies:
                    if reply is None or not reply.set_running_or_notify_cancel():
                        continue
                    if ok:
                        reply.set_result(value)  # type: ignore[arg-type]
                    else:
                        reply.set_exception(value)  # type: ignore[arg-type]
        except (EOFError, OSError):
            with self._lock:
                self._fail_all()

    def _fail_all(self) -> None:
        """The writer is gone (caller holds the lock): every caller still waiting hears so.
        Whether an envelope sent before it went was stored, its receipt would have said:
        sending it again returns the original's receipt if it was (appends are idempotent)."""
        self._closed = True
        for reply in self._waiting.values():
            if reply.set_running_or_notify_cancel():
                reply.set_exception(
                    WriterClosedError(
                        "the ledger's writer stopped before answering; send the envelope "
                        "again (a stored one returns its original receipt)"
                    )
                )
        self._waiting.clear()

    def close(self, timeout: float = 30.0) -> None:
        with self._lock:
            self._closed = True
        # Shut the socket down (a plain close need not wake a thread blocked reading it).
        with (
            contextlib.suppress(OSError),
            socket.fromfd(self._connection.fileno(), socket.AF_UNIX, socket.SOCK_STREAM) as shared,
        ):
            shared.shutdown(socket.SHUT_RDWR)
        self._reader.join(timeout)
        with contextlib.suppress(OSError):
            self._connection.close()
