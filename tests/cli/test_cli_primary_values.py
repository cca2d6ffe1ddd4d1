"""Every run shows the measurement it is ranked by (issue 14: GPU MODE score runs showed
"— unknown latency" and `primary none` while ranked by their score).

A sweep over every run of every source fixture: the record (`show --json`, the run page's
data) states the same primary measurement as the leaderboard views, in its own metric and
unit, and `show` prints it readably. On SQLite and PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, select

from api.display import format_measurement, source_summary, unranked_reason
from domain.quantities import format_number, format_value
from projections.tables import runs
from tests.cli_session import Cli

SOURCES = [
    ("sol-leaderboard", "fixtures/sol-leaderboard"),
    ("flashinfer-trace", "fixtures/flashinfer-trace"),
    ("gpumode", "fixtures/gpumode/fp8-mm-top.json"),
    ("sol-execbench", "fixtures/sol-execbench/cuda_cpp-rmsnorm"),
]


@pytest.fixture
def cli(tmp_path: Path, db_url: str, shared: Path) -> Cli:
    session = Cli(tmp_path / "home", db_url)
    session("init")
    for kind, target in SOURCES:
        session("import", kind, shared / target)
    return session


def _view_rows(db_url: str) -> list[dict[str, object]]:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            query = select(runs.c.run_digest, runs.c.metric, runs.c.statistic, runs.c.unit)
            return [dict(r) for r in conn.execute(query.add_columns(runs.c.claimed)).mappings()]
    finally:
        engine.dispose()


def test_every_run_record_states_the_measurement_it_is_ranked_by(cli: Cli) -> None:
    cli("show", "sha256:" + "0" * 64, ok=False)  # catch the views up (and a clear miss)
    rows = _view_rows(cli.db_url)
    assert len(rows) >= 10, rows  # (GPU MODE's score runs are swept on the catalog: realdata)
    for row in rows:
        record = cli.json("show", row["run_digest"])
        primary = record["primary"]
        assert (primary["metric"], primary["statistic"], primary["unit"]) == (
            row["metric"],
            row["statistic"],
            row["unit"],
        ), row["run_digest"]
        if row["claimed"] is None:
            assert primary["value"] is None
            continue
        assert primary["value"] == pytest.approx(row["claimed"])
        shown = cli("show", row["run_digest"]).output
        assert format_measurement(primary) in " ".join(shown.split()), shown
        # The history says the ingestion's claim the same way (not as a raw float).
        said = " ".join(cli("history", row["run_digest"]).output.split())
        assert format_measurement(primary) in said, said


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (1750693, "ns", "1.751 ms"),
        (6.99174e-05, "s", "69.92 µs"),
        (0.049509000000000004, "ratio", "0.049509 ratio"),
        (None, "s", "—"),
        (float("nan"), "ns", "—"),
        (812, None, "812 ns"),
    ],
)
def test_values_read_in_their_unit_without_binary_tails(
    value: float | None, unit: str | None, text: str
) -> None:
    assert format_value(value, unit) == text


def test_published_numbers_read_as_published_without_binary_tails() -> None:
    assert format_number(0.049509000000000004) == "0.049509"
    assert format_number(0.559752) == "0.559752"
    assert format_number(1.750693) == "1.750693"
    assert format_number(1234567) == "1,234,567"


def test_a_sol_run_is_summed_up_as_sol_does_and_other_sources_are_not_invented() -> None:
    seed = {
        "sol_score": 0.559752,
        "latency_ms": 1.750693,
        "avg_speedup": 1.1676,
        "fast_1_count": 13,
        "fast_1_total": 16,
    }
    assert source_summary("sol-execbench", seed) == (
        "SOL 0.5598 · 1.17× reference · 13/16 cases faster"
    )
    assert source_summary("sol-execbench", {"sol_score": 0.5}) == "SOL 0.5000"
    assert source_summary("sol-execbench", {"sol_score": "0.5"}) is None
    assert source_summary("gpumode-kernelbot", seed) is None
    assert source_summary(None, None) is None


@pytest.mark.parametrize(
    ("record", "says"),
    [
        ({"workloadDigest": "sha256:ab"}, "no comparison group: the ledger does not hold"),
        ({}, "names no workload"),
        ({"comparisonKey": "k", "retracted": True}, "retracted"),
        ({"comparisonKey": "k", "supersededBy": "sha256:cd"}, "superseded by sha256:cd"),
        ({"comparisonKey": "k", "status": "failed"}, "marked it failed"),
        ({"comparisonKey": "k", "status": "passed", "primary": {}}, "no primary value"),
    ],
)
def test_an_unranked_run_says_why(record: dict[str, object], says: str) -> None:
    assert says in unranked_reason(record)
