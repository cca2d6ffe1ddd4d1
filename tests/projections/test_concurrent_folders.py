"""Several processes folding the same views at once (HTTP workers, a CLI reader, the writer)
fold every event exactly once, to the views a rebuild gives: on SQLite as on PostgreSQL.

Each folder here is its own ``Ledger`` on the same database (its own engine and
connections, as another process has), so nothing in-process serialises them."""

from __future__ import annotations

import threading

from projection_world import World
from sqlalchemy import create_engine, text
from test_crash import busy_events, fresh_rebuild

from ledger.application import Ledger
from projections.runner import _ADVISORY_LOCK_ID as ADVISORY
from projections.runner import ProjectionRunner

FOLDERS = 4


def test_folders_racing_on_the_same_new_events_fold_each_once(cohort: World) -> None:
    ProjectionRunner(cohort.ledger).catch_up()
    busy_events(cohort)  # unfolded: every folder below sees the same new events
    ledgers = [Ledger(cohort.db_url, cohort.root, clock=cohort.clock) for _ in range(FOLDERS)]
    start = threading.Barrier(FOLDERS)
    errors: list[BaseException] = []

    def fold(ledger: Ledger) -> None:
        try:
            runner = ProjectionRunner(ledger)
            runner.ensure_views()
            start.wait()
            runner.catch_up(batch=2)
        except BaseException as exc:  # every folder's failure is reported, not one
            errors.append(exc)

    threads = [threading.Thread(target=fold, args=(ledger,)) for ledger in ledgers]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        for ledger in ledgers:
            ledger.close()
    assert errors == []
    assert cohort.tracking_position() == cohort.count()
    folded = cohort.runner().table_digests()
    assert folded == fresh_rebuild(cohort)


def test_a_reader_with_nothing_to_fold_does_not_wait_for_the_folders_lock(
    cohort: World,
) -> None:
    """Most reads find the views current: their catch-up must not queue behind whoever holds
    the folders' lock (on SQLite the database's write lock: the writer committing a group, an
    index build), nor fail when that outlasts the busy timeout."""
    ProjectionRunner(cohort.ledger).catch_up()
    held = threading.Event()
    release = threading.Event()

    def hold_the_lock() -> None:
        engine = create_engine(cohort.db_url)
        try:
            with engine.connect() as connection:
                if engine.dialect.name == "postgresql":
                    connection.execute(text("SELECT pg_advisory_lock(:k)"), {"k": ADVISORY})
                else:
                    connection.exec_driver_sql("BEGIN IMMEDIATE")
                held.set()
                release.wait(60)
                if engine.dialect.name == "postgresql":
                    connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": ADVISORY})
                else:
                    connection.exec_driver_sql("ROLLBACK")
        finally:
            engine.dispose()

    holder = threading.Thread(target=hold_the_lock)
    holder.start()
    reader = Ledger(cohort.db_url, cohort.root, clock=cohort.clock, read_only=True)
    outcome: list[object] = []
    try:
        assert held.wait(30)
        caught_up = threading.Thread(
            target=lambda: outcome.append(ProjectionRunner(reader).catch_up())
        )
        caught_up.start()
        caught_up.join(timeout=3)  # the lock is held for up to a minute: waiting would show
        assert not caught_up.is_alive(), "a reader with nothing to fold waited for the lock"
        assert outcome and outcome[0].events == 0  # type: ignore[attr-defined]
        assert outcome[0].position == cohort.count()  # type: ignore[attr-defined]
    finally:
        release.set()
        holder.join(60)
        reader.close()
