"""The fold's fields written at commit (``ledger.store.fold_fields``) fold to the views that
decoding every stored event folds to.

Each ledger here is made by admission, so every event's row is the commit's; then the views
are rebuilt four ways and must be equal, table digest for table digest: from the commit's
rows; from no rows at all (every event decoded from its stored state, the fold of a ledger
older than the table); from the rows the upgrade's backfill makes (which must equal the
commit's, byte for byte); and from a random part of the rows (both paths in one rebuild,
in batches of a few events). Random event sequences on SQLite (hypothesis), one fixed
sequence with an attachment on both backends, and an older ledger brought up by
``kernelindex db upgrade``.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from projection_world import MANIFESTS, NAMES, SEED, Clock, World
from sqlalchemy import Table, create_engine, delete, func, select, text, update
from test_rebuild_property import (
    FIXED_SCRIPTS,
    KEYS,
    NOW,
    build_steps,
    feed,
    interleave,
    sequences,
    steps_of,
)

from ledger.signing.authoring import attachment_envelope, ingestion_envelope
from ledger.store import schema
from ledger.store.fold_fields import decode_fields, event_fold_fields, whole
from ledger.store.fold_manifests import fold_manifests

BARE_SEED = {role: doc for role, doc in MANIFESTS[SEED].items() if role != "workload"}


def fold_rows(world: World) -> dict[int, bytes]:
    with world.ledger.store.transaction(commit=False) as session:
        rows = session.execute(select(event_fold_fields.c.position, event_fold_fields.c.fields))
        return {int(p): bytes(f) for p, f in rows}


def drop_rows(world: World, positions: Sequence[int] | None = None) -> None:
    with world.ledger.store.transaction(commit=True) as session:
        query = delete(event_fold_fields)
        if positions is not None:
            query = query.where(event_fold_fields.c.position.in_(list(positions)))
        session.execute(query)


def backfill(world: World) -> None:
    """The upgrade's step, as ``kernelindex db upgrade`` runs it on an older ledger."""
    engine = create_engine(world.db_url)
    try:
        with engine.begin() as conn:
            schema.STEPS[5](world.db_url, conn)
    finally:
        engine.dispose()


def rebuilt(world: World, batch: int | None = None) -> dict[str, str]:
    runner = world.runner()
    if batch is None:
        runner.rebuild()
    else:
        runner.rebuild(batch=batch)
    return runner.table_digests()


