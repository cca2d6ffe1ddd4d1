"""`kernelindex search` answers alike through the driver door and the full path (issue 33),
on SQLite and PostgreSQL: the table, ``--json``, a search that finds nothing and a refused
one print the same bytes and exit alike, whichever way the command read the views.

The full path is forced as a user meets it: an attestation appended after the last fold
leaves the views behind the log, so the door stays shut and the command folds first (an
attestation changes nothing a search reads). Run again on the views it folded, the command
reads through the driver."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from api.cli.main import app
from api.service.driver_reads import driver_reads
from ledger.home import LedgerHome

SEED = "sol-submission-38823"  # the demo's seed run, by name


class Demo:
    """The demo ledger, and ``kernelindex`` run in-process against it."""

    def __init__(self, root: Path, db_url: str) -> None:
        self.home, self.db_url = root / "home", db_url
        self.runner = CliRunner()
        self.notes = 0

    def __call__(self, *args: object) -> Any:
        return self.runner.invoke(
            app,
            [*(str(a) for a in args), "--home", str(self.home), "--db", self.db_url],
            env={"KERNELINDEX_KEY_PASSPHRASE": "", "COLUMNS": "100"},
        )

    def door_open(self) -> bool:
        """Whether a search now reads through the driver (the views fresh)."""
        home = LedgerHome.at(self.home, self.db_url)
        with driver_reads(home.db_url, home.trust_root(), views=True) as reads:
            return reads is not None

    def leave_views_behind(self) -> None:
        self.notes += 1
        key = self.home / "keys" / "demo-attester.pem"
        done = self("attest", SEED, "--type", "note", "--body", f"note {self.notes}", "--key", key)
        assert done.exit_code == 0, done.output
        assert not self.door_open()


@pytest.fixture
def demo(tmp_path: Path, db_url: str) -> Demo:
    demo = Demo(tmp_path, db_url)
    done = demo("demo")
    assert done.exit_code == 0, done.output
    return demo


ASKED = (
    ["B200"],
    ["B200", "--json"],
    ["b200", "stack", "v1.1", "decoder", "--json"],
    ["--gpu", "B200", "--level", "reported", "--sort", "name"],
    ["056_language", "--sort", "newest", "--per-page", "1", "--page", "2"],
    ["--dtype", "bf16", "--license", "not stated", "--installable", "no", "--json"],
    ["no-such-kernel"],  # exit 1: nothing matches
    ["no-such-kernel", "--json"],
    ["B200", "--sort", "sideways"],  # refused: an unknown sort
    ["B200", "--level", "rumoured"],  # refused: an unknown evidence level
    ["B200", "--page", "9"],  # refused: past the last page
)


def test_search_prints_the_same_through_the_door_and_the_full_path(demo: Demo) -> None:
    for argv in ASKED:
        demo.leave_views_behind()
        full = demo("search", *argv)
        if not demo.door_open():  # refused before it folded: fold for the door's turn
            assert full.exit_code == 1 and "malformed-request" in full.output, argv
            assert demo("projections", "rebuild").exit_code == 0
        assert demo.door_open(), argv
        door = demo("search", *argv)
        assert (door.exit_code, door.stdout, door.output) == (
            full.exit_code,
            full.stdout,
            full.output,
        ), argv
        assert door.exception is None or isinstance(door.exception, SystemExit), argv
    # The answers differ by what was asked: neither way prints a constant.
    assert "2 comparison groups match 'B200'" in demo("search", "B200").stdout
    assert demo("search", "no-such-kernel").exit_code == 1
    assert "unknown sort 'sideways'" in demo("search", "B200", "--sort", "sideways").output
