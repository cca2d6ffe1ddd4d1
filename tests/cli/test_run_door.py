"""``kernelindex show`` and ``history`` read through the database driver where the views
are fresh and through the full service where they are not (issue 33): the same reads, so
the same bytes on stdout and the same exit code either way, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_session import Cli
from sqlalchemy import create_engine, select
from typer.testing import CliRunner

from api.cli.main import app
from api.service.driver_reads import driver_reads
from ledger.home import LedgerHome
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
