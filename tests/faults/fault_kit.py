"""What the fault tests share: the real CLI and server as child processes, and the checks that
a store came through a fault whole (audit, log dense, views equal to a rebuild).

Not a test module: the test files of this folder import it (``from fault_kit import``). The
load, the signed attestations and the per-receipt verification are benchmarks/bench_http.py's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import make_url

from benchmarks.http.server import ServerProcess
from ledger.application import Ledger
from ledger.home import LedgerHome
from ledger.store.schema import EVENTS_TABLE
from ledger.store.transparency_log import leaves
from projections.runner import ProjectionRunner

REPO = Path(__file__).resolve().parents[2]


def backend(db_url: str) -> str:
    return make_url(db_url).get_backend_name()


def cli_env() -> dict[str, str]:
    """The environment of a child CLI: no KERNELINDEX_* of the developer's leaks in."""
    return {k: v for k, v in os.environ.items() if not k.startswith("KERNELINDEX_")}


def cli_command(*args: str) -> list[str]:
    # -m from the repository root: the child runs this checkout's code.
    return [sys.executable, "-m", "api.cli", *args]


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli_command(*args),
        cwd=REPO,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def audit(home: LedgerHome) -> tuple[int, dict[str, Any]]:
    """`kernelindex audit --json` on the store: (exit code, its report)."""
    done = cli("audit", "--home", str(home.path), "--db", home.db_url, "--json")
    try:
        report = json.loads(done.stdout)
    except ValueError:
        report = {"unparsed": done.stdout[-2000:], "stderr": done.stderr[-2000:]}
    return done.returncode, report


@contextmanager
def serving(home: LedgerHome, log: Path) -> Iterator[ServerProcess]:
    """`kernelindex serve` on the home's store, in a child process (bench_http's launcher)."""
    args = ["serve", "--home", str(home.path), "--db", home.db_url, "--log-format", "json"]
    server = ServerProcess(args, log, command=cli_command(), env=cli_env())
    try:
        yield server.__enter__()
    finally:
        server.kill()  # whatever the test did: no server outlives it


def stored_events(db_url: str) -> int:
    """How many events the store holds, read by a connection of our own."""
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(text(f"SELECT count(*) FROM {EVENTS_TABLE}")).scalar() or 0)
    finally:
        engine.dispose()


def wait_for_events(db_url: str, at_least: int, timeout: float = 120) -> int:
    deadline = time.monotonic() + timeout
    while True:
        count = stored_events(db_url)
        if count >= at_least or time.monotonic() > deadline:
            return count
        time.sleep(0.02)


def log_shape(ledger: Ledger) -> dict[str, Any]:
    """Events and leaves as stored: dense means leaf i logs the i-th event, for every event
    and no other (no event without a leaf, no leaf without its event, no gap)."""
    events = ledger.recorder.events_record_cls  # type: ignore[attr-defined]
    with ledger.store.transaction(commit=False) as session:
        positions = list(session.execute(select(events.id).order_by(events.id)).scalars())
        rows = session.execute(
            select(leaves.c.leaf_index, leaves.c.position).order_by(leaves.c.leaf_index)
        ).all()
        size = ledger.tlog.tree_size(session)
        unsequenced = session.execute(
            select(func.count())
            .select_from(events)
            .where(events.id.not_in(select(leaves.c.position)))
        ).scalar()
    return {
        "events": len(positions),
        "leaves": len(rows),
        "treeSize": size,
        "unsequenced": int(unsequenced or 0),
        "dense": [int(r[0]) for r in rows] == list(range(len(rows)))
        and [int(r[1]) for r in rows] == positions,
    }


def views_and_rebuild(home: LedgerHome) -> tuple[dict[str, str], dict[str, str]]:
    """The views after an incremental catch-up, and what a fresh rebuild of every view from
    the events gives (on another ledger instance; the rebuild replaces the views in place,
    so the incremental digests are taken first)."""
    ledger = home.open()
    try:
        runner = ProjectionRunner(ledger)
        runner.catch_up()
        incremental = runner.table_digests()
    finally:
        ledger.close()
    other = home.open()
    try:
        runner = ProjectionRunner(other)
        runner.rebuild()
        return incremental, runner.table_digests()
    finally:
        other.close()


def assert_store_whole(home: LedgerHome) -> dict[str, Any]:
    """After a fault: the audit is clean and the log is dense; returns the log's shape."""
    code, report = audit(home)
    assert code == 0, f"audit failed after the fault: {json.dumps(report)[:3000]}"
    ledger = home.open()
    try:
        shape = log_shape(ledger)
    finally:
        ledger.close()
    assert shape["dense"] and shape["unsequenced"] == 0, shape
    assert shape["events"] == shape["leaves"] == shape["treeSize"], shape
    return shape
