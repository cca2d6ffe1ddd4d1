"""A projection runner that dies mid-batch leaves nothing of that batch behind, and the next
catch-up ends where a fresh rebuild does: on SQLite and PostgreSQL, for an exception inside
the batch's transaction and for a real SIGKILL of a catch-up process."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from projection_world import RUN_15149, RUN_21613, RUN_36818, SEED, World
from sqlalchemy import create_engine, func, select
from sqlalchemy.exc import OperationalError

from api.cli.common import _first_line
from domain.errors import DomainError
from ledger.errors import CorruptRecordError, ReadOnlyStoreError, store_error
from ledger.group_commit import WriterClosedError
from projections import runner as runner_module
from projections.run_views import RunViews, StoredRow, ViewsTracking
from projections.runner import ProjectionRunner, ViewsStalledError
from projections.tables import runs, tracking


class Crash(RuntimeError):
    pass


@contextmanager
def crashes() -> Iterator[None]:
    """A catch-up that died of a ``Crash``: it says where the views stopped, and why."""
    with pytest.raises(ViewsStalledError, match=r"stop at log position \d+.*\(Crash\)") as info:
        yield
    assert isinstance(info.value.__cause__, Crash)


def busy_world(world: World) -> World:
    """The cohort, attestations, a retraction and verifying reruns: every kind of view update."""
    world.ingest()
    return busy_events(world)


def busy_events(world: World) -> World:
    for i in range(4):
        world.append(world.attest_envelope(SEED, f"note {i}"))
    world.append(world.result_envelope(world.request_rerun(SEED)))
    world.append(world.lifecycle_envelope(RUN_21613, "retract"))
    world.append(world.result_envelope(world.request_rerun(RUN_21613)))
    return world


def fresh_rebuild(world: World) -> dict[str, str]:
    """The views a fresh rebuild gives, from another ledger instance on the same store (the
    views are rebuilt in place: take the incremental digests first)."""
    from ledger.application import Ledger

    other = Ledger(world.db_url, world.root, clock=world.clock)
    try:
        runner = ProjectionRunner(other)
        runner.rebuild()
        return runner.table_digests()
    finally:
        other.close()


def crash_fold_after(monkeypatch: pytest.MonkeyPatch, events: int) -> None:
    """A catch-up's fold (of stored rows) dies after ``events`` events."""
    original = RunViews.fold_stored
    calls = {"n": 0}

    def fold_stored(self: RunViews, batch: Iterable[StoredRow], *args: Any) -> None:
        def counted() -> Iterator[StoredRow]:
            for item in batch:
                if calls["n"] >= events:
                    raise Crash(f"crash after folding {events} events of the batch")
                calls["n"] += 1
                yield item

        original(self, counted(), *args)

    monkeypatch.setattr(RunViews, "fold_stored", fold_stored)


@pytest.mark.parametrize("after", [0, 1, 5])
def test_a_crash_inside_a_batch_leaves_nothing_of_it(
    world: World, monkeypatch: pytest.MonkeyPatch, after: int
) -> None:
    world.ingest(SEED)
    world.views()  # the views hold the seed; the rest is not folded yet
    world.ingest(RUN_15149, RUN_21613, RUN_36818)
    busy_events(world)
    runner = world.runner()
    position, before = world.tracking_position(), runner.table_digests()
    assert world.count() > position + 6

    with monkeypatch.context() as patch:
        crash_fold_after(patch, after)
        with crashes():
            runner.catch_up(batch=8)
    assert world.tracking_position() == position, "the tracking row moved with a failed batch"
    assert runner.table_digests() == before, "part of a failed batch is visible"

    done = runner.catch_up(batch=8)
    assert done.position == world.count()
    incremental = runner.table_digests()
    assert incremental == fresh_rebuild(world)


