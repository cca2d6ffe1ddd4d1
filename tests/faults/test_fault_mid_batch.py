"""Processes SIGKILLed mid-batch, on SQLite and PostgreSQL.

The sequencer runs inside each write transaction (ledger/application.py ``_commit``: store
the group's events, give them leaves, commit), so killing it means killing a process while
it commits a large ``Ledger.append_many`` group: after the kill the store holds all of the
group or none of it, the log is dense and the audit is clean. The projector (`kernelindex
projector`) killed mid-batch leaves whole batches only, and after a restart the views equal
a fresh rebuild.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from fault_kit import (
    REPO,
    assert_store_whole,
    backend,
    cli,
    cli_command,
    cli_env,
    stored_events,
    views_and_rebuild,
)
from sqlalchemy import create_engine, func, select

from benchmarks.http.workload import Prepared, plan_appends, prepare_ledger, split
from projections.tables import runs, tracking

GROUP = 600  # envelopes per append_many group: long enough to kill inside its commit
SEED = int(os.environ.get("KERNELINDEX_FAULT_SEED", time.time_ns() % 2**32))

# Appends the envelopes in the file as one group; says where it is on stdout.
APPENDER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from ledger.home import LedgerHome
    from ledger.store.transparency_log import TransparencyLog

    home, db, envelopes = Path(sys.argv[1]), sys.argv[2], json.loads(Path(sys.argv[3]).read_text())
    ledger = LedgerHome.at(home, db).open()
    original = TransparencyLog.sequence

    def sequence(self, session, *args):
        # The group's events are INSERTed, uncommitted; the leaves come next, then COMMIT.
        print("sequencing", flush=True)
        return original(self, session, *args)

    TransparencyLog.sequence = sequence
    print("appending", flush=True)
    results = ledger.append_many(envelopes)
    print("done", sum(hasattr(r, "position") for r in results), flush=True)
    """
)


def _group(prepared: Prepared, tag: str) -> list[dict[str, object]]:
    """GROUP distinct signed attestations, interleaved over the runs and signers."""
    plans = plan_appends(prepared.runs, prepared.attesters, split(GROUP, 4), tag)
    return [p[i].envelope for i in range(max(map(len, plans))) for p in plans if i < len(p)]


