"""The views follow the ledger on PostgreSQL through eventsourcing's subscription: a commit by
another writer is folded with no reader asking, exactly once, to the views a rebuild gives."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from projection_world import RUN_21613, SEED, World
from sqlalchemy import select
from test_crash import busy_events, fresh_rebuild

from domain.statements import Role
from ledger.application import Ledger
from ledger.signing.authoring import key_registration_envelope
from ledger.signing.keys import SigningKey
from projections.run_views import RUN_TOPICS, decode
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


def _delivery(world: World, after: int) -> list[tuple[object, object]]:
    """What the follower's subscription would deliver: the run events past ``after``."""
    e = world.ledger.store.events.c
    with world.ledger.store.transaction(commit=False) as session:
        rows = session.execute(
            select(e.id, e.originator_id, e.originator_version, e.topic, e.state)
            .where(e.topic.in_(RUN_TOPICS), e.id > after)
            .order_by(e.id)
        ).all()
    return list(decode(world.ledger.mapper, rows))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_delivery_during_a_rebuild_does_not_skip_what_the_rebuild_has_not_refolded(
    cohort: World, workers: int
) -> None:
    """A rebuild starts the views over at position 0. A delivery that the follower folds
    meanwhile (an event appended after the rebuild began) must not move the position past
    the events the rebuild has yet to refold: they would be left out of the views for good
    (every run missing, found by an attack review). The views catch up from where they are
    instead, and end as a quiet rebuild leaves them."""
    for i in range(6):
        cohort.append(cohort.attest_envelope(SEED, f"note {i}"))
    runner = ProjectionRunner(cohort.ledger)
    runner.catch_up()
    head = cohort.tracking_position()
    cohort.append(cohort.lifecycle_envelope(RUN_21613, "retract"))
    delivered = _delivery(cohort, head)
    assert len(delivered) == 1
    expected = fresh_rebuild(cohort)
    follower = ProjectionRunner(cohort.ledger)
    folded: list[int] = []

    def deliver_once(position: int) -> None:
        if not folded:  # the follower's thread, between two of the rebuild's batches
            folded.append(follower.fold_delivered(delivered))

    ProjectionRunner(cohort.ledger).rebuild(batch=3, progress=deliver_once, workers=workers)
    assert folded and folded[0] > 1  # it caught up from the rebuild's position
    assert ProjectionRunner(cohort.ledger).table_digests() == expected
    assert cohort.tracking_position() == cohort.count()


def test_a_delivery_past_key_events_is_folded_as_delivered(
    cohort: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Key events are not delivered (the follower subscribes to run events): a delivery
    after one is every event the views lack, and is folded as it came, without a catch-up."""
    runner = ProjectionRunner(cohort.ledger)
    runner.catch_up()
    head = cohort.tracking_position()
    stranger = SigningKey.generate()
    cohort.append(key_registration_envelope(stranger.public, [Role.ATTESTER], stranger))
    cohort.append(cohort.attest_envelope(SEED, "after a key event"))
    delivered = _delivery(cohort, head)
    assert len(delivered) == 1

    def no_catch_up(*args: object, **kwargs: object) -> None:
        raise AssertionError("folded by a catch-up, not as delivered")

    monkeypatch.setattr(runner, "catch_up", no_catch_up)
    assert runner.fold_delivered(delivered) == 1
    assert cohort.tracking_position() == cohort.count()
    assert _attestations(cohort, SEED) == 1
