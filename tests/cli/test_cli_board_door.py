"""``kernelindex leaderboard`` reads through the driver where the views are fresh (issue 33)
and through the full service where they are not: both print the very same bytes, table and
``--json``, errors included, on SQLite and PostgreSQL.

Each command runs twice on one ledger: first with the views behind (a group waiting for its
ranks, or an event not folded yet), so it takes the full path, which folds; then again, on
the views that fold left, through the driver. The door that answered is recorded, so a test
cannot pass by taking one path twice."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

import api.cli.driver
from api.cli.main import app
from api.demo import COHORT_FILE, _data
from api.service.driver_reads import DriverReads
from ledger.home import LedgerHome
from ledger.signing.authoring import ingestion_envelope

KEY = "sha256:5cd4617efda4cb445cf7a71560098124df3a89c27d0ed74bc852d46e306c1e62"
DEFINITION = "056_language_model_decoder_prenorm_attention_ffn_residual_backward"

# The leaderboard's forms: by key (a prefix), each option, and the listing of groups.
COMMANDS = [
    ["leaderboard", KEY[:19]],
    ["leaderboard", KEY, "--json"],
    ["leaderboard", KEY, "--order", "sol-score"],
    ["leaderboard", KEY, "--order", "sol-score", "--per-user", "--json"],
    ["leaderboard", KEY, "--from", "2", "--limit", "1"],
    ["leaderboard", KEY, "--min-level", "reported", "--json"],
    ["leaderboard", KEY, "--view", "verified"],
    ["leaderboard", "--definition", DEFINITION, "--gpu", "b200"],
    ["leaderboard", "--gpu", "NVIDIA B200", "--json"],
    ["leaderboard", "--definition", DEFINITION, "--json"],
    # Refusals, said alike.
    ["leaderboard", "--gpu", "no-such-gpu"],
    ["leaderboard", "--definition", "no-such-definition"],
    ["leaderboard", "sha256:0000000000"],
]


class Ledger:
    def __init__(self, home: Path, db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.home, self.db_url = home, db_url
        self.doors: list[bool] = []  # per command: whether the driver answered
        opened = api.cli.driver.quick_reads

        @contextmanager
        def recorded(*args: Any, **kwargs: Any) -> Iterator[DriverReads | None]:
            with opened(*args, **kwargs) as reads:
                self.doors.append(reads is not None)
                yield reads

        monkeypatch.setattr(api.cli.driver, "quick_reads", recorded)

    def __call__(self, *args: str) -> tuple[int, str, str]:
        result = CliRunner().invoke(
            app,
            [*args, "--home", str(self.home), "--db", self.db_url],
            env={"KERNELINDEX_KEY_PASSPHRASE": "", "COLUMNS": "120"},
        )
        assert result.exception is None or isinstance(result.exception, SystemExit), args
        return result.exit_code, result.stdout, result.stderr

    def sql(self, statement: str, **params: Any) -> None:
        engine = create_engine(self.db_url)
        try:
            with engine.begin() as conn:
                conn.execute(text(statement), params)
        finally:
            engine.dispose()


@pytest.fixture
def ledger(tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch) -> Ledger:
    made = Ledger(tmp_path / "demo", db_url, monkeypatch)
    made("demo")
    return made


def _stale(ledger: Ledger) -> None:
    """The board's group waits for its ranks: the next command's catch-up re-ranks it."""
    ledger.sql("INSERT INTO kernelindex_view_stale_groups (comparison_key) VALUES (:key)", key=KEY)


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_the_door_prints_what_the_full_path_prints(ledger: Ledger, argv: list[str]) -> None:
    _stale(ledger)
    full = ledger(*argv)
    door = ledger(*argv)
    assert ledger.doors == [False, True]
    assert door == full
    assert full[0] == (1 if "no-such" in " ".join(argv) or "0000000000" in argv[1] else 0)


def test_a_run_not_folded_yet_is_on_the_board_either_way(ledger: Ledger) -> None:
    """A SOL run appended to the board's group and not folded: the full path folds it in,
    with its SOL score; the driver then reads the same board."""
    home = LedgerHome.at(ledger.home, ledger.db_url)
    opened = home.open()
    try:
        code, before, _ = ledger("leaderboard", KEY, "--json")
        manifests = copy.deepcopy(_data(COHORT_FILE)["cohort"][1])  # one of KEY's runs
        run = manifests["run"]
        run["metadata"]["name"] = "sol-submission-99999"
        run["spec"]["observedAt"] = "2026-09-01T00:00:00.000Z"
        run["spec"]["sourceNative"]["metrics"]["sol_score"] = 0.9125
        run["spec"]["timing"]["latencyNs"]["mean"] = 1_000_000
        opened.append(ingestion_envelope(manifests, home.key("ingester")))
    finally:
        opened.close()
    full = ledger("leaderboard", KEY, "--order", "sol-score", "--json")
    door = ledger("leaderboard", KEY, "--order", "sol-score", "--json")
    assert ledger.doors == [True, False, True]
    assert door == full and code == 0 and full[1] != before
    assert '"name":"sol-submission-99999"' in full[1] and '"solScore":0.9125' in full[1]
