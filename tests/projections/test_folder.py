"""A serving process's views are folded by a thread of their own (``projections.folder``): a
commit by another writer is folded with no reader asking, a reader waiting for a position is
answered once the views hold it, a fold that fails says why to whoever waits (and is tried
again when asked), and the server starts the folder with itself and stops it with itself.
On SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from projection_world import SEED, World
from sqlalchemy import select
from test_crash import fresh_rebuild

from domain.errors import DomainError
from ledger.application import Ledger
from projections.folder import ViewsFolder
from projections.runner import CatchUp, ProjectionRunner, ViewsStalledError
from projections.tables import runs

NEVER = 2**62  # a position no test's log reaches


def _until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the views were not folded in time")
        time.sleep(0.05)


def _attestations(world: World, run: str) -> int:
    """The runs view as it stands, folding nothing."""
    with world.ledger.store.transaction(commit=False) as session:
        value = session.execute(
            select(runs.c.attestations).where(runs.c.run_digest == run)
        ).scalar()
    return int(value or 0)


def test_commits_elsewhere_are_folded_with_nobody_asking(cohort: World) -> None:
    folder = ViewsFolder(ProjectionRunner(cohort.ledger), idle=0.05).start()
    other = Ledger(cohort.db_url, cohort.root, clock=cohort.clock)  # another process's ledger
    try:
        for i in range(3):
            other.append(cohort.attest_envelope(SEED, f"from elsewhere {i}"))
        _until(lambda: _attestations(cohort, SEED) == 3)
    finally:
        folder.stop()
        other.close()
    assert not folder.running
    assert cohort.runner().table_digests() == fresh_rebuild(cohort)


def test_a_reader_waits_for_the_position_it_saw(cohort: World) -> None:
    folder = ViewsFolder(ProjectionRunner(cohort.ledger), idle=60.0).start()  # folds when asked
    try:
        cohort.append(cohort.attest_envelope(SEED, "a note"))
        target = cohort.ledger.store.last_position()
        folded = folder.after(target, timeout=20.0)
        assert folded is not None and folded.error is None and folded.position >= target
        assert _attestations(cohort, SEED) == 1
        # Already there: answered at once, from what the folder knows.
        assert folder.after(target, timeout=0.0) == folded
    finally:
        folder.stop()


def test_a_failed_fold_is_told_to_the_reader_and_tried_again(
    cohort: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = ProjectionRunner(cohort.ledger)
    real = runner.catch_up
    failing = threading.Event()

    def catch_up(*args: Any, **kwargs: Any) -> CatchUp:
        if failing.is_set():
            raise ViewsStalledError("the views stop here")
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "catch_up", catch_up)
    folder = ViewsFolder(runner, idle=60.0).start()  # folds when asked
    try:
        failing.set()
        # An attempt asked for now ends after any under way: it fails.
        assert folder.after(NEVER, timeout=20.0) is not None
        cohort.append(cohort.attest_envelope(SEED, "folds later"))
        target = cohort.ledger.store.last_position()
        folded = folder.after(target, timeout=20.0)
        assert folded is not None and isinstance(folded.error, DomainError)
        assert "the views stop here" in str(folded.error)
        assert _attestations(cohort, SEED) == 0
        failing.clear()
        folded = folder.after(target, timeout=20.0)  # asking again tries again
        assert folded is not None and folded.error is None and folded.position >= target
        assert _attestations(cohort, SEED) == 1
    finally:
        folder.stop()


def test_a_reader_is_answered_none_when_nothing_folds(cohort: World) -> None:
    folder = ViewsFolder(ProjectionRunner(cohort.ledger))  # never started
    assert folder.after(cohort.ledger.store.last_position(), timeout=0.1) is None


def test_the_server_folds_in_the_background_and_stops_with_itself(cohort: World) -> None:
    from litestar.testing import TestClient

    from api.server.app import create_app

    app = create_app(cohort.ledger)
    folder = app.state["service"].views.folder
    assert folder is not None and not folder.running
    with TestClient(app) as client:
        assert client.get("/health").status_code == 200
        assert folder.running
        other = Ledger(cohort.db_url, cohort.root, clock=cohort.clock)
        try:
            other.append(cohort.attest_envelope(SEED, "seen by the server's folder"))
        finally:
            other.close()
        _until(lambda: _attestations(cohort, SEED) == 1)
    assert not folder.running  # stopped with the server
