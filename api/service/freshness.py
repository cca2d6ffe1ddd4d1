"""How fresh the read models are when the service reads them: decided here, once per request.

Two ways, one per kind of caller:

- A server (``background=True``) never folds the views on a read: one thread of its own
  does (``projections.folder``), and a read waits, a few seconds at most and writing
  nothing, until the views hold every event the log held when the read began (so a client
  that wrote, then reads, sees its write). A write this process admits wakes the folder.
- A command (the CLI, a script) folds what is new itself before it reads, as it always did.

Either way a request asks once: the faces open ``one_request()`` around a request (the
HTTP server does, in its read-cache middleware) and every service call inside it reuses the
position the first one reached, however many reads it makes.

On a SQLite file a server asks the log for its position only when something was committed
since it last asked (``CommitProbe``: ``PRAGMA data_version``, ~5 µs, where the query of the
log costs ~170). PostgreSQL asks the log every time, as before. The check stays on the thread
the read cache hands it to (``api.server.read_cache.PositionReads``): answered on the event
loop instead, cached answers came faster than the loop let a run record's handler thread
have the interpreter lock (benchmarks/README.md, session 5, readcost).

A store that refuses the fold (full, read-only) leaves the views as they stand: reads are
answered from them rather than refused. A fold that fails otherwise is the ledger's fault
(``ViewsStalledError``) and is what the read answers.
"""

from __future__ import annotations

import copy
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from time import monotonic
from typing import Any, TypeVar

from ledger.application import Ledger
from ledger.errors import StoreError, store_error
from ledger.signing.trust import TrustRoot
from ledger.store.event_store import StoreSession
from projections.fold_pool import shared_database
from projections.folder import ViewsFolder
from projections.runner import ProjectionRunner, RanksBehindError

T = TypeVar("T")
# How long a read waits for the folder before it answers from the views as they stand.
WAIT_S = 5.0
# Writes wake the folder at most this often (``Views.written``).
WRITTEN_EVERY_S = 0.25


def _log() -> Any:
    """The views' logger. structlog is imported when a warning is written: with rich
    installed it loads rich's tracebacks and pygments, which a command's start-up (a read,
    issue 33) would otherwise pay for every time."""
    import structlog  # noqa: PLC0415

    return structlog.get_logger("kernelindex.views")


@dataclass
class _Request:
    """What one request learnt of the views: the position its first read reached."""

    asked: bool = False
    position: int | None = None


_REQUEST: ContextVar[_Request | None] = ContextVar("kernelindex_request_views", default=None)


@contextmanager
def one_request() -> Iterator[None]:
    """Every service read inside this block (this task, and the threads it hands work to)
    shares one freshness check: the first one's."""
    token = _REQUEST.set(_Request())
    try:
        yield
    finally:
        _REQUEST.reset(token)


def known_position(position: int | None) -> None:
    """Record the position a request's views were brought to by its caller (the read cache's
    shared catch-up), so the request's reads ask no more."""
    request = _REQUEST.get()
    if request is not None:
        request.asked, request.position = True, position


class CommitProbe:
    """Whether anything was committed to a SQLite file since the log's position was last
    read, and that position: ``PRAGMA data_version`` on a connection of its own, which
    changes whenever another connection (of any process) commits, and never for this one,
    which never writes.

    Sound because the version and the position are read in one read transaction of this
    connection (one snapshot): the pair is exact, whatever transaction the caller has open,
    and a version that did not change since says the log holds that position still. (A
    database file replaced by a rename under a running server is not seen: this connection
    keeps the old file, as the pool's connections would.)"""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        # Opened as the engine opens its connections, then taken out of its pool for good:
        # closed, never handed back, so its zero busy timeout never reaches a writer.
        fairy = ledger.store.engine.raw_connection()
        fairy.detach()
        held: Any = fairy.dbapi_connection
        held.execute("PRAGMA busy_timeout = 0")
        self._held: Any | None = held
        self._position_sql = ledger.store.last_position_sql
        self._lock = threading.Lock()
        self._seen: tuple[int, int] | None = None  # (data_version, log position read after it)

    @staticmethod
    def of(ledger: Ledger) -> CommitProbe | None:
        """A probe for a ledger on a SQLite file; None for any other database (an in-memory
        SQLite database's connections are each a database of their own, PostgreSQL has no
        such version)."""
        if ledger.store.engine.dialect.name != "sqlite" or shared_database(ledger) is None:
            return None
        return CommitProbe(ledger)

    def _read(self) -> tuple[int, int | None] | None:
        """(data version, log position) read in one snapshot of the held connection; the
        position only when the version moved since the last read (None: not read). None when
        closed, or the file is locked (a rollback-journal database mid-commit: never waited
        for, the log is asked instead)."""
        held = self._held
        if held is None:
            return None
        try:
            held.execute("BEGIN")  # deferred: the snapshot is taken by the first read
            try:
                version = int(held.execute("PRAGMA data_version").fetchone()[0])
                if self._seen is not None and self._seen[0] == version:
                    return version, None
                found = held.execute(self._position_sql).fetchone()[0]
                return version, int(found or 0)
            finally:
                held.execute("ROLLBACK")  # it read only
        except sqlite3.Error:
            if held.in_transaction:
                held.rollback()
            return None

    def position(self) -> int:
        """The log's position now: the one read before if nothing was committed since."""
        with self._lock:
            read = self._read()
            if read is None:
                self._seen = None
                return self._ledger.store.last_position()
            version, position = read
            if position is None:
                assert self._seen is not None
                return self._seen[1]
            self._seen = (version, position)
            return position

    def close(self) -> None:
        with self._lock:
            held, self._held, self._seen = self._held, None, None
            if held is not None:
                held.close()


