"""Group commit: many concurrent writers, one thread that admits and commits their envelopes.

Each caller blocks until its own envelope is committed (receipt with inclusion proof) or
refused (the DomainError saying why). While one group commits, the next one gathers, so
under load each commit — one transaction, one fsync, one log sequencing pass — carries many
envelopes; an idle ledger commits a lone envelope at once, with no added wait.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

from domain.errors import DomainError
from ledger.application import Ledger
from ledger.errors import store_error
from ledger.logged_event import LoggedEvent

MAX_GROUP = 256
_STOP = object()


class WriterClosedError(DomainError):
    code = "unavailable"
    status = 503


class Writer(Protocol):
    """What takes a process's writes: this module's writer thread, or a handle on the
    writer process (``ledger.remote_writer.RemoteWriter``)."""

    def submit(self, envelope: object) -> Future[LoggedEvent]: ...

    def append(self, envelope: object) -> LoggedEvent: ...

    def close(self, timeout: float = 30.0) -> None: ...


@dataclass
class _Request:
    envelope: object
    reply: Future[LoggedEvent] = field(default_factory=Future)


class GroupCommitWriter:
    def __init__(self, ledger: Ledger, max_group: int = MAX_GROUP) -> None:
        self.ledger = ledger
        self.max_group = max_group
        self._queue: queue.SimpleQueue[_Request | object] = queue.SimpleQueue()
        self._closed = False
        self._closing = threading.Lock()  # no request is queued behind the stop marker
        self._thread = threading.Thread(target=self._run, name="kernelindex-writer", daemon=True)
        self._thread.start()

    def append(self, envelope: object) -> LoggedEvent:
        """Admit one envelope (from any thread); its receipt, or raise why it was refused."""
        return self.submit(envelope).result()

    def submit(self, envelope: object) -> Future[LoggedEvent]:
        """Queue one envelope; the future resolves to its receipt or the refusal. An async
        caller awaits it without holding a thread, so every waiting request joins a group."""
        request = _Request(envelope)
        with self._closing:
            if self._closed:
                raise WriterClosedError("the ledger is shutting down; try again shortly")
            self._queue.put(request)
        return request.reply

    def close(self, timeout: float = 30.0) -> None:
        """Finish every accepted request, then stop the writer thread."""
        with self._closing:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_STOP)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is _STOP:
                return
            group = [first]
            stopping = False
            while len(group) < self.max_group:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stopping = True
                    break
                group.append(item)
            requests = [r for r in group if isinstance(r, _Request)]
            try:
                self._commit(requests)
            except Exception as exc:
                # The writer outlives any failure of a group: were it to die, every later
                # request would wait forever for a reply nobody sends.
                for request in requests:
                    if not request.reply.done():
                        request.reply.set_exception(exc)
            if stopping:
                return

    def _commit(self, group: list[_Request]) -> None:
        # A caller that gave up before its group started (future cancelled: the request was
        # cancelled) is dropped; nothing was acknowledged to it.
        group = [r for r in group if r.reply.set_running_or_notify_cancel()]
        if not group:
            return
        results = commit_group(self.ledger, [r.envelope for r in group])
        for request, result in zip(group, results, strict=True):
            if isinstance(result, BaseException):
                request.reply.set_exception(result)
            else:
                request.reply.set_result(result)


def commit_group(ledger: Ledger, envelopes: list[object]) -> list[LoggedEvent | BaseException]:
    """``append_many`` for a group of callers: each envelope's receipt or refusal. A store
    failure is every caller's answer, as a refusal with a stable code (store-full,
    read-only-store...) when it is the database's: the whole group rolled back, so nothing
    of it was stored. The writer thread and the writer process both settle groups here."""
    try:
        results: list[LoggedEvent | BaseException] = list(ledger.append_many(envelopes))
    except Exception as exc:
        refused = exc if isinstance(exc, DomainError) else store_error(exc)
        return [refused or exc] * len(envelopes)
    return results
