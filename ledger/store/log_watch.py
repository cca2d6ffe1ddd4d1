"""What a process last saw of the log, so caches keyed by versions or sizes notice a
database that went back."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from ledger.store.event_store import StoreSession

if TYPE_CHECKING:
    from ledger.store.transparency_log import TransparencyLog

# A log's head as a process saw it: its size and its last leaf's hash (None when empty).
LogHead = tuple[int, bytes | None]


class LogWatch:
    """The newest head of the log a cache was filled under. Version numbers and tree sizes
    come back under other content when the database goes back (a backup restored, a
    failover to a standby that lacked the last commits), so whatever a process caches by
    them asks this first, and is dropped when the log no longer holds what it had seen.
    ``generation`` counts the times it went back: a cache filled by a reader that started
    before one must not keep what it read (another reader may have dropped it meanwhile)."""

    def __init__(self, tlog: TransparencyLog) -> None:
        self._tlog = tlog
        self.seen: LogHead = (0, None)
        self.generation = 0
        self._lock = threading.Lock()

    def still_holds(self, session: StoreSession) -> bool:
        """Whether the log, read now in ``session``, still holds the newest head seen; the
        head read becomes the one seen. One primary-key lookup (two if it grew)."""
        seen = self.seen
        now = self._tlog.head(session)
        holds = self._tlog.extends(session, now, seen)
        with self._lock:
            if not holds:
                self.generation += 1
            # Threads may race: the larger head wins unless the log went back.
            if not holds or now[0] >= self.seen[0]:
                self.seen = now
        return holds

    def committed(self, head: LogHead) -> None:
        """This process committed the log up to ``head``: it is the newest seen."""
        with self._lock:
            self.seen = head
