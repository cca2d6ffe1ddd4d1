"""A rebuild whose batches worker processes fold (``projections.fold_pool``) gives the views a
rebuild folded in-process gives, table digest for table digest, on SQLite and PostgreSQL:
when another folder moves the views meanwhile, the writer goes on in-process from where they
stand; a worker that fails fails the rebuild and leaves views the next catch-up mends."""

from __future__ import annotations

import itertools
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from projection_world import RUN_21613, SEED, World
from sqlalchemy import create_engine, select

from ledger.application import Ledger
from projections import fold_pool
from projections import runner as runner_module
from projections.fold_pool import FoldPool, shared_database
from projections.runner import ProjectionRunner
from projections.tables import ranks, runs, stale_groups


def busy(world: World) -> World:
    """The cohort, attestations, a retraction and verifying reruns: every kind of change."""
    world.ingest()
    for i in range(5):
        world.append(world.attest_envelope(SEED, f"note {i}"))
    world.append(world.result_envelope(world.request_rerun(SEED)))
    world.append(world.lifecycle_envelope(RUN_21613, "retract"))
    world.append(world.result_envelope(world.request_rerun(RUN_21613)))
    return world


def in_process(world: World) -> dict[str, str]:
    runner = world.runner()
    runner.rebuild(batch=3, workers=0)
    return runner.table_digests()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_rebuild_folded_by_workers_equals_one_folded_here(world: World, workers: int) -> None:
    busy(world)
    expected = in_process(world)
    runner = world.runner()
    positions: list[int] = []
    done = runner.rebuild(batch=3, workers=workers, progress=positions.append)
    assert runner.table_digests() == expected
    assert done.position == world.count() and done.events == world.count()
    assert positions == sorted(positions) and positions[-1] == world.count()
    assert all(b - a == 3 for a, b in itertools.pairwise(positions[:-1]))
    # and the views go on from there as ever
    world.append(world.attest_envelope(SEED, "after the rebuild"))
    assert world.row(SEED).attestations == 6


def test_a_rebuild_goes_on_here_when_another_folder_moves_the_views(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    busy(world)
    expected = in_process(world)
    submit = FoldPool.submit
    calls = {"n": 0}

    def submit_and_fold_elsewhere(self: FoldPool, after: int, upto: int) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:  # before the first batch is written: another folder writes one
            other = Ledger(world.db_url, world.root, clock=world.clock)
            try:
                ProjectionRunner(other).catch_up(batch=3, max_batches=1)
            finally:
                other.close()
        return submit(self, after, upto)

    monkeypatch.setattr(FoldPool, "submit", submit_and_fold_elsewhere)
    runner = world.runner()
    done = runner.rebuild(batch=3, workers=1)
    assert calls["n"] >= 2
    assert done.position == world.count()
    assert runner.table_digests() == expected


def test_a_failing_worker_fails_the_rebuild_and_the_views_mend(
    world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    busy(world)
    expected = in_process(world)
    # The workers are pointed at a database without the ledger: each fails to start.
    monkeypatch.setattr(
        runner_module, "shared_database", lambda ledger: f"sqlite:///{tmp_path / 'none.db'}"
    )
    runner = world.runner()
    with pytest.raises(Exception):  # noqa: B017 - whatever the pool reports
        runner.rebuild(batch=3, workers=1)
    monkeypatch.undo()
    runner.catch_up()  # the indexes are there, and the views catch up to the log
    assert runner.table_digests() == expected


def test_a_rebuild_ranks_by_workers_and_a_failed_ranking_leaves_the_groups_marked(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The re-ranking is the workers' too (their shares of the groups, every one asked
    for); one that fails fails the rebuild before anything of it is written, the groups
    stay marked, and the next catch-up ranks them here."""
    busy(world)
    expected = in_process(world)
    submit = FoldPool.submit_ranking
    asked: list[str] = []

    def counted(self: FoldPool, keys: list[str]) -> Any:
        asked.extend(keys)
        return submit(self, keys)

    monkeypatch.setattr(FoldPool, "submit_ranking", counted)
    runner = world.runner()
    runner.rebuild(batch=3, workers=2)
    assert runner.table_digests() == expected
    with world.ledger.store.transaction(commit=False) as session:
        groups = set(session.execute(select(runs.c.comparison_key)).scalars()) - {None}
    assert sorted(asked) == sorted(groups) and groups

    def failed(self: FoldPool, keys: list[str]) -> Any:
        future: Future[Any] = Future()
        future.set_exception(RuntimeError("a worker died ranking"))
        return future

    monkeypatch.setattr(FoldPool, "submit_ranking", failed)
    with pytest.raises(RuntimeError, match="a worker died ranking"):
        runner.rebuild(batch=3, workers=1)
    with world.ledger.store.transaction(commit=False) as session:
        assert set(session.execute(select(stale_groups.c.comparison_key)).scalars()) == groups
        assert session.execute(select(ranks.c.run_digest)).first() is None
    monkeypatch.undo()
    runner.catch_up()
    assert runner.table_digests() == expected


def test_only_a_database_other_processes_can_open_is_folded_by_workers(world: World) -> None:
    def store(url: str) -> Any:
        return SimpleNamespace(store=SimpleNamespace(engine=create_engine(url)))

    for url in ("sqlite://", "sqlite:///:memory:", "sqlite:///file:x?mode=memory&uri=true"):
        assert shared_database(store(url)) is None, url
    assert shared_database(store("sqlite:////tmp/x.db")) == "sqlite:////tmp/x.db"
    assert shared_database(world.ledger) is not None
    assert fold_pool.AHEAD_PER_WORKER >= 1
