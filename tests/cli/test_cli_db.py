"""`kernelindex db`: the schema exists only after an explicit upgrade, is versioned, and a
ledger refuses a database whose schema it was not written for — on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from cli_session import Cli
from sqlalchemy import create_engine, inspect, text

from ledger.store.schema import SCHEMA_VERSION, upgrade


def _tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return set(inspect(conn).get_table_names())
    finally:
        engine.dispose()


def _execute(url: str, sql: str) -> None:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text(sql))
    finally:
        engine.dispose()


def test_opening_a_database_without_schema_fails_and_creates_nothing(
    empty_db_url: str, tmp_path: Path
) -> None:
    cli = Cli(tmp_path / "home", empty_db_url)
    # A home with keys and trust root, its database never upgraded (e.g. a new PostgreSQL).
    Cli(tmp_path / "home", f"sqlite:///{tmp_path / 'elsewhere.db'}")("init")
    # --json reads through the driver alone where it can (issue 33): it refuses alike.
    for args in (("keys", "list"), ("keys", "list", "--json")):
        result = cli(*args, ok=False)
        assert "schema-not-current" in result.output
        assert "kernelindex db upgrade" in result.output
        assert _tables(empty_db_url) == set()  # opening made no table

    status = cli("db", "status", ok=False)
    assert "no KernelIndex schema" in status.output


ALL_STEPS = list(range(1, SCHEMA_VERSION + 1))


def test_upgrade_creates_every_table_once_and_is_idempotent(
    empty_db_url: str, tmp_path: Path
) -> None:
    cli = Cli(tmp_path / "home", empty_db_url)
    first = json.loads(cli("db", "upgrade", "--json").stdout)
    assert first["applied"] == list(range(1, SCHEMA_VERSION + 1))
    assert first["version"] == SCHEMA_VERSION and first["current"] is True
    assert {
        "kernelindex_events",
        "kernelindex_log_leaves",
        "kernelindex_log_nodes",
        "kernelindex_log_checkpoints",
        "kernelindex_artifacts",
        "kernelindex_view_runs",
        "kernelindex_group_members",
        "kernelindex_event_fold_fields",
        "kernelindex_schema",
    } <= _tables(empty_db_url)
    again = json.loads(cli("db", "upgrade", "--json").stdout)
    assert again["applied"] == [] and again["version"] == SCHEMA_VERSION
    assert f"schema version {SCHEMA_VERSION}" in cli("db", "status").output


def test_a_database_from_before_versioning_is_stamped_and_keeps_its_events(
    empty_db_url: str, tmp_path: Path, seed_path: Path
) -> None:
    cli = Cli(tmp_path / "home", empty_db_url)
    cli("init")
    cli("ingest", seed_path)
    events = cli.event_count()
    _execute(empty_db_url, "DROP TABLE kernelindex_schema")

    refused = cli("history", "7e18c26c", ok=False)
    assert "has no KernelIndex schema" in refused.output
    assert json.loads(cli("db", "upgrade", "--json").stdout)["applied"] == ALL_STEPS
    assert cli.event_count() == events
    assert "verified" in cli("history", "7e18c26c").output.lower()
    cli("audit")


def test_a_newer_schema_is_refused_and_left_alone(empty_db_url: str, tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home", empty_db_url)
    cli("init")
    _execute(empty_db_url, f"UPDATE kernelindex_schema SET version = {SCHEMA_VERSION + 1}")
    for args in (("keys", "list"), ("keys", "list", "--json"), ("db", "upgrade")):
        result = cli(*args, ok=False)
        assert "newer than this build" in result.output
    engine = create_engine(empty_db_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version FROM kernelindex_schema")).scalar() == (
            SCHEMA_VERSION + 1
        )
    engine.dispose()


@pytest.mark.postgres
def test_concurrent_upgrades_apply_each_step_once(empty_db_url: str) -> None:
    if not empty_db_url.startswith("postgresql"):
        pytest.skip("several processes share one database only on PostgreSQL")
    applied: list[list[int]] = []
    failures: list[BaseException] = []

    def one() -> None:
        try:
            applied.append(upgrade(empty_db_url)[1])
        except BaseException as exc:  # reported below, with the thread's exception
            failures.append(exc)

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert sorted(applied) == [[], [], [], ALL_STEPS]


def test_an_older_schema_is_refused_until_upgraded(empty_db_url: str, tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home", empty_db_url)
    cli("init")
    _execute(empty_db_url, "UPDATE kernelindex_schema SET version = 0")
    for args in (("keys", "list"), ("keys", "list", "--json")):
        refused = cli(*args, ok=False)
        assert f"schema version 0, this build needs {SCHEMA_VERSION}" in refused.output
    assert json.loads(cli("db", "upgrade", "--json").stdout)["applied"] == ALL_STEPS
    cli("keys", "list")
    assert len(json.loads(cli("keys", "list", "--json").stdout)["items"]) == 3


def test_an_init_that_fails_keeps_nothing_and_can_be_run_again(tmp_path: Path) -> None:
    home = tmp_path / "home"
    unreachable = Cli(home, "postgresql+psycopg://postgres@127.0.0.1:1/nowhere")
    failed = unreachable("init", ok=False)
    assert "store" in failed.output or "connect" in failed.output.lower()
    assert not (home / "trust-root.json").exists()
    assert not any((home / "keys").glob("*.pem"))
    Cli(home, f"sqlite:///{tmp_path / 'ledger.db'}")("init")
    assert (home / "trust-root.json").exists()
