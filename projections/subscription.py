"""Views that follow the ledger as it is written: eventsourcing's subscription (PostgreSQL's
LISTEN/NOTIFY, which the event store sends on every commit) feeding the runner's fold.

SQLite has no subscriptions: there the views catch up before each read (``ProjectionRunner``).
On PostgreSQL reads still catch up (read-your-writes for the process that wrote), and the
follower keeps the views current between reads, so a reader seldom has anything to fold.

A subscription delivers one event at a time; the follower folds whatever has arrived as one
batch (one transaction, one tracking write), so a burst of commits costs one fold.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, cast

from eventsourcing.persistence import Tracking
from eventsourcing.projection import ApplicationSubscription

from domain.errors import DomainError
from projections.run_views import RUN_TOPICS, RUNNER_NAME
from projections.runner import DEFAULT_BATCH, ProjectionRunner

_ENDED = object()


class SubscriptionUnavailableError(DomainError):
    code = "unavailable"
    status = 503


class ViewsFollower:
    """Folds each committed run event into the views, on a thread of its own."""

    def __init__(
        self, runner: ProjectionRunner, batch: int = DEFAULT_BATCH, idle: float = 0.2
    ) -> None:
        if not runner.ledger.store.postgres:
            raise SubscriptionUnavailableError(
                "following the ledger needs PostgreSQL's LISTEN/NOTIFY; on SQLite the views "
                "catch up before each read"
            )
        self.runner = runner
        self.batch = batch
        self.idle = idle
        self.folded = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._feed: queue.Queue[tuple[Any, Tracking] | object] = queue.Queue(maxsize=4 * batch)
        self._thread = threading.Thread(target=self._run, name="kernelindex-views", daemon=True)

    def start(self) -> ViewsFollower:
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            self.runner.catch_up(self.batch)  # everything stored before the subscription
            start = self.runner.tracking.max_tracking_id(RUNNER_NAME)
            with ApplicationSubscription(self.runner.ledger, gt=start, topics=RUN_TOPICS) as sub:
                reader = threading.Thread(target=self._read, args=(sub,), daemon=True)
                reader.start()
                try:
                    self._fold_until_stopped()
                finally:
                    sub.stop()
                    reader.join(5.0)
        except BaseException as exc:
            self.error = exc

    def _read(self, subscription: ApplicationSubscription[Any]) -> None:
        try:
            for item in subscription:
                self._feed.put(item)
        except BaseException as exc:
            self._feed.put(exc)
        finally:
            self._feed.put(_ENDED)

    def _fold_until_stopped(self) -> None:
        while not self._stop.is_set():
            try:
                first = self._feed.get(timeout=self.idle)
            except queue.Empty:
                continue
            events = self._drain(first)
            if events:
                self.folded += self.runner.fold_delivered(events)

    def _drain(self, first: object) -> list[tuple[Any, Tracking]]:
        """What has arrived, up to a batch (raising what the subscription raised)."""
        events: list[tuple[Any, Tracking]] = []
        item = first
        while True:
            if isinstance(item, BaseException):
                raise item
            if item is _ENDED:
                self._stop.set()
                return events
            events.append(cast(tuple[Any, Tracking], item))
            if len(events) >= self.batch:
                return events
            try:
                item = self._feed.get_nowait()
            except queue.Empty:
                return events