def check_folds_agree(world: World, seed: int) -> dict[str, str]:
    """The four rebuilds of the module docstring, equal; the views they make."""
    committed = fold_rows(world)
    assert set(committed) == set(range(1, world.count() + 1)), "a row for every event"
    names = {decode_fields(row).name for row in committed.values()}
    assert None in names and "Run.Ingested" in names  # key events and run events alike

    from_fields = rebuilt(world)
    drop_rows(world)
    assert rebuilt(world) == from_fields, "decoding every event folds otherwise"
    backfill(world)
    assert fold_rows(world) == committed, "the backfill's rows are not the commit's"
    assert rebuilt(world) == from_fields
    part = random.Random(seed).sample(sorted(committed), len(committed) // 2)
    drop_rows(world, part)
    assert rebuilt(world, batch=3) == from_fields, "the two paths mixed fold otherwise"
    # Every row back (the half dropped may have held every ingestion's row) before the
    # shared documents are edited and removed.
    backfill(world)
    assert fold_rows(world) == committed
    check_shared_documents_fold_alike(world, seed, from_fields)
    return from_fields


def shared_bodies(world: World) -> dict[bytes, bytes]:
    with world.ledger.store.transaction(commit=False) as session:
        rows = session.execute(select(fold_manifests.c.digest, fold_manifests.c.body))
        return {bytes(d): bytes(b) for d, b in rows}


def check_shared_documents_fold_alike(world: World, seed: int, views: dict[str, str]) -> None:
    """The rows name the shared manifests by key; with one of those missing, or edited, the
    events naming it fold from their state instead, to the same views."""
    bodies = shared_bodies(world)
    named = {k for row in fold_rows(world).values() for _, k in decode_fields(row).shared}
    assert named and named <= set(bodies), "ingestions share their manifests"
    key = random.Random(seed).choice(sorted(named))
    with world.ledger.store.transaction(commit=True) as session:
        session.execute(
            update(fold_manifests).where(fold_manifests.c.digest == key).values(body=b"{}")
        )
    assert rebuilt(world, batch=3) == views, "an edited shared document was folded"
    with world.ledger.store.transaction(commit=True) as session:
        session.execute(delete(fold_manifests))
    assert rebuilt(world) == views, "a missing shared document folds otherwise"


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(sequences(), st.integers(0, 2**32))
def test_random_sequences_fold_alike_from_fields_and_from_events(
    sequence: tuple[Any, ...], seed: int
) -> None:
    scripts, first, _, _ = sequence
    with tempfile.TemporaryDirectory() as folder:
        world = World.create(f"sqlite:///{Path(folder) / 'ledger.db'}", KEYS, Clock(NOW))
        try:
            feed(world, interleave(build_steps(world, scripts), first))
            incremental = world.views()
            assert check_folds_agree(world, seed) == incremental
        finally:
            world.close()


@pytest.fixture
def world(db_url: str) -> Iterator[World]:
    w = World.create(db_url, KEYS, Clock(NOW))
    yield w
    w.close()


def test_fixed_sequence_with_an_attachment_on_both_backends(world: World) -> None:
    lengths = [1 + sum(steps_of(op) for op in s) for s in FIXED_SCRIPTS[1:]]
    round_robin = [r for k in range(max(lengths)) for r, n in enumerate(lengths) if k < n]
    # SEED ingested without its workload and given it by an attachment (Run.ManifestsAttached);
    # the other runs' scripts round robin.
    world.append(ingestion_envelope(BARE_SEED, world.keys.ingester, now=world.clock.now))
    attached = {"workload": MANIFESTS[SEED]["workload"]}
    world.append(
        attachment_envelope(SEED, NAMES[SEED], attached, world.keys.ingester, now=world.clock.now)
    )
    steps = build_steps(world, [[], *FIXED_SCRIPTS[1:]])[1:]
    feed(world, interleave([[*s] for s in steps], round_robin))
    names = {decode_fields(row).name for row in fold_rows(world).values()}
    assert {"Run.ManifestsAttached", "Run.RerunRecorded", "Run.Superseded"} <= names
    incremental = world.views()
    assert check_folds_agree(world, 7) == incremental


def _stamp(url: str, version: int) -> None:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE kernelindex_schema SET version = :v"), {"v": version})
    finally:
        engine.dispose()


def test_an_older_ledger_is_upgraded_with_its_rows_backfilled(world: World) -> None:
    """A ledger of schema version 4 (no fold fields table) refolds the same after
    ``upgrade``, which makes the table and fills it with the rows the commit would have."""
    world.ingest()
    world.append(world.attest_envelope(SEED, "seen", "reproduced"))
    committed = fold_rows(world)
    views = world.views()
    world.close()
    engine = create_engine(world.db_url)
    try:
        with engine.begin() as conn:
            Table(event_fold_fields.name, event_fold_fields.metadata).drop(conn)
    finally:
        engine.dispose()
    _stamp(world.db_url, 4)
    status, applied = schema.upgrade(world.db_url)
    assert applied == [5, 6] and status.current
    reopened = World.create(world.db_url, KEYS, Clock(NOW))
    try:
        assert fold_rows(reopened) == committed
        assert rebuilt(reopened) == views
    finally:
        reopened.close()


def test_an_event_without_its_row_is_folded_from_its_state(world: World) -> None:
    """A catch-up (not only a rebuild) folds an event that has no row, as it was stored."""
    world.ingest(SEED)
    views_before = world.views()
    with world.ledger.store.transaction(commit=False) as session:
        count = session.execute(select(func.count()).select_from(event_fold_fields)).scalar()
    assert count == world.count()
    world.append(world.attest_envelope(SEED, "later", "reproduced"))
    drop_rows(world, [world.count()])
    after = world.views()
    assert after != views_before
    assert rebuilt(world) == after


def schema_5_rows(world: World) -> dict[int, bytes]:
    """The rows as schema 5's commit wrote them: six fields, every predicate whole."""
    bodies = shared_bodies(world)
    rows = {}
    for position, row in fold_rows(world).items():
        fields = whole(decode_fields(row), bodies)
        assert fields is not None
        rows[position] = msgspec.msgpack.encode(list(msgspec.structs.astuple(fields))[:6])
    return rows


def store_rows(world: World, rows: dict[int, bytes]) -> None:
    with world.ledger.store.transaction(commit=True) as session:
        session.execute(delete(event_fold_fields))
        session.execute(delete(fold_manifests))
        session.execute(
            event_fold_fields.insert(), [{"position": p, "fields": f} for p, f in rows.items()]
        )


def test_schema_5_rows_fold_alike_and_the_upgrade_shares_their_manifests(world: World) -> None:
    """Rows of schema 5 (predicates whole) are read as they are; ``db upgrade`` from 5
    rewrites them to the rows the commit makes now, storing each shared document once."""
    world.ingest()
    world.append(world.attest_envelope(SEED, "seen", "reproduced"))
    committed, bodies = fold_rows(world), shared_bodies(world)
    views = rebuilt(world)
    old = schema_5_rows(world)
    assert sum(map(len, old.values())) > sum(map(len, committed.values())) + 1000
    store_rows(world, old)
    assert rebuilt(world) == views, "rows of schema 5 fold otherwise"
    world.close()
    _stamp(world.db_url, 5)
    status, applied = schema.upgrade(world.db_url)
    assert applied == [6] and status.current
    reopened = World.create(world.db_url, KEYS, Clock(NOW))
    try:
        assert fold_rows(reopened) == committed
        assert shared_bodies(reopened) == bodies
        assert rebuilt(reopened) == views
        assert schema.upgrade(world.db_url)[1] == []
    finally:
        reopened.close()