def test_a_crash_after_the_view_updates_but_before_the_tracking_row(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tracking row is written in the batch's transaction: failing to write it undoes the
    view updates made just before."""
    busy_world(world)
    runner = world.runner()
    before = runner.table_digests()

    def boom(self: ViewsTracking, *args: Any) -> None:
        raise Crash("crash while writing the tracking row")

    with monkeypatch.context() as patch:
        patch.setattr(ViewsTracking, "record", boom)
        with crashes():
            runner.catch_up(batch=5)
    assert world.tracking_position() == 0
    assert runner.table_digests() == before
    runner.catch_up(batch=5)
    incremental = runner.table_digests()
    assert incremental == fresh_rebuild(world)


def test_batches_committed_before_a_crash_stay_and_are_not_folded_twice(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    busy_world(world)
    runner = world.runner()
    with monkeypatch.context() as patch:
        crash_fold_after(patch, 7)  # batches of 3: two commit, the third dies at its 2nd event
        with crashes():
            runner.catch_up(batch=3)
    assert world.tracking_position() == 6
    runner.catch_up(batch=3)
    incremental = runner.table_digests()
    assert incremental == fresh_rebuild(world)
    assert world.row(SEED).attestations == 4


# ------------------------------------------------------------------ a real kill

CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from ledger.application import Ledger
    from ledger.signing.trust import TrustRoot
    from projections.run_views import RunViews
    from projections.runner import ProjectionRunner, ViewsStalledError

    url, root_file, batch, stall_in = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    runner = ProjectionRunner(Ledger(url, TrustRoot.load(Path(root_file))))
    original, batches, folded = ProjectionRunner._one_batch, [0], [0]

    def one_batch(self, session, size, *rest):
        batches[0] += 1
        folded[0] = 0
        return original(self, session, size, *rest)

    def fold_stored(self, rows, *args):
        def stalling():
            for item in rows:
                yield item
                folded[0] += 1
                if batches[0] == stall_in and folded[0] == 2:
                    # Mid-batch: two events of this batch folded, uncommitted. Wait to be killed.
                    print("mid-batch", flush=True)
                    time.sleep(120)

        original_fold(self, stalling(), *args)

    original_fold = RunViews.fold_stored
    ProjectionRunner._one_batch = one_batch
    RunViews.fold_stored = fold_stored
    runner.catch_up(batch=batch)
    print("finished", flush=True)
    """
)


def _attestations_per_position(db_url: str) -> tuple[int, int]:
    """(tracking position, attestations counted in the runs view) read by another process."""
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            position = conn.execute(select(tracking.c.position)).scalar() or 0
            counted = conn.execute(select(func.sum(runs.c.attestations))).scalar() or 0
        return int(position), int(counted)
    finally:
        engine.dispose()


def test_sigkill_mid_batch_then_restart_equals_a_rebuild(world: World, tmp_path: Path) -> None:
    world.ingest()
    for i in range(240):
        world.append(world.attest_envelope(SEED if i % 2 else RUN_21613, f"note {i}"))
    world.append(world.result_envelope(world.request_rerun(SEED)))
    total = world.count()
    root_file = tmp_path / "trust-root.json"
    world.root.save(root_file)
    batch, stall_in = 7, 12

    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, world.db_url, str(root_file), str(batch), str(stall_in)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.strip() == "mid-batch", child.stderr.read() if child.stderr else line
        position, counted = _attestations_per_position(world.db_url)
        assert position == (stall_in - 1) * batch, "the tracking position moved batch by batch"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL

    # What the killed runner committed is whole batches, each event counted once.
    deadline = time.monotonic() + 10
    while True:  # PostgreSQL ends the killed session's transaction once it sees the socket close
        try:
            after_kill = _attestations_per_position(world.db_url)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    assert after_kill == (position, counted)
    with world.ledger.store.transaction(commit=False) as session:
        events = world.ledger.store.events.c
        attested = session.execute(
            select(func.count())
            .select_from(world.ledger.store.events)
            .where(events.id <= position, events.topic.like("%Run.Attested"))
        ).scalar()
    assert counted == attested, "an event was skipped or counted twice"

    # Restart in-process: it resumes where the dead runner's last commit left off.
    runner = world.runner()
    done = runner.catch_up(batch=batch)
    assert (done.events, done.position) == (total - position, total)
    assert world.row(SEED).attestations + world.row(RUN_21613).attestations == 240
    incremental = runner.table_digests()
    assert incremental == fresh_rebuild(world)


