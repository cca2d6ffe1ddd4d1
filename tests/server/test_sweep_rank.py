"""A run whose comparison group is one workload of a sweep (FlashInfer-Bench's batch sizes)
says its rank among the runs of its workload and where that workload stands in the sweep, or,
as its workload's only run, that it has no rank among others — never a bare "Rank 1 of 1";
the same on its page, its ``/v1`` record, ``kernelindex show`` at 80 columns and the board."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient
from served_app import TEST_CONFIG

from api.server.app import create_app
from ledger.home import LedgerHome
from tests.cli_session import Cli

OPERATION = "fused_add_rmsnorm_h2048"
# The fixture's trace: batch sizes 1 and 6 with two runs each, 34 with one; in the order
# people count (a text sort would put 34 before 6).
SWEEP = {"batch_size=1": (1, 2), "batch_size=6": (2, 2), "batch_size=34": (3, 1)}


@pytest.fixture
def swept(db_url: str, tmp_path: Path, shared: Path) -> Iterator[tuple[Cli, TestClient[Any]]]:
    cli = Cli(tmp_path / "home", db_url)
    cli("init")
    cli("import", "flashinfer-trace", shared / "fixtures/flashinfer-trace")
    ledger = LedgerHome.at(tmp_path / "home", db_url).open()
    try:
        with TestClient(create_app(ledger, TEST_CONFIG)) as client:
            yield cli, client
    finally:
        ledger.close()


def _show_at_80(cli: Cli, digest: str) -> str:
    env = {
        **os.environ,
        "COLUMNS": "80",
        "KERNELINDEX_HOME": str(cli.home),
        "KERNELINDEX_DB": cli.db_url,
        "KERNELINDEX_KEY_PASSPHRASE": "",
    }
    code = "from api.cli.main import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", code, "show", digest],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _rank_cell(printed: str) -> str:
    """The `rank` row of `show`, its folded lines joined again."""
    lines = printed.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("rank "))
    cell = [lines[start][len("rank ") :]]
    for line in lines[start + 1 :]:
        if not line.startswith(" "):
            break
        cell.append(line)
    return " ".join(" ".join(cell).split())


def test_a_sweep_run_says_its_workload_rank_and_place_on_every_face(
    swept: tuple[Cli, TestClient[Any]],
) -> None:
    cli, c = swept
    groups = c.get(f"/v1/operations/{OPERATION}").json()["groups"]
    assert len(groups) == len(SWEEP)
    seen: dict[str, int] = {}
    for group in groups:
        board = c.get(f"/v1/leaderboards/{group['comparisonKey']}").json()
        place = board["group"]["sweep"]
        position, runs = SWEEP[place["workload"]]
        assert place == {"workload": place["workload"], "position": position, "workloads": 3}
        assert len(board["entries"]) == runs
        board_page = c.get(f"/leaderboards/{group['comparisonKey']}").text
        assert f"this is {place['workload']}, workload {position} of 3" in board_page
        for entry in board["entries"]:
            digest = entry["run"]
            record = c.get(f"/v1/runs/{digest}").json()
            assert record["sweep"] == place
            label = record["standings"]["source-native"]["label"]
            where = f"workload {place['workload']} ({position} of 3 in its sweep)"
            if runs == 1:
                expected = f"Not ranked: the only run of {where} · source-native comparison"
            else:
                expected = (
                    f"Rank {entry['rank']} of {runs} among the runs of {where} · "
                    "source-native comparison"
                )
            assert label == expected
            page = c.get(f"/runs/{digest}").text
            assert expected in page and "Rank 1 of 1" not in page
            assert f"{place['workload']} is workload {position} of 3" in page
            if runs == 1:
                assert "the only one of its workload" in page
                assert "is #1 in its comparison group" not in page
            printed = _show_at_80(cli, digest)
            assert max(len(line) for line in printed.splitlines()) <= 80
            assert _rank_cell(printed) == expected
            seen[place["workload"]] = seen.get(place["workload"], 0) + 1
    assert seen == {w: runs for w, (_, runs) in SWEEP.items()}
