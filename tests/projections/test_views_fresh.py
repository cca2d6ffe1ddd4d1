"""A command reads the views through the driver only where they answer as its own catch-up
would leave them (issue 33): this build's views, every event of the log folded, every group
ranked. Anything else (an event not yet folded, a group waiting for its ranks, another
build's views, no views at all) sends it down the full path, which folds first. SQLite and
PostgreSQL alike."""

from __future__ import annotations

from projection_world import SEED, World
from sqlalchemy import create_engine, update

from api.service.driver_reads import driver_reads
from ledger.store.read_door import open_driver
from projections.tables import stale_groups, view_schema
from projections.view_reads import views_fresh
from projections.view_statements import STATEMENTS


def _door_opens(world: World) -> bool:
    with driver_reads(world.db_url, world.root, views=True) as reads:
        return reads is not None


def test_views_folded_to_the_log_end_open_the_door(cohort: World) -> None:
    cohort.runner().catch_up()
    assert _door_opens(cohort)
    # A read of the event table alone never asks for the views.
    cohort.append(cohort.attest_envelope(SEED, "not folded yet"))
    with driver_reads(cohort.db_url, cohort.root) as reads:
        assert reads is not None


def test_an_event_past_the_folded_position_closes_it(cohort: World) -> None:
    cohort.runner().catch_up()
    cohort.append(cohort.attest_envelope(SEED, "not folded yet"))
    assert not _door_opens(cohort)
    cohort.runner().catch_up()
    assert _door_opens(cohort)


def test_a_group_waiting_for_its_ranks_closes_it(cohort: World) -> None:
    cohort.runner().catch_up()
    engine = create_engine(cohort.db_url)
    try:
        with engine.begin() as conn:
            conn.execute(stale_groups.insert().values(comparison_key="sha256:" + "0" * 64))
        assert not _door_opens(cohort)
    finally:
        engine.dispose()


def test_views_of_another_build_close_it(cohort: World) -> None:
    cohort.runner().catch_up()
    engine = create_engine(cohort.db_url)
    try:
        with engine.begin() as conn:
            conn.execute(update(view_schema).values(version=view_schema.c.version + 1))
        assert not _door_opens(cohort)
    finally:
        engine.dispose()


def test_no_views_at_all_close_it(empty_db_url: str) -> None:
    world = World.create(empty_db_url)  # the ledger's schema, and no view table yet
    try:
        assert not _door_opens(world)
    finally:
        world.close()


def test_the_door_reads_one_snapshot(cohort: World) -> None:
    """What the freshness check saw is what every later read of the command sees: an event
    appended after it is not in the door's snapshot (PostgreSQL's default, READ COMMITTED,
    would show each statement a snapshot of its own)."""
    cohort.runner().catch_up()
    door = open_driver(cohort.db_url)
    assert door is not None
    try:
        assert views_fresh(door)
        cohort.append(cohort.attest_envelope(SEED, "after the check"))
        assert views_fresh(door)
        assert door.run(STATEMENTS, "views_state")[0][1] in (False, 0)
    finally:
        door.close()
    assert not _door_opens(cohort)
