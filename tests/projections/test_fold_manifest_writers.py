"""Writers committing at once, each a run whose shared manifests are new to the ledger, all
succeed, on SQLite and PostgreSQL: each shared document is stored once (the second writer's
insert keeps the first's row), and the views fold from the rows as from the events."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from projection_world import Clock, World
from test_rebuild_from_fold_fields import drop_rows, fold_rows, rebuilt, shared_bodies
from test_rebuild_property import KEYS, NOW

from benchmarks.generate import load_seed, synthetic_manifests
from ledger.application import Ledger
from ledger.signing.authoring import ingestion_envelope
from ledger.store.fold_fields import decode_fields

WRITERS, EACH = 4, 3


@pytest.fixture
def world(db_url: str) -> Iterator[World]:
    w = World.create(db_url, KEYS, Clock(NOW))
    yield w
    w.close()


def test_writers_sharing_new_manifests_all_commit_and_store_each_once(world: World) -> None:
    seed = load_seed()
    envelopes = [
        [
            ingestion_envelope(
                synthetic_manifests(seed, k * EACH + i), world.keys.ingester, now=world.clock.now
            )
            for i in range(EACH)
        ]
        for k in range(WRITERS)
    ]
    ledgers = [Ledger(world.db_url, world.root, clock=world.clock) for _ in range(WRITERS)]
    start = threading.Barrier(WRITERS)
    errors: list[BaseException] = []

    def write(k: int) -> None:
        try:
            start.wait()
            for envelope in envelopes[k]:
                ledgers[k].append(envelope)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(k,)) for k in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for ledger in ledgers:
        ledger.close()
    assert not errors, errors

    rows = fold_rows(world)
    ingestions = [decode_fields(r) for r in rows.values() if decode_fields(r).name]
    assert len(ingestions) == WRITERS * EACH
    named = {key for fields in ingestions for _, key in fields.shared}
    # The seed's shared documents (protocol, environment, …), named by every ingestion.
    assert named == set(shared_bodies(world)) and len(named) >= 2
    assert all({k for _, k in f.shared} == named for f in ingestions)
    views = rebuilt(world)
    drop_rows(world)
    assert rebuilt(world) == views
