"""The writer process answers a group only once its COMMIT has returned, and admits the next
group against what that COMMIT left (issue 36: "fsync of group k overlapped with admitting
group k+1 if it is safe"). The serving thread (``ledger.writer_process._Serving``) runs over
a real ledger on each backend, its workers on pipes, with every COMMIT of the serving thread
held at a gate the test opens, or fails, one at a time; requests for the next group arrive
while a COMMIT is held, which is where a writer that overlaps its commit with the next group
would first go wrong. Guards for any such change: no receipt leaves before its group's
COMMIT returned, and nothing admitted against a group whose COMMIT failed is stored."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection, Pipe
from pathlib import Path
from typing import Any, cast

import pytest

from api.demo import build_demo
from domain.errors import DomainError
from domain.statements import Role
from ledger.aggregates import principal_id, run_id
from ledger.application import Ledger
from ledger.home import LedgerHome
from ledger.receipt import Receipt
from ledger.signing.authoring import attestation_envelope, key_registration_envelope
from ledger.signing.dsse import UnknownKeyError
from ledger.signing.keys import SigningKey
from ledger.writer_process import _Serving, _Worker

SEED_NAME = "sol-submission-38823"
WAIT_S = 30.0


class _CommitGate:
    """Every COMMIT the serving thread issues waits here until the test opens it (then it
    runs), or fails it (then it rolls back and raises the driver's own OperationalError,
    committing nothing, as a failing disk would)."""

    def __init__(self, ledger: Ledger) -> None:
        self._dialect: Any = ledger.store.engine.dialect
        self._real = self._dialect.do_commit
        self._held = threading.Semaphore(0)  # one release per COMMIT that reached the gate
        self._verdicts: list[bool] = []  # True: commit; False: fail
        self._opened = threading.Semaphore(0)
        self.returned = 0  # COMMITs that returned (committed)
        self._count = 0
        # ("returned" | "failed", COMMIT number) as each ends; the test adds its own entries.
        self.log: list[tuple[str, int]] = []
        self.serving: int | None = None  # the serving thread's id, once it runs
        # The engine's own dialect object, this instance only: the class stays as it is.
        setattr(self._dialect, "do_commit", self._commit)  # noqa: B010

    def close(self) -> None:
        del self._dialect.do_commit  # the class's own again

    def _commit(self, connection: Any) -> None:
        if threading.get_ident() != self.serving:  # the test's own reads and set-up
            self._real(connection)
            return
        self._held.release()
        if not self._opened.acquire(timeout=WAIT_S):
            raise AssertionError("a COMMIT was held and never opened")
        number, self._count = self._count, self._count + 1
        if not self._verdicts.pop(0):
            # As SQLite does on an I/O error or a full disk in COMMIT: the transaction is
            # rolled back, then the error raised. (A COMMIT that raises and leaves the
            # transaction open is another fault: see benchmarks/README.md, session 5 "pipe".)
            connection.rollback()
            self.log.append(("failed", number))
            raise self._dialect.loaded_dbapi.OperationalError("injected: disk I/O error")
        self._real(connection)
        self.returned += 1
        self.log.append(("returned", number))

    def held(self, timeout: float) -> bool:
        """Whether a COMMIT is waiting at the gate (taking its turn: open it next)."""
        return self._held.acquire(timeout=timeout)

    def open(self, *, fail: bool = False) -> None:
        self._verdicts.append(not fail)
        self._opened.release()


class _NoListener:
    def accept(self) -> Connection:
        time.sleep(3600)
        raise OSError


@pytest.fixture
def demo(db_url: str, tmp_path: Path) -> Iterator[tuple[Ledger, str]]:
    ledger, seed = build_demo(LedgerHome.at(tmp_path / "home", db_url))
    try:
        yield ledger, seed
    finally:
        ledger.close()


class _Writer:
    """A serving thread over ``ledger`` with ``workers`` connections, its COMMITs gated."""

    def __init__(self, ledger: Ledger, workers: int) -> None:
        self.gate = _CommitGate(ledger)
        self._parent, parent_end = Pipe()
        self.serving = _Serving(ledger, cast(Any, _NoListener()), parent_end)
        self.ends: list[Connection] = []
        self._workers: list[_Worker] = []
        for _ in range(workers):
            ours, theirs = Pipe()
            self._workers.append(_Worker(theirs))
            self.serving.workers[theirs] = self._workers[-1]
            self.ends.append(ours)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._started = threading.Event()
        self._thread.start()
        assert self._started.wait(WAIT_S)

    def workers_index(self, worker: _Worker) -> int:
        return self._workers.index(worker)

    def _serve(self) -> None:
        self.gate.serving = threading.get_ident()
        self._started.set()
        self.serving.serve()

    def close(self) -> None:
        self._parent.send("stop")
        self._thread.join(WAIT_S)
        self.serving.close()
        self.gate.close()


def _tree_size(ledger: Ledger) -> int:
    with ledger.store.transaction(commit=False) as session:
        return ledger.tlog.tree_size(session)


def _answer(end: Connection) -> tuple[bool, object]:
    assert end.poll(WAIT_S), "no answer"
    ((number, ok, value),) = end.recv()
    assert number == 0
    return ok, value


def test_no_answer_leaves_before_its_commit_returned_and_the_next_group_sees_it(
    demo: tuple[Ledger, str],
) -> None:
    """A key registered in group k and used by a request that arrived while k's COMMIT was
    held: neither is answered until that COMMIT returned; then both get receipts (the
    second admitted against k's stored state)."""
    ledger, seed = demo
    key = SigningKey.generate()
    writer = _Writer(ledger, workers=2)
    registering, attesting = writer.ends
    try:
        registering.send((0, key_registration_envelope(key.public, [Role.ATTESTER], key)))
        assert writer.gate.held(WAIT_S)
        attesting.send((0, attestation_envelope(seed, SEED_NAME, key, type_="note", body="k+1")))
        time.sleep(0.3)  # room for the serving thread to read it meanwhile
        assert not registering.poll(0.2) and not attesting.poll(0)  # COMMIT still held
        assert writer.gate.returned == 0
        writer.gate.open()
        ok, receipt = _answer(registering)
        assert ok and isinstance(receipt, Receipt) and writer.gate.returned == 1
        assert writer.gate.held(WAIT_S)  # the attestation's own group, after k's COMMIT
        assert not attesting.poll(0.2)
        writer.gate.open()
        ok, second = _answer(attesting)
        assert ok and isinstance(second, Receipt) and second.signer == key.key_id
        assert writer.gate.returned == 2
    finally:
        writer.close()


@pytest.mark.parametrize("failing", [0, 1, 2])
def test_a_failed_commit_stores_nothing_admitted_against_it(
    demo: tuple[Ledger, str], failing: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three groups, each sent while the COMMIT before it is held: a key registered, then two
    attestations signed by it; the ``failing``-th COMMIT fails. That group is refused as the
    store's failure; a later group that needed its key is refused as signed by an unknown
    key (admitted against what is stored, not what the failed group would have left); every
    other group is stored. Every answer leaves after the COMMIT it waited for had returned or
    failed. Sent again, each refused envelope is stored."""
    ledger, seed = demo
    key = SigningKey.generate()
    registration = key_registration_envelope(key.public, [Role.ATTESTER], key)
    time.sleep(0.002)  # signed after the key's registration (issuedAt within its validity)
    envelopes = [registration] + [
        attestation_envelope(seed, SEED_NAME, key, type_="note", body=body)
        for body in ("one", "two")
    ]
    run = run_id(seed)
    before = (_tree_size(ledger), ledger.event_count(run))
    writer = _Writer(ledger, workers=len(envelopes))
    log = writer.gate.log
    real_answer = _Worker.answer

    def answer(worker: _Worker, batch: list[tuple[int, bool, object]]) -> None:
        log.append(("answered", writer.workers_index(worker)))
        real_answer(worker, batch)

    monkeypatch.setattr(_Worker, "answer", answer)
    sent = [False] * len(envelopes)
    outcomes: dict[int, tuple[bool, object]] = {}

    def send(step: int) -> None:
        writer.ends[step].send((0, envelopes[step]))
        sent[step] = True

    try:
        send(0)
        opened = 0
        deadline = time.monotonic() + WAIT_S
        while len(outcomes) < len(envelopes):
            assert time.monotonic() < deadline, "no answer"
            if writer.gate.held(0.01):
                if not all(sent):
                    send(sent.index(False))  # the next group arrives during this COMMIT
                    time.sleep(0.2)  # room for the serving thread to read it meanwhile
                writer.gate.open(fail=opened == failing)
                opened += 1
            for step, end in enumerate(writer.ends):
                if sent[step] and step not in outcomes and end.poll(0):
                    outcomes[step] = _answer(end)
            if not all(sent) and all(step in outcomes for step in range(sent.index(False))):
                send(sent.index(False))  # the groups before it had nothing to commit
        key_stored = failing != 0
        stored = [outcomes[step][0] for step in range(3)]
        assert stored == [step != failing and key_stored for step in range(3)]
        for step, (ok, value) in outcomes.items():
            if ok:
                assert isinstance(value, Receipt)
            elif step == failing:
                assert isinstance(value, DomainError) and not isinstance(value, UnknownKeyError)
            else:
                assert isinstance(value, UnknownKeyError)  # its key's group failed
        # Answers in order, each after the COMMIT it waited for: group k's COMMIT is the
        # k-th, and a group refused at admission waited for the failed one.
        for step in range(3):
            ended = log.index(("returned", step) if stored[step] else ("failed", failing))
            assert log.index(("answered", step)) > ended
        # The log holds what was answered stored, no more (PostgreSQL's positions may skip
        # the failed group's ids: the log's leaves do not).
        assert _tree_size(ledger) == before[0] + sum(stored)
        assert ledger.event_count(run) == before[1] + sum(stored[1:])
        assert (ledger.event_count(principal_id(key.key_id)) > 0) == key_stored
        # Sent again, in order, each refused envelope is stored now.
        for step in range(3):
            if outcomes[step][0]:
                continue
            send(step)
            assert writer.gate.held(WAIT_S)
            writer.gate.open()
            again, receipt = _answer(writer.ends[step])
            assert again and isinstance(receipt, Receipt) and not receipt.duplicate
        assert _tree_size(ledger) == before[0] + 3
        assert ledger.event_count(run) == before[1] + 2
    finally:
        writer.close()
