"""Writes wake the server's views folder at most once per ``WRITTEN_EVERY_S`` (issue 36: an
attempt per write cost a third of a serving worker's CPU), and a read right after a burst of
writes still shows every one of them: the read asks for the fold it needs itself."""

from __future__ import annotations

import pytest
from served_app import Served
from test_api_reads import SEED
from test_api_writes import SEED_NAME, check_receipt, register_attester

from api.service import freshness
from ledger.signing.authoring import attestation_envelope
from ledger.signing.keys import SigningKey


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _count_pokes(served: Served, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    folder = served.app.state.service.views.folder
    assert folder is not None  # a server folds its views on a thread of its own
    pokes: list[int] = []
    poke = folder.poke

    def counted() -> int:
        pokes.append(1)
        asked: int = poke()
        return asked

    monkeypatch.setattr(folder, "poke", counted)
    return pokes


def test_a_burst_of_writes_wakes_the_folder_once_and_reads_see_every_write(
    served_sqlite: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = served_sqlite
    clock = _Clock()
    monkeypatch.setattr(freshness, "monotonic", clock)
    alice = SigningKey.generate()
    register_attester(served, alice)
    before = served.client.get(f"/v1/runs/{SEED}").json()["replications"]
    pokes = _count_pokes(served, monkeypatch)
    clock.now += freshness.WRITTEN_EVERY_S  # past the registration's own wake-up

    for n in range(5):  # all within one interval: the clock stands still
        envelope = attestation_envelope(SEED, SEED_NAME, alice, type_="reproduced", body=f"#{n}")
        check_receipt(served.client.post(f"/v1/runs/{SEED}/attestations", json=envelope), envelope)
    assert len(pokes) == 1, "the burst's first write wakes it, the others do not"

    record = served.client.get(f"/v1/runs/{SEED}").json()
    assert len(record["replications"]) == len(before) + 5

    # The next write after the interval wakes it again.
    clock.now += freshness.WRITTEN_EVERY_S
    woken = len(pokes)
    envelope = attestation_envelope(SEED, SEED_NAME, alice, type_="reproduced", body="later")
    check_receipt(served.client.post(f"/v1/runs/{SEED}/attestations", json=envelope), envelope)
    assert len(pokes) == woken + 1
