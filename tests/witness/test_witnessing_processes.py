"""Several writers of one PostgreSQL ledger ask the witnesses as one: each checkpoint is
offered to each witness once, whichever process asks (``Witnessing``'s round lock, and the
cosignatures another process stored learned before asking).

Each writer here is a ``Ledger`` with its own engine and connections, as a ``kernelindex
serve`` worker process has: an advisory lock is held by a database session, so two sessions
of one test process contend for it exactly as two processes do."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from domain.statements import Role
from ledger.application import Ledger
from ledger.signing.authoring import key_registration_envelope
from ledger.signing.keys import SigningKey
from ledger.witness.client import WitnessOutcome
from ledger.witnessing import Witnessing
from tests.witness.ledger_witnesses import (
    LocalWitness,
    Operator,
    all_serving,
    follows,
    local_witnesses,
)


@pytest.fixture
def postgres_url(db_url: str) -> str:
    if not db_url.startswith("postgresql"):
        pytest.skip("several writing processes share a log on PostgreSQL only")
    return db_url


@pytest.fixture
def writers(postgres_url: str, tmp_path: Path) -> Iterator[tuple[Operator, list[Ledger]]]:
    operator = Operator.make()
    first = Ledger(postgres_url, operator.root, log_key=operator.log)
    admin = operator.admin
    first.append(key_registration_envelope(admin.public, [Role.ADMIN], admin))
    second = Ledger(postgres_url, operator.root, log_key=operator.log)
    try:
        yield operator, [first, second]
    finally:
        second.close()
        first.close()


def _append(ledger: Ledger, operator: Operator) -> int:
    newcomer = SigningKey.generate()
    ledger.append(key_registration_envelope(newcomer.public, [Role.ATTESTER], operator.admin))
    return ledger.tlog.checkpoint().size


def _rounds_at_once(witnessings: list[Witnessing]) -> list[list[WitnessOutcome | None]]:
    """Each writer's round, started together (a barrier), as two processes' commits poke
    their threads at the same moment."""
    start = threading.Barrier(len(witnessings))
    found: list[list[WitnessOutcome | None]] = [[] for _ in witnessings]

    def one(i: int) -> None:
        start.wait()
        found[i] = witnessings[i].round()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(witnessings))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return found


def test_two_writers_offer_each_checkpoint_to_each_witness_once(
    writers: tuple[Operator, list[Ledger]], tmp_path: Path
) -> None:
    operator, ledgers = writers
    three: list[LocalWitness] = local_witnesses(tmp_path / "witnesses", 3)
    endpoints = [w.endpoint for w in three]
    with all_serving(three, [follows(operator.root)]):
        # Not started: no background thread, only the rounds this test asks for.
        witnessings = [Witnessing(ledger.tlog, endpoints) for ledger in ledgers]
        try:
            _append(ledgers[0], operator)
            size = _append(ledgers[1], operator)
            for attempt in range(3):  # a few tries at the race, each a new checkpoint
                outcomes = [o for r in _rounds_at_once(witnessings) for o in r if o is not None]
                # Three requests in all, one a witness, each cosigning the newest tree: not
                # a 409 (``superseded``) for the writer that came second.
                assert sorted(o.outcome for o in outcomes) == ["cosigned"] * 3, attempt
                assert {o.witness for o in outcomes} == {w.name for w in three}
                assert {w.status()[0].cosigned_size for w in witnessings} == {size}
                size = _append(ledgers[attempt % 2], operator)
            # The size a writer learned from the table is the one its witnesses hold: its
            # next round offers from there (old = size), and is cosigned at once.
            last = witnessings[0].round()
            assert [o and o.outcome for o in last] == ["cosigned"] * 3
            assert witnessings[1].round() == []
        finally:
            for w in witnessings:
                w.close()
