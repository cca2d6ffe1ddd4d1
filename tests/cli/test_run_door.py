"""``kernelindex show`` and ``history`` read through the database driver where the views
are fresh and through the full service where they are not (issue 33): the same reads, so
the same bytes on stdout and the same exit code either way, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from cli_session import Cli
from sqlalchemy import create_engine, delete, select, update
from typer.testing import CliRunner, Result

from api.cli.main import app
from api.service.driver_reads import driver_reads
from ledger.home import LedgerHome
from ledger.ids import principal_id, run_id
from ledger.store.read_only import events_table
from projections.tables import runs, stale_groups

SEED = "sol-submission-38823"  # the demo's seed run, by name
SEED_DIGEST = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"


@pytest.fixture
def demo(db_url: str, tmp_path: Path) -> Cli:
    home = tmp_path / "demo"
    built = CliRunner().invoke(app, ["demo", "--home", str(home), "--db", db_url])
    assert built.exit_code == 0, built.output
    return Cli(home, db_url)


def _door_opens(cli: Cli) -> bool:
    root = LedgerHome.at(cli.home, cli.db_url).trust_root()
    with driver_reads(cli.db_url, root, views=True) as reads:
        return reads is not None


def _views_stale(cli: Cli) -> None:
    """A group waits for its ranks: the door stays shut, and the full path's catch-up
    re-ranks it (a group of no runs) before it reads, changing nothing it shows."""
    engine = create_engine(cli.db_url)
    try:
        with engine.begin() as conn:
            conn.execute(stale_groups.insert().values(comparison_key="sha256:" + "0" * 64))
    finally:
        engine.dispose()
    assert not _door_opens(cli)


ASKED: list[tuple[tuple[str, ...], int]] = [
    (("history", SEED), 0),
    (("history", SEED, "--json"), 0),
    (("history", SEED_DIGEST.upper().removeprefix("SHA256:"), "--json"), 0),  # full digest
    (("history", SEED_DIGEST[:14], "--from", "2", "--limit", "1"), 0),  # prefix, a page
    (("history", "sol-execbench#38823", "--from", "2", "--json"), 0),
    (("history", "sha256:" + "0" * 64), 1),  # no such run: looked up in the log
    (("history", "no-such-run"), 1),  # nor in the views
    (("history", "7e1"), 1),  # too short a prefix
    (("show", SEED), 0),
    (("show", SEED, "--json"), 0),
    (("show", SEED_DIGEST, "--json"), 0),
    (("show", "38823"), 0),
    (("show", "sha256:" + "0" * 64), 1),
    (("show", "no-such-run", "--json"), 1),
]


def test_show_and_history_print_the_same_through_the_door_and_the_full_path(demo: Cli) -> None:
    assert SEED_DIGEST in demo("history", SEED).stdout
    for argv, failed in ASKED:
        assert _door_opens(demo), argv
        door = demo(*argv, ok=not failed)
        _views_stale(demo)
        full = demo(*argv, ok=not failed)
        assert (door.exit_code, door.stdout) == (full.exit_code, full.stdout), argv
        assert door.output == full.output, argv
        if not _door_opens(demo):  # a full digest is read without the views: fold them
            demo("show", SEED)
    shown = demo.json("history", SEED)
    assert [e["event"] for e in shown["events"]][:2] == ["Run.Ingested", "Run.Attested"]
    assert shown["allVerified"] and all(e["leafIndex"] is not None for e in shown["events"])
    page = demo.json("history", SEED, "--from", "2", "--limit", "1")
    assert (page["start"], len(page["events"]), page["total"]) == (2, 1, shown["total"])
    record = demo.json("show", SEED)
    assert record["digest"] == SEED_DIGEST and record["shownEventsVerified"]
    assert record["compareWithFirst"]["b"] != SEED_DIGEST  # the seed is not its group's #1
    assert record["standings"]["source-native"]["rank"] > 1


def test_a_run_in_a_workload_sweep_shows_the_same_through_both(
    db_url: str, tmp_path: Path, shared: Path
) -> None:
    """Runs whose groups stand in a sweep (FlashInfer-Bench's batch sizes): their place and
    their #1's comparison read alike through the driver and through the full service."""
    cli = Cli(tmp_path / "home", db_url)
    cli("init")
    cli("import", "flashinfer-trace", shared / "fixtures/flashinfer-trace")
    cli("show", "0000", ok=False)  # a full-path read: the views folded and ranked
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            digests = [str(d) for d in conn.execute(select(runs.c.run_digest)).scalars()]
    finally:
        engine.dispose()
    assert digests
    seen = 0
    for digest in digests:
        assert _door_opens(cli)
        door = cli("show", digest, "--json")
        _views_stale(cli)
        full = cli("show", digest, "--json")
        assert door.stdout == full.stdout, digest
        seen += "sweep" in door.stdout
    assert seen, "the fixture's runs stand in a sweep"


def _damage_first_event(
    cli: Cli, aggregate: UUID, damage: Callable[[dict[str, Any]], None]
) -> None:
    """The aggregate's first stored event rewritten as ``damage`` leaves its fields."""
    engine = create_engine(cli.db_url)
    where = (events_table.c.originator_id == aggregate) & (events_table.c.originator_version == 1)
    try:
        with engine.begin() as conn:
            state = conn.execute(select(events_table.c.state).where(where)).scalar_one()
            fields = json.loads(bytes(state))
            damage(fields)
            conn.execute(
                update(events_table).where(where).values(state=json.dumps(fields).encode())
            )
    finally:
        engine.dispose()


def _both_ways(cli: Cli, *argv: str) -> tuple[Result, Result]:
    assert _door_opens(cli), argv
    door = cli(*argv, ok=False)
    _views_stale(cli)
    full = cli(*argv, ok=False)  # its catch-up re-ranks the group: the door opens again
    return door, full


def _timestamp_unreadable(fields: dict[str, Any]) -> None:
    fields["timestamp"]["_data_"] = "not a time"  # eventsourcing's transcoder refuses it


def _unknown_transcoding(fields: dict[str, Any]) -> None:
    fields["received_at"] = {"_type_": "pickle", "_data_": "x"}


def _received_at_garbage(fields: dict[str, Any]) -> None:
    fields["received_at"] = "garbage"


@pytest.mark.parametrize("damage", [_timestamp_unreadable, _unknown_transcoding])
def test_a_damaged_record_of_the_groups_first_fails_closed_both_ways(
    demo: Cli, damage: Callable[[dict[str, Any]], None]
) -> None:
    """Review (MEDIUM): a run's manifests read without the mapper still refuse what it
    refuses. The seed's record compares it with its group's #1; #1's ingestion damaged as
    the mapper would not read it: the door and the full path both say corrupt-record, and
    so does the board in SOL order (its scores come from the same ingestions)."""
    first = demo.json("show", SEED)["compareWithFirst"]["b"]
    key = demo.json("show", SEED)["comparisonKey"]
    _damage_first_event(demo, run_id(first), damage)
    for argv in (("show", SEED), ("leaderboard", key, "--order", "sol-score")):
        door, full = _both_ways(demo, *argv)
        assert door.exit_code == full.exit_code == 1, (argv, door.output, full.output)
        assert "corrupt-record" in door.output and door.output == full.output, argv


def test_a_damaged_key_record_fails_the_read_alike_both_ways(demo: Cli) -> None:
    """Review (MEDIUM): the ingester's registration damaged. The door reads the keys its
    events name before verifying any, as the full path does: both say corrupt-record, with
    the same words and exit code, rather than "no signature is by a registered key"."""
    signer = demo.json("history", SEED)["events"][0]["signer"]
    _damage_first_event(demo, principal_id(signer), _received_at_garbage)
    for argv in (("history", SEED), ("show", SEED), ("show", SEED, "--json")):
        door, full = _both_ways(demo, *argv)
        assert door.exit_code == full.exit_code == 1, (argv, door.output, full.output)
        assert "corrupt-record" in door.output and door.output == full.output, argv
        assert "no signature is by a registered key" not in door.output


def test_a_run_is_found_by_its_digest_only_from_its_ingestion(demo: Cli) -> None:
    """Review (LOW): a run whose first event is gone is no run of the log (``require_run``
    asks for its version 1, as the full path's replay would start there)."""
    engine = create_engine(demo.db_url)
    where = (events_table.c.originator_id == run_id(SEED_DIGEST)) & (
        events_table.c.originator_version == 1
    )
    try:
        with engine.begin() as conn:
            conn.execute(delete(events_table).where(where))
    finally:
        engine.dispose()
    found = demo("history", SEED_DIGEST, ok=False)
    assert found.exit_code == 1 and "no run with digest" in found.output
