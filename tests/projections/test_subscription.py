"""The views follow the ledger on PostgreSQL through eventsourcing's subscription: a commit by
another writer is folded with no reader asking, exactly once, to the views a rebuild gives."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from projection_world import RUN_21613, SEED, World
from sqlalchemy import select
from test_crash import busy_events, fresh_rebuild

from ledger.application import Ledger
from projections.runner import ProjectionRunner
from projections.subscription import SubscriptionUnavailableError, ViewsFollower
from projections.tables import runs


def _until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the views did not follow the ledger in time")
        time.sleep(0.05)


def _attestations(world: World, run: str) -> int:
    """The runs view as it stands, folding nothing (a reader would catch up first)."""
    with world.ledger.store.transaction(commit=False) as session:
        value = session.execute(
            select(runs.c.attestations).where(runs.c.run_digest == run)
        ).scalar()
    return int(value or 0)


def test_views_follow_the_ledger_where_the_store_notifies_and_say_why_not_elsewhere(
    cohort: World,
) -> None:
    if not cohort.ledger.store.postgres:
        with pytest.raises(SubscriptionUnavailableError, match="catch up before each read"):
            ViewsFollower(ProjectionRunner(cohort.ledger))
        return
    follower = ViewsFollower(ProjectionRunner(cohort.ledger), batch=3, idle=0.05).start()
    other = Ledger(cohort.db_url, cohort.root, clock=cohort.clock)  # another process's ledger
    try:
        _until(lambda: _attestations(cohort, SEED) == 0 and cohort.tracking_position() > 0)
        for i in range(5):
            other.append(cohort.attest_envelope(SEED, f"from elsewhere {i}"))
        _until(lambda: _attestations(cohort, SEED) == 5)
        # A reader's catch-up racing the follower folds nothing twice.
        ProjectionRunner(cohort.ledger).catch_up()
        busy_events(cohort)  # reruns, a retraction: every kind of view change
        _until(lambda: cohort.tracking_position() == cohort.count())
    finally:
        follower.stop()
        other.close()
    assert follower.error is None
    assert follower.folded > 0
    assert _attestations(cohort, SEED) == 9
    assert cohort.row(RUN_21613).retracted
    followed = cohort.runner().table_digests()
    assert followed == fresh_rebuild(cohort)


def test_the_server_follows_the_ledger_on_postgresql_only(cohort: World) -> None:
    from litestar.testing import TestClient

    from api.server.app import create_app

    app = create_app(cohort.ledger)
    service = app.state["service"]
    with TestClient(app) as client:
        assert client.get("/health").status_code == 200
        follower = service.follower
        assert (follower is not None) == cohort.ledger.store.postgres
        assert follower is None or follower.running
        if follower is not None:
            other = Ledger(cohort.db_url, cohort.root, clock=cohort.clock)
            try:
                other.append(cohort.attest_envelope(SEED, "seen by the server's follower"))
            finally:
                other.close()
            _until(lambda: _attestations(cohort, SEED) == 1)
    if follower is not None:
        assert follower.error is None
        assert not follower.running  # stopped with the server