def _append_and_kill(
    prepared: Prepared, envelopes: list[dict[str, object]], work: Path, at: str, delay: float
) -> str:
    """Run the appender; SIGKILL it ``delay`` s after it prints ``at`` (or let it finish).
    Returns the last line it printed."""
    file = work / f"group-{at}-{delay:.3f}.json"
    file.write_text(json.dumps(envelopes))
    home = prepared.home
    child = subprocess.Popen(
        [sys.executable, "-c", APPENDER, str(home.path), home.db_url, str(file)],
        cwd=REPO,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    last = ""
    try:
        assert child.stdout is not None
        while True:
            line = child.stdout.readline()
            if not line:
                break
            last = line.strip()
            if last == at:
                time.sleep(delay)
                os.kill(child.pid, signal.SIGKILL)
                break
        child.wait(timeout=120)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
    if child.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(child.stderr.read() if child.stderr else child.returncode)
    return last


@pytest.mark.slow
def test_sigkill_while_committing_a_group_stores_all_of_it_or_none(
    db_url: str, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    prepared = prepare_ledger(tmp_path / "home", db_url, runs=4, attesters=4)
    prepared.ledger.close()
    # (marker, delay): at once inside sequencing (the group's rows written, uncommitted);
    # then random moments from the start of the group's admission and of its sequencing.
    rounds = [("sequencing", 0.0), ("appending", rng.uniform(0, 1.5))]
    rounds += [("sequencing", rng.uniform(0, 0.4)) for _ in range(2)]
    outcomes: list[str] = []
    for number, (at, delay) in enumerate(rounds):
        before = stored_events(db_url)
        envelopes = _group(prepared, f"round-{number}")
        last = _append_and_kill(prepared, envelopes, tmp_path, at, delay)
        after = stored_events(db_url)
        where = f"round {number}: kill {delay:.3f} s after {at!r} (seed {SEED})"
        assert after in (before, before + GROUP), f"{where}: {after - before} of {GROUP} stored"
        if number == 0:
            assert after == before, f"{where}: a kill inside the transaction kept its rows"
        shape = assert_store_whole(prepared.home)
        assert shape["events"] == after, where
        if after == before + GROUP:
            _all_present(prepared, envelopes, where)
        outcomes.append(f"{at}+{delay:.3f}s: {'all' if after > before else 'none'} ({last})")

    # The store takes the next group whole, and the views catch up to a rebuild.
    envelopes = _group(prepared, "final")
    before = stored_events(db_url)
    assert _append_and_kill(prepared, envelopes, tmp_path, "never", 0) == f"done {GROUP}"
    assert stored_events(db_url) == before + GROUP
    assert_store_whole(prepared.home)
    incremental, rebuilt = views_and_rebuild(prepared.home)
    assert incremental == rebuilt
    print(f"\n[{backend(db_url)}] seed {SEED}: " + "; ".join(outcomes))


def _all_present(prepared: Prepared, envelopes: list[dict[str, object]], where: str) -> None:
    """A committed group is there whole, in order, each event its envelope."""
    ledger = prepared.home.open()
    try:
        stored = []
        start = 1
        while True:
            batch = ledger.recorder.select_notifications(start, 1000)
            stored += [json.loads(n.state)["envelope"] for n in batch]
            if len(batch) < 1000:
                break
            start = batch[-1].id + 1
    finally:
        ledger.close()
    assert stored[-GROUP:] == envelopes, f"{where}: the committed group is not the one sent"


# ------------------------------------------------------------------ the projector


def _tracking(db_url: str) -> tuple[int, int]:
    """(views' tracking position, attestations the runs view counts), read directly."""
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            position = conn.execute(select(tracking.c.position)).scalar() or 0
            counted = conn.execute(select(func.sum(runs.c.attestations))).scalar() or 0
        return int(position), int(counted)
    finally:
        engine.dispose()


@pytest.mark.slow
def test_sigkill_of_the_projector_mid_batch_then_restart_equals_a_rebuild(
    db_url: str, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    prepared = prepare_ledger(tmp_path / "home", db_url, runs=4, attesters=4)
    envelopes = _group(prepared, "views")
    for first in range(0, len(envelopes), 100):
        prepared.ledger.append_many(envelopes[first : first + 100])
    prepared.ledger.close()
    home, batch = prepared.home, 10
    total = stored_events(db_url)

    child = subprocess.Popen(
        cli_command(
            "projector", "--home", str(home.path), "--db", home.db_url, "--batch", str(batch)
        ),
        cwd=REPO,
        env=cli_env() | {"PYTHONUNBUFFERED": "1", "COLUMNS": "200"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    batches, delay, seen = 0, 0.0, []
    try:
        assert child.stdout is not None
        for line in child.stdout:
            if "folded" in line:
                batches += 1
                seen.append(time.monotonic())
            if batches == 3:
                # Kill at a random moment within the next batch or so (at the pace of the
                # batches seen so far).
                delay = rng.uniform(0, (seen[-1] - seen[0]) / 2)
                time.sleep(delay)
                break
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
    stderr = child.stderr.read() if child.stderr else ""
    assert batches == 3, f"the projector did not fold batch by batch: {stderr[-2000:]}"
    assert child.returncode == -signal.SIGKILL

    deadline = time.monotonic() + 10
    while True:  # PostgreSQL ends the killed session's transaction once it sees the socket go
        try:
            position, counted = _tracking(db_url)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    where = f"killed {delay:.3f} s after batch 3 (seed {SEED}), views at {position}/{total}"
    assert position % batch == 0 or position == total, f"{where}: a partial batch committed"
    assert 3 * batch <= position < total, f"{where}: the kill did not land mid-run"
    ledger = home.open()
    try:
        events = ledger.recorder.events_record_cls  # type: ignore[attr-defined]
        with ledger.store.transaction(commit=False) as session:
            attested = session.execute(
                select(func.count())
                .select_from(events)
                .where(events.id <= position, events.topic.like("%Run.Attested"))
            ).scalar()
    finally:
        ledger.close()
    assert counted == attested, f"{where}: an event was counted twice or skipped"

    done = cli("projector", "--home", str(home.path), "--db", home.db_url, "--once")
    assert done.returncode == 0, done.stderr
    assert _tracking(db_url)[0] == total
    assert_store_whole(home)
    incremental, rebuilt = views_and_rebuild(home)
    assert incremental == rebuilt
    print(f"\n[{backend(db_url)}] {where}")
