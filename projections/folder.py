"""The views of a serving process folded on a thread of its own, so that no read folds them.

A server's reads never write: they wait for this folder to bring the views up to the log
position they saw at their start (``ViewsFolder.after``). It folds when asked (a write this
process made, a read that found the views behind) and, between requests, every ``idle``
seconds (what other processes wrote). Each attempt is a whole ``ProjectionRunner.catch_up``:
its batches, and the re-ranking of what they touched, so a read that waited finds no group
waiting to be re-ranked. Several folders (one per worker process) may run on one database:
the runner's lock serialises them, and each folds an event once.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from projections.runner import ProjectionRunner

THREAD_NAME = "kernelindex-views"
IDLE_S = 1.0  # between attempts nobody asked for: what other processes wrote is folded
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Folded:
    """What a fold attempt left: the views' position, and why it failed (None: it folded
    every event the log held when it began)."""

    position: int
    error: Exception | None = None


class ViewsFolder:
    """Folds the log into the views on one thread, when asked and every ``idle`` seconds."""

    def __init__(self, runner: ProjectionRunner, idle: float = IDLE_S) -> None:
        self.runner = runner
        self.idle = idle
        self._changed = threading.Condition()
        self._asked = 1  # attempts asked for: the first, as soon as it starts
        self._answered = 0  # the newest asked-for attempt that has ended
        self._last = Folded(-1)
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)

    def start(self) -> ViewsFolder:
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop between attempts (one under way ends first, up to ``timeout``)."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def poke(self) -> int:
        """Ask for an attempt (one that starts after this call); return its number."""
        with self._changed:
            self._asked += 1
            self._changed.notify_all()
            return self._asked

    def after(self, position: int, timeout: float) -> Folded | None:
        """The views once they hold every event up to ``position``, or the outcome of an
        attempt that began after this call (its error, if it failed); None when neither
        came within ``timeout`` seconds or the folder is not running."""
        deadline = time.monotonic() + timeout
        with self._changed:
            if self._last.error is None and self._last.position >= position:
                return self._last
            self._asked += 1
            asked = self._asked
            self._changed.notify_all()
            while self._answered < asked:
                if self._last.error is None and self._last.position >= position:
                    return self._last  # an attempt under way when asked got there
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return None
                self._changed.wait(left)
            return self._last

    def _run(self) -> None:
        while True:
            with self._changed:
                if self._answered == self._asked and not self._stopping:
                    self._changed.wait(self.idle)
                if self._stopping:
                    return
                asked = self._asked
            outcome = self._attempt()
            with self._changed:
                self._last = outcome
                self._answered = max(self._answered, asked)
                self._changed.notify_all()

    def _attempt(self) -> Folded:
        try:
            return Folded(self.runner.catch_up().position)
        except Exception as exc:  # reads say what it was (ViewsStalledError, a store's refusal)
            if self._last.error is None or type(self._last.error) is not type(exc):
                _log.warning("the views could not be folded: %s", exc)
            return Folded(self._last.position, exc)