def test_a_store_failure_while_catching_up_keeps_its_kind(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database failure is not a stalled view: it leaves the catch-up as it came, its
    chain whole (never its own cause, which made `_first_line` loop for ever and hid the
    driver's code), so a read-only store still reads as one (503 read-only-store)."""
    world.ingest(SEED)
    runner = world.runner()
    driver = sqlite3.OperationalError("attempt to write a readonly database")
    driver.sqlite_errorcode = 8  # type: ignore[attr-defined]  # SQLITE_READONLY

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError("INSERT …", {}, driver)

    monkeypatch.setattr(ProjectionRunner, "_fold_batches", refuse)
    with pytest.raises(OperationalError) as info:
        runner.catch_up()
    assert info.value.__cause__ is not info.value
    refused = store_error(info.value)
    assert refused is not None and refused.code == "read-only-store"
    assert _first_line(info.value) == "attempt to write a readonly database"


def test_first_line_ends_on_a_cause_that_loops() -> None:
    looped = ValueError("the driver's words")
    looped.__cause__ = looped
    assert _first_line(looped) == "the driver's words"


def test_a_ranking_that_fails_stalls_the_views_too(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Re-ranking is part of catching up: its refusal is a stalled view, not the reader's."""
    world.ingest()

    def refuse(*args: Any) -> Any:
        raise DomainError("a ranking's own refusal")

    monkeypatch.setattr(runner_module, "rank_group", refuse)
    with pytest.raises(ViewsStalledError, match="a ranking's own refusal"):
        world.runner().catch_up()


@pytest.mark.parametrize(
    "error",
    [
        CorruptRecordError("a stored event no longer decodes"),
        ReadOnlyStoreError("the database is read-only"),
        WriterClosedError("the writer is closed"),
    ],
)
def test_an_error_that_is_the_servers_already_passes_as_it_is(
    world: World, monkeypatch: pytest.MonkeyPatch, error: DomainError
) -> None:
    """Only what would read as the reader's fault becomes views-stalled: a corrupt record
    (500), a refusing store or a closed writer (503, retry) keep their own code."""
    world.ingest(SEED)

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(ProjectionRunner, "_fold_batches", fail)
    with pytest.raises(type(error)) as info:
        world.runner().catch_up()
    assert info.value is error and info.value.__cause__ is None


class OddStatusError(DomainError):
    """A status that is no HTTP status: not the server's own error, so the views stall."""

    status = "500"


def test_an_error_with_no_int_status_stalls_the_views(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.ingest(SEED)

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise OddStatusError("odd")

    monkeypatch.setattr(ProjectionRunner, "_fold_batches", fail)
    with pytest.raises(ViewsStalledError, match=r"stop at log position \d+.*\(odd\)"):
        world.runner().catch_up()


def test_a_stall_whose_position_cannot_be_read_still_says_why(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading where the views stopped is best effort: its own failure must not hide the
    fold's error the caller is told about."""
    world.ingest(SEED)
    runner = world.runner()

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise Crash("the fold's own error")

    def unreadable(*args: Any) -> Any:
        raise RuntimeError("the position's read failed too")

    monkeypatch.setattr(ProjectionRunner, "_fold_batches", fail)
    monkeypatch.setattr(ProjectionRunner, "_position", unreadable)
    with pytest.raises(
        ViewsStalledError, match=r"stop at an unknown log position.*\(Crash\)"
    ) as info:
        runner.catch_up()
    assert isinstance(info.value.__cause__, Crash)