class Views:
    """The read models of one ledger, as the service reads them."""

    def __init__(self, ledger: Ledger, *, background: bool = False, wait: float = WAIT_S) -> None:
        self.ledger = ledger
        self.runner = ProjectionRunner(ledger)
        self.wait = wait
        self.folder: ViewsFolder | None = None
        self._folder_ledger: Ledger | None = None
        if background:
            # Its own connections where the database allows it: the serving engine's
            # statements are then the reads' own, and a fold never queues behind them.
            url = shared_database(ledger)
            if url is not None:
                self._folder_ledger = Ledger(
                    url, TrustRoot.from_json(ledger.trust_root.to_json()), read_only=True
                )
            self.folder = ViewsFolder(ProjectionRunner(self._folder_ledger or ledger))
        self._inline = threading.Lock()
        self._written_poke = -WRITTEN_EVERY_S  # when a write last woke the folder
        # A server's cheap answer to "was anything committed since?" (SQLite files only).
        self._probe = CommitProbe.of(ledger) if background else None

    # -------------------------------------------------------------- the folder

    def start(self) -> None:
        if self.folder is not None and not self.folder.running:
            self.folder.start()

    def stop(self) -> None:
        try:
            if self.folder is not None:
                self.folder.stop()
            if self._folder_ledger is not None:
                self._folder_ledger.close()
        finally:  # the probe's connection is closed whatever the folder did
            if self._probe is not None:
                self._probe.close()

    def written(self) -> None:
        """This process admitted a write: fold it soon rather than at the next idle round.
        At most one attempt per ``WRITTEN_EVERY_S`` is asked for this way: under a stream of
        writes an attempt per write folded one or two events each, and its fixed cost (a
        transaction, the re-ranking) took about a third of a serving worker's CPU, on the
        thread its requests share the interpreter lock with. A write not folded by the
        attempt it asked for is by the next one, the idle round, or the read that wants it
        (a read asks for its own attempt when the views are behind: ``_waited``)."""
        if self.folder is None:
            return
        now = monotonic()
        if now - self._written_poke >= WRITTEN_EVERY_S:
            self._written_poke = now  # unlocked: two threads racing here poke twice, harmless
            self.folder.poke()

    # -------------------------------------------------------------- the reads

    def fresh(self) -> int | None:
        """The views' position once they hold what the log held when this request began
        (None: they could not be brought there, and are read as they stand); asked once
        per request (``one_request``)."""
        request = _REQUEST.get()
        if request is not None and request.asked:
            return request.position
        position = self.position()
        if request is not None:
            request.asked, request.position = True, position
        return position

    def position(self) -> int | None:
        """``fresh``, asked now whatever the request asked before (the read cache asks it
        once for every request that waits on it)."""
        return self._waited() if self.folder is not None else self._caught_up()

    def read(self, read: Callable[[StoreSession], T]) -> T:
        """``read`` over fresh views, in one snapshot."""
        return self.read_at(read)[1]

    def read_at(self, read: Callable[[StoreSession], T]) -> tuple[int, T]:
        """``read`` over fresh views in one snapshot, and the position it read at.

        A server's read never writes: ranks a fold has still to redo (between the batches
        of a long fold) are waited for, not redone here."""
        self.fresh()
        if self.folder is None:
            return self.runner.snapshot(read)
        for _ in range(3):
            try:
                return self.runner.snapshot(read, rerank=False)
            except RanksBehindError:
                self.folder.after(0, self.wait)  # the fold under way ends by re-ranking
        return self.runner.snapshot(read, rerank=None)  # as they stand: still no write

    def position_in(self, session: StoreSession) -> int:
        """The views' position as a snapshot ``read`` is given reads it: what a memo of
        what the views say keys on (they change only when it moves)."""
        return self.runner.tracking.position(session)

    def _waited(self) -> int | None:
        assert self.folder is not None
        probe = self._probe
        target = probe.position() if probe is not None else self.ledger.store.last_position()
        folded = self.folder.after(target, self.wait)
        if folded is None:
            _log().warning("views_behind", waited_s=self.wait, log_position=target)
            return None
        if folded.error is None:
            return folded.position
        if not _store_refused(folded.error):
            # A copy: the folder's error may be raised by many reads at once.
            raise copy.copy(folded.error) from folded.error
        return None

    def _caught_up(self) -> int | None:
        with self._inline:
            try:
                return self.runner.catch_up().position
            except Exception as exc:
                if not _store_refused(exc):
                    raise
                return None


def _store_refused(error: Exception) -> bool:
    """Whether the store refused the fold (full, read-only): the views then stand as they
    are and reads go on from them; any other failure is what the read answers."""
    refused = error if isinstance(error, StoreError) else store_error(error)
    if refused is None:
        return False
    _log().warning("views_not_refreshed", code=refused.code, detail=refused.message)
    return True
