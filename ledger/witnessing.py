"""The log asks its witnesses to cosign each new checkpoint, in the background of the process
that writes, never inside a commit.

Every commit signs the tree it grew in its own transaction (``TransparencyLog.sequence``),
and its receipts carry inclusion proofs against that log-signed checkpoint at once. After
the commit, the ledger *pokes* this loop: its thread reads the newest stored checkpoint and
offers that one checkpoint to every witness at once (``ledger.witness.client``: ``old
<size>``, the consistency proof, the note), so that the witnesses' cosignatures fall on the
same sizes and a quorum can form; the ``cosignature/v1`` lines that verify under their
witnesses' configured keys are stored together once the round's answers are in, in
``kernelindex_log_cosignatures`` (``ledger.store.cosignatures``). Readers then serve the
cosigned checkpoint: the log's note with those lines appended.

Timing (what ``docs/witnesses.md`` states): a round starts as soon as a commit pokes it
(while commits keep coming during rounds, at most one every ``min_interval`` seconds), or
every ``poll`` seconds for commits made by other processes, and takes one request to each
witness; commits made meanwhile are covered by the next round, which offers the newest
checkpoint. A witness that is down or refuses costs only its own cosignature: it is left
out of the rounds for a pause that doubles from ``retry`` up to ``max_backoff`` seconds, then
offered the newest checkpoint again, and the other witnesses go on. Nothing here holds a
lock a writer waits for but the short transaction that stores a round's cosignatures.

One asker at a time across processes: on PostgreSQL several processes write to one log (every
``kernelindex serve`` worker has its writer thread, and its own witnessing), and each would
offer the same newest checkpoint to every witness, one of them winning and the others getting
409s. A round therefore takes a session advisory lock on a connection of its own (blocking:
rounds of different processes follow one another, each a few requests long), and once it
holds it, learns from the stored cosignatures which witnesses another process has had cosign
the newest checkpoint (or a later one) meanwhile: those are not asked again. Each witness is
then offered each checkpoint once, whichever process committed it, and the requests a witness
gets do not grow with the number of processes. (SQLite has one writing process; a round of
``kernelindex witness sync`` beside it learns the same way what was stored.)

Alarms (a witness that has cosigned a tree larger than this log's; one that holds another
tree at the size it last cosigned: a split view) are logged at ERROR by the client and kept
in :meth:`Witnessing.status`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
from sqlalchemy import Connection, text

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
# While commits keep coming during rounds, a round starts at most this often: one round then
# covers all that came since the last, and the witnesses' requests and the cosignatures'
# commits do not grow with the commit rate (Sunlight sequences once a second; this is ten
# times that). A commit to a quiet log is offered at once.
DEFAULT_MIN_INTERVAL_S = 0.1
# The PostgreSQL advisory lock one round of one process holds ("KIWIT"; the log's is "KILOG").
_ROUND_LOCK_ID = 0x4B49_5749_54

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
        """Offer ``target`` unless this witness has cosigned it (or a later one). None when
        there was nothing to offer. The round stores what the witnesses cosigned."""
        with self.offering:
            if target.size == 0 or target.size <= self.cosigned:
                return None
            self.client.log_size(target.size)
            result = self.client.cosign(target.note, self.owner.proof)
            (outcome,) = result.outcomes
            if outcome.outcome == "superseded" and outcome.witness_size is not None:
                # Another process of this log had it cosign a later size (stored there).
                self.owner.advanced([self], outcome.witness_size)
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
        min_interval: float = DEFAULT_MIN_INTERVAL_S,
    ) -> None:
        names = [w.name for w in witnesses]
        if len(set(names)) != len(names):
            raise ValueError("two witnesses have the same key name")
        self.tlog = tlog
        self.timeout, self.attempts = timeout, attempts
        self.poll, self.retry, self.max_backoff = poll, retry, max_backoff
        self.min_interval = min_interval
        self.stopping = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._rounds = threading.Lock()
        self._advance = threading.Condition()  # a witness's cosigned size moved
        # One connection pool for every witness: keep-alive, as tlog-witness asks.
        self.http = httpx.Client(timeout=timeout)
        with tlog.store.transaction(commit=False) as session:
            known = cosignatures.newest_by_witness(session)
        self._loops = [
            _Loop(self, w, known.get((w.name, w.key.key_id.hex()), 0)) for w in witnesses
        ]
        self._pool = ThreadPoolExecutor(max(1, len(self._loops)), thread_name_prefix="witness")
        self._lock_connection: Connection | None = None  # PostgreSQL: the round lock's

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
        last, busy = float("-inf"), False
        while not self.stopping.is_set():
            self._wake.wait(self._wait_s())
            # Commits that came while the last round was out: the log is busy, and the
            # next round waits for its turn (a lone commit is asked about at once).
            early = last + self.min_interval - time.monotonic()
            if busy and early > 0 and self.stopping.wait(early):
                return
            self._wake.clear()
            if self.stopping.is_set():
                return
            last = time.monotonic()
            try:
                self.round(respect_backoff=True)
            except Exception:  # the loop outlives a database or witness failure
                _log.exception("witnessing: a round failed; the next one tries again")
                self.stopping.wait(self.retry)
            busy = self._wake.is_set()

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
        with self._rounds, self._one_asker():
            target = self.tlog.checkpoint()
            self._learn_stored(target.size)
            now = time.monotonic()
            due = [
                loop
                for loop in self._loops
                if loop.due(target.size, now if respect_backoff else float("inf"))
            ]
            outcomes = list(self._pool.map(lambda loop: loop.offer(target), due))
            cosigned = [
                (loop, o.cosignature)
                for loop, o in zip(due, outcomes, strict=True)
                if o is not None and o.cosignature is not None
            ]
            if cosigned:
                # One transaction (one commit, one fsync) for the round's cosignatures.
                store = self.tlog.store
                with store.transaction(commit=True) as session:
                    found = [c for _, c in cosigned]
                    cosignatures.record(session, store.engine.dialect.name, target.size, found)
                self.advanced([loop for loop, _ in cosigned], target.size)
            return outcomes

    @contextmanager
    def _one_asker(self) -> Iterator[None]:
        """On PostgreSQL, hold the log's round lock (waiting for another process's round);
        a connection that breaks releases it with its session."""
        store = self.tlog.store
        if store.engine.dialect.name != "postgresql":
            yield
            return
        if self._lock_connection is None or self._lock_connection.closed:
            self._lock_connection = store.engine.connect()
        connection = self._lock_connection
        try:
            connection.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _ROUND_LOCK_ID})
            connection.commit()  # no transaction left open: the lock is the session's
        except Exception:
            self._drop_lock_connection()
            raise
        try:
            yield
        finally:
            try:
                connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _ROUND_LOCK_ID})
                connection.commit()
            except Exception:  # closing the session releases it all the same
                self._drop_lock_connection()

    def _drop_lock_connection(self) -> None:
        if self._lock_connection is not None:
            self._lock_connection.invalidate()
            self._lock_connection.close()
            self._lock_connection = None

    def _learn_stored(self, size: int) -> None:
        """The witnesses whose cosignature of ``size`` or later is stored (by another
        process's round, or ``witness sync``): not to be asked again for it."""
        with self.tlog.store.transaction(commit=False) as session:
            stored = cosignatures.newest_from(session, size)
        for loop in self._loops:
            found = stored.get((loop.endpoint.name, loop.endpoint.key.key_id.hex()))
            if found is not None and found > loop.cosigned:
                self.advanced([loop], found)

    def status(self) -> list[WitnessState]:
        return [loop.state() for loop in self._loops]

    def advanced(self, loops: Sequence[_Loop], size: int) -> None:
        """These witnesses have cosigned up to ``size``, stored (wakes ``wait_for``)."""
        with self._advance:
            for loop in loops:
                loop.cosigned = max(loop.cosigned, size)
            self._advance.notify_all()

    def wait_for(self, size: int, quorum: int, timeout: float) -> bool:
        """Whether ``quorum`` witnesses have cosigned a size of at least ``size`` within
        ``timeout`` seconds (for callers that want the cosigned checkpoint before going on:
        the tests and the benchmark)."""
        with self._advance:
            return self._advance.wait_for(
                lambda: sum(loop.cosigned >= size for loop in self._loops) >= quorum, timeout
            )

    def close(self, timeout: float = 5.0) -> None:
        """Stop the thread (a round in flight ends within its requests' timeouts)."""
        self.stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self._pool.shutdown(wait=True)
        # A round still out (waiting on another process's round) keeps its connection until
        # it ends; the engine's disposal closes it then.
        if self._rounds.acquire(timeout=timeout):
            try:
                self._drop_lock_connection()
            finally:
                self._rounds.release()
        for loop in self._loops:
            loop.client.close()
        self.http.close()
