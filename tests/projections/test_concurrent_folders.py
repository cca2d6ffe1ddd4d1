"""Several processes folding the same views at once (HTTP workers, a CLI reader, the writer)
fold every event exactly once, to the views a rebuild gives: on SQLite as on PostgreSQL.

Each folder here is its own ``Ledger`` on the same database (its own engine and
connections, as another process has), so nothing in-process serialises them."""

from __future__ import annotations

import threading

from projection_world import World
from test_crash import busy_events, fresh_rebuild

from ledger.application import Ledger
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
