"""The log asks its witnesses to cosign each new checkpoint, in the background of the process
that writes, never inside a commit.

Every commit signs the tree it grew in its own transaction (``TransparencyLog.sequence``),
and its receipts carry inclusion proofs against that log-signed checkpoint at once. After
the commit, the ledger *pokes* this loop: its thread reads the newest stored checkpoint and
offers that one checkpoint to every witness at once (``ledger.witness.client``: ``old
<size>``, the consistency proof, the note), so that the witnesses' cosignatures fall on the
same sizes and a quorum can form; each ``cosignature/v1`` line that verifies under its
witness's configured key is stored as it arrives, in ``kernelindex_log_cosignatures``
(``ledger.store.cosignatures``). Readers then serve the cosigned checkpoint: the log's note
with those lines appended.

Timing (what ``docs/witnesses.md`` states): a round starts as soon as a commit pokes it, or
every ``poll`` seconds for commits made by other processes, and takes one request to each
witness; commits made meanwhile are covered by the next round, which offers the newest
checkpoint. A witness that is down or refuses costs only its own cosignature: it is left out
of the rounds for a pause that doubles from ``retry`` up to ``max_backoff`` seconds, then
offered the newest checkpoint again, and the other witnesses go on. Nothing here holds a lock
a writer waits for but the short transaction that stores a cosignature.

Alarms (a witness that has cosigned a tree larger than this log's; one that holds another
tree at the size it last cosigned: a split view) are logged at ERROR by the client and kept
in :meth:`Witnessing.status`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx

from ledger.store import cosignatures
from ledger.store.signed_checkpoints import SignedCheckpoint
from ledger.store.transparency_log import TransparencyLog
from ledger.witness.client import WitnessClient, WitnessEndpoint, WitnessOutcome

__all__ = [
    "DEFAULT_POLL_S",
    "DEFAULT_TIMEOUT_S",
    "WitnessState",
    "Witnessing",
]

DEFAULT_TIMEOUT_S = 1.0  # per request: a slow witness must not hold its thread long
DEFAULT_POLL_S = 1.0  # how often a thread looks for commits made by other processes
DEFAULT_RETRY_S = 1.0
DEFAULT_MAX_BACKOFF_S = 30.0

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WitnessState:
    """What one witness last did, as this process saw it."""

    name: str
    url: str
    cosigned_size: int  # the largest size it cosigned that this ledger holds
    outcome: str | None  # the last offer's outcome (None: not asked yet)
    detail: str
    alarm: bool
    failures: int  # offers in a row that got no cosignature


class _Loop:
    """One witness: its client, what it has cosigned, and its thread."""

    def __init__(self, owner: Witnessing, endpoint: WitnessEndpoint, known: int) -> None:
        self.owner = owner
        self.endpoint = endpoint
        self.client = WitnessClient(
            [endpoint],
            timeout=owner.timeout,
            attempts=owner.attempts,
            backoff=owner.timeout / 10,
            http=owner.http,
            sizes={endpoint.name: known},
        )
        self.cosigned = known
        self.last: WitnessOutcome | None = None
        self.alarmed: WitnessOutcome | None = None
        self.failures = 0
        self.not_before = 0.0  # monotonic time before which a failing witness is not asked
        self.offering = threading.Lock()

    def state(self) -> WitnessState:
        last = self.alarmed or self.last
        return WitnessState(
            self.endpoint.name,
            self.endpoint.url,
            self.cosigned,
            None if last is None else last.outcome,
            "" if last is None else last.detail,
            self.alarmed is not None,
            self.failures,
        )

    def due(self, size: int, now: float) -> bool:
        return self.cosigned < size and now >= self.not_before

    def offer(self, target: SignedCheckpoint) -> WitnessOutcome | None:
        """Offer ``target`` unless this witness has cosigned it (or a later one); store the
        cosignature it returns. None when there was nothing to offer."""
        with self.offering:
            if target.size == 0 or target.size <= self.cosigned:
                return None
            tlog = self.owner.tlog
            self.client.log_size(target.size)
            result = self.client.cosign(target.note, self.owner.proof)
            (outcome,) = result.outcomes
            if outcome.cosignature is not None:
                with tlog.store.transaction(commit=True) as session:
                    dialect = tlog.store.engine.dialect.name
                    cosignatures.record(session, dialect, target.size, [outcome.cosignature])
                self.cosigned = target.size
            elif outcome.outcome == "superseded" and outcome.witness_size is not None:
                # Another process of this log had it cosign a later size (stored there).
                self.cosigned = max(self.cosigned, outcome.witness_size)
            self.last = outcome
            if outcome.alarm:
                self.alarmed = outcome
            self._pace(outcome)
            return outcome

    def _pace(self, outcome: WitnessOutcome) -> None:
        if outcome.outcome in ("cosigned", "superseded"):
            self.failures, self.not_before = 0, 0.0
            return
        self.failures += 1
        pause = min(self.owner.max_backoff, self.owner.retry * 2 ** (self.failures - 1))
        self.not_before = time.monotonic() + pause


class Witnessing:
    """A ledger's witnesses, asked in the background (``start``) or at once (``round``)."""

    def __init__(
        self,
        tlog: TransparencyLog,
        witnesses: Sequence[WitnessEndpoint],
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        attempts: int = 2,
        poll: float = DEFAULT_POLL_S,
        retry: float = DEFAULT_RETRY_S,
        max_backoff: float = DEFAULT_MAX_BACKOFF_S,
    ) -> None:
        names = [w.name for w in witnesses]
        if len(set(names)) != len(names):
            raise ValueError("two witnesses have the same key name")
        self.tlog = tlog
        self.timeout, self.attempts = timeout, attempts
        self.poll, self.retry, self.max_backoff = poll, retry, max_backoff
        self.stopping = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._rounds = threading.Lock()
        # One connection pool for every witness: keep-alive, as tlog-witness asks.
        self.http = httpx.Client(timeout=timeout)
        with tlog.store.transaction(commit=False) as session:
            known = cosignatures.newest_by_witness(session)
        self._loops = [
            _Loop(self, w, known.get((w.name, w.key.key_id.hex()), 0)) for w in witnesses
        ]
        self._pool = ThreadPoolExecutor(max(1, len(self._loops)), thread_name_prefix="witness")

    @property
    def witnesses(self) -> tuple[WitnessEndpoint, ...]:
        return tuple(loop.endpoint for loop in self._loops)

    def proof(self, old: int, new: int) -> list[bytes]:
        with self.tlog.store.transaction(commit=False) as session:
            return self.tlog.consistency(session, old, new)

    def start(self) -> Witnessing:
        """The background thread: a round at each poke, and every ``poll`` seconds."""
        if self._thread is None and self._loops:
            self._thread = threading.Thread(target=self._run, name="witnessing", daemon=True)
            self._thread.start()
        return self

    def poke(self) -> None:
        """A commit grew the log: the next round starts now (never blocks)."""
        self._wake.set()

    def _run(self) -> None:
        while not self.stopping.is_set():
            self._wake.wait(self._wait_s())
            self._wake.clear()
            if self.stopping.is_set():
                return
            try:
                self.round(respect_backoff=True)
            except Exception:  # the loop outlives a database or witness failure
                _log.exception("witnessing: a round failed; the next one tries again")
                self.stopping.wait(self.retry)

    def _wait_s(self) -> float:
        """Until the next poll, or a backing-off witness's next try if that comes first."""
        now = time.monotonic()
        waiting = [loop.not_before - now for loop in self._loops if loop.not_before > now]
        return max(0.0, min([self.poll, *waiting]))

    def round(self, *, respect_backoff: bool = False) -> list[WitnessOutcome | None]:
        """Offer the newest checkpoint to every witness that has not cosigned it, in
        parallel, and wait for their answers (each bounded by the timeout and retries).
        ``respect_backoff``: leave out the witnesses pausing after a failure (the
        background's rounds); a round asked for at once asks them all."""
        with self._rounds:
            target = self.tlog.checkpoint()
            now = time.monotonic()
            due = [
                loop
                for loop in self._loops
                if loop.due(target.size, now if respect_backoff else float("inf"))
            ]
            return list(self._pool.map(lambda loop: loop.offer(target), due))

    def status(self) -> list[WitnessState]:
        return [loop.state() for loop in self._loops]

    def wait_for(self, size: int, quorum: int, timeout: float) -> bool:
        """Whether ``quorum`` witnesses have cosigned a size of at least ``size`` within
        ``timeout`` seconds (for callers that want the cosigned checkpoint before going on:
        the tests and the benchmark)."""
        return _until(lambda: sum(loop.cosigned >= size for loop in self._loops) >= quorum, timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Stop the thread (a round in flight ends within its requests' timeouts)."""
        self.stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self._pool.shutdown(wait=True)
        for loop in self._loops:
            loop.client.close()
        self.http.close()


def _until(done: Callable[[], bool], timeout: float, step: float = 0.005) -> bool:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(step)
    return True
