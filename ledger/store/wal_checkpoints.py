"""SQLite's WAL checkpoints for a writing ledger, on a thread of their own.

In WAL mode a commit appends the pages it changed to the ``-wal`` file and syncs it
(``synchronous=FULL``): that sync is what makes the commit durable, and it stays in the
commit. Copying those pages back into the database file (a checkpoint) is housekeeping:
SQLite does it inside whichever COMMIT leaves the WAL past 1,000 pages
(``wal_autocheckpoint``), on the committing thread, which then reads every page of the WAL,
writes it to the database file and syncs that too: ~7-9 µs of the writer's thread-CPU per
ingestion in groups of 32 (issue 36, benchmarks/README.md "commit").

Here a writing ledger's commits tell a thread of this module how much they wrote, and about
every 600 WAL pages it runs a PASSIVE checkpoint on its own connection (one that takes no
lock a writer waits for: it copies what it can and leaves the rest), with the GIL released
while SQLite works. The WAL is then fully copied well before it reaches 1,000 pages, and the
next write transaction starts it again from its beginning, so the commits' own checkpoint
rarely has anything to do. Nothing else changes: no pragma is set, every commit is synced as
before, and where this thread is missing (a process forked from one that had it, a thread
that stopped on an error) or falls behind, SQLite's own checkpoint at 1,000 pages takes over
as it always did. The CPU is moved off the committing thread, not saved.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from sqlalchemy.engine import Engine

_log = logging.getLogger(__name__)

# About 600 WAL pages: an ingestion group of 32 writes ~95 (its events, their fold fields,
# the two event indexes' pages its random ids touch, leaves and nodes); a lone small event
# ~14 (13.5 frames a commit at 10^3 events, 14.3 at 10^5: benchmarks/README.md, session 4
# "growth"; at 96 commits SQLite's own 1,000-page checkpoint ran first, on the committing
# thread). Under SQLite's own 1,000 by a group or more, so the commits' own checkpoint rarely
# starts: a checkpoint every ~6 groups or ~40 lone commits.
_EVENTS = 192
_COMMITS = 40


class WalCheckpoints:
    """Background PASSIVE checkpoints of one SQLite database file (module docstring)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._events = self._commits = 0
        self.done = 0  # checkpoints run (tests read it)

    def committed(self, events: int) -> None:
        """A commit of ``events`` events went through: wake the thread when the WAL has
        grown by about 600 pages since its last checkpoint."""
        with self._lock:
            if self._stopping:
                return
            if self._pid != os.getpid():
                # First commit, or a process forked from the one that had it. Housekeeping
                # never fails a commit: with no thread, SQLite's own checkpoints go on.
                try:
                    self._start()
                except Exception:
                    _log.warning("no thread for background WAL checkpoints", exc_info=True)
                    self._stopping = True
                    return
            self._events += events
            self._commits += 1
            if self._events >= _EVENTS or self._commits >= _COMMITS:
                self._events = self._commits = 0
                self._wake.set()

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            self._stopping = True
            thread, owned = self._thread, self._pid == os.getpid()
        self._wake.set()
        # Not from the thread itself: a ledger dropped without close() is closed by the
        # collector, which can run on any thread, this one included; it ends on its own.
        if thread is not None and owned and thread is not threading.current_thread():
            thread.join(timeout)

    def _start(self) -> None:
        self._pid = os.getpid()
        self._wake = threading.Event()
        thread = threading.Thread(target=self._run, name="kernelindex-wal-checkpoints", daemon=True)
        thread.start()
        self._thread = thread  # only a started thread is ever joined

    def _run(self) -> None:
        try:
            connection = self._connect()
        except Exception:
            _log.warning("no connection for background WAL checkpoints", exc_info=True)
            return
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopping:
                    return
                self.checkpoint(connection)
        finally:
            connection.close()

    def checkpoint(self, connection: Any) -> None:
        """One PASSIVE checkpoint; a failure is logged and left to SQLite's own."""
        try:
            connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.done += 1
        except Exception:
            _log.warning("background WAL checkpoint failed", exc_info=True)

    def _connect(self) -> Any:
        """A driver connection of its own, opened as the engine opens its own, in
        autocommit (no transaction held between checkpoints)."""
        dialect = self._engine.dialect
        args, options = dialect.create_connect_args(self._engine.url)
        connection = dialect.connect(*args, **options)
        connection.isolation_level = None
        # A checkpoint syncs the database file before the WAL may be reused: said here, not
        # left to the library's compiled default (this connection skips the engine's hooks).
        connection.execute("PRAGMA synchronous=FULL")
        return connection


def for_engine(engine: Engine, file_database: bool) -> WalCheckpoints | None:
    """Background checkpoints for a writing ledger on a SQLite file; None elsewhere
    (PostgreSQL, or an in-memory database, which has no WAL)."""
    if engine.dialect.name != "sqlite" or not file_database:
        return None
    return WalCheckpoints(engine)
