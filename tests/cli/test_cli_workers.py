"""`kernelindex projector` and `kernelindex sequencer`: they fold and sign what is new, do
nothing twice, and stop cleanly on SIGTERM — on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

from cli_session import Cli
from sqlalchemy import create_engine, select

from ledger.store.transparency_log import checkpoints
from projections.tables import tracking

REPO = Path(__file__).resolve().parents[2]

_COHORT = json.loads(
    resources.files("api.demo_data").joinpath("sol-056-cohort.json").read_text("utf-8")
)["cohort"]


def _views_position(url: str) -> int | None:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            value = conn.execute(select(tracking.c.position)).scalar()
            return None if value is None else int(value)
    finally:
        engine.dispose()


def _signed_sizes(url: str) -> list[int]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [int(r.size) for r in conn.execute(select(checkpoints.c.size))]
    finally:
        engine.dispose()


def test_projector_folds_new_events_once(db_url: str, tmp_path: Path, seed_path: Path) -> None:
    cli = Cli(tmp_path / "home", db_url)
    cli("init")
    # A run with every manifest it names (the seed would read the views for its workload).
    whole = tmp_path / "whole.json"
    whole.write_text(json.dumps(_COHORT[0]))
    cli("ingest", whole)
    events = cli.event_count()
    assert _views_position(db_url) is None  # nothing has folded yet

    first = cli("projector", "--once")
    assert f"folded {events} events" in first.stdout
    assert _views_position(db_url) == events
    assert "folded" not in cli("projector", "--once").stdout  # nothing new: nothing done
    status = cli("projections", "status").stdout
    assert f"views at position {events} (0 new events folded)" in status


def test_sequencer_signs_the_current_tree(db_url: str, tmp_path: Path, seed_path: Path) -> None:
    cli = Cli(tmp_path / "home", db_url)
    cli("init")
    cli("ingest", seed_path)
    events = cli.event_count()
    result = cli("sequencer", "--once")
    assert re.search(rf"checkpoint at tree size {events}\b", result.stdout), result.stdout
    signed = _signed_sizes(db_url)  # each commit signs the tree it grew: init's, ingest's
    assert signed[-1] == events
    cli("sequencer", "--once")  # the same size again: the same checkpoint, not a second one
    assert _signed_sizes(db_url) == signed


def test_workers_stop_cleanly_on_sigterm(db_url: str, tmp_path: Path) -> None:
    Cli(tmp_path / "home", db_url)("init")
    env = {
        **os.environ,
        "KERNELINDEX_HOME": str(tmp_path / "home"),
        "KERNELINDEX_DB": db_url,
        "KERNELINDEX_KEY_PASSPHRASE": "",
    }
    for command in ("projector", "sequencer"):
        proc = subprocess.Popen(
            [sys.executable, "-m", "api.cli", command, "--interval", "0.1"],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            assert proc.stdout is not None
            assert "SIGTERM stops it" in proc.stdout.readline().decode()  # running its loop
            time.sleep(0.5)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=20) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_projector_stops_with_an_error_on_what_retrying_cannot_fix(
    db_url: str, tmp_path: Path, seed_path: Path
) -> None:
    """A dropped view table is an operator's problem: exit 1 with the reason, not an
    endless 'store unavailable, retrying'."""
    cli = Cli(tmp_path / "home", db_url)
    cli("init")
    cli("ingest", seed_path)
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE kernelindex_view_runs")
    engine.dispose()
    result = cli("projector", "--interval", "0.1", ok=False)
    assert result.exit_code == 1
    assert "retrying cannot fix" in result.output
    assert "kernelindex db status" in result.output
