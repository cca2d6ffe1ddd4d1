"""The read-model side of the CLI over the demo ledger, on SQLite and PostgreSQL: `show` with
evidence and standings, `leaderboard`, `compare` and `projections rebuild|status`."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from api.cli.main import app
from api.demo import COHORT_FILE, _data
from ledger.home import LedgerHome
from ledger.signing.authoring import ingestion_envelope

SEED = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
RUN_21613 = "sha256:7d1516c14ea952d53ea9d4646926919b9449e6029ea769059b6ce32c0ab9889b"
RUN_36818 = "sha256:b2f0e91856873b1733ce301704de66e75276b2a348a3d71f37cbac9e11198681"
KEY = "sha256:5cd4617efda4cb445cf7a71560098124df3a89c27d0ed74bc852d46e306c1e62"
DEFINITION = "056_language_model_decoder_prenorm_attention_ffn_residual_backward"


class Demo:
    def __init__(self, home: Path, db_url: str) -> None:
        self.home, self.db_url = home, db_url
        self.runner = CliRunner()

    def __call__(self, *args: str, code: int = 0) -> Any:
        result = self.runner.invoke(
            app,
            [*args, "--home", str(self.home), "--db", self.db_url],
            env={"KERNELINDEX_KEY_PASSPHRASE": ""},
        )
        assert result.exit_code == code, f"{args}: exit {result.exit_code}\n{result.output}"
        assert result.exception is None or isinstance(result.exception, SystemExit)
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "--json").stdout)


@pytest.fixture
def demo(tmp_path: Path, db_url: str) -> Demo:
    cli = Demo(tmp_path / "demo", db_url)
    cli("demo")
    return cli


def test_show_has_evidence_standings_and_compare_with_first(demo: Demo) -> None:
    record = demo.json("show", SEED[:19])
    assert record["evidence"]["level"] == "reported"
    assert record["evidence"]["reasons"][0] == "source marked the run passed"
    assert record["comparisonKey"] == KEY
    native = record["standings"]["source-native"]
    assert native["label"] == "Rank 3 of 3 in its comparison group · source-native comparison"
    assert (native["rank"], native["of"], native["value"]) == (3, 3, 1750693)
    assert record["compareWithFirst"]["b"] == RUN_21613
    assert record["compareWithFirst"]["ratio"] == pytest.approx(1.1678, abs=1e-4)
    # The demo's attestation is on the record and moved nothing.
    assert len(record["attestations"]) == 1
    text = demo("show", SEED).stdout
    assert "Rank 3 of 3 in its comparison group · source-native comparison" in text
    assert "reported" in text


def test_leaderboard_by_definition_and_gpu_shows_each_group_and_what_sets_it_apart(
    demo: Demo,
) -> None:
    """The README's example: two groups share definition and GPU; both are shown, each
    labelled by the part of its comparison key that differs (here the SOL stack version)."""
    result = demo("leaderboard", "--definition", DEFINITION, "--gpu", "NVIDIA B200")
    text = " ".join(result.stdout.split())
    assert "2 comparison groups match" in text and KEY in text
    found = demo.json("leaderboard", "--definition", DEFINITION, "--gpu", "NVIDIA B200")
    groups = found["groups"]
    assert [g["comparisonKey"] for g in groups].count(KEY) == 1 and len(groups) == 2
    labels = [g["label"] for g in groups]
    assert sorted(labels) == [
        "protocol SOL-ExecBench evaluation stack v1.0 · environment SOL-ExecBench NVIDIA B200,"
        " stack v1.0",
        "protocol SOL-ExecBench evaluation stack v1.1 · environment SOL-ExecBench NVIDIA B200,"
        " stack v1.1",
    ]
    # A prefix names a group, and the same prefix everywhere.
    assert demo.json("leaderboard", KEY[:15])["comparisonKey"] == KEY
    result = demo("leaderboard", "sha256:", code=1)
    assert "error[not-found]" in result.output
    result = demo("leaderboard", "--definition", "no-such-definition", code=1)
    assert "error[not-found]" in result.output and "no-such-definition" in result.output


def test_leaderboard_by_key(demo: Demo) -> None:
    board = demo.json("leaderboard", KEY)
    assert (board["comparisonKey"], board["view"]) == (KEY, "source-native")
    entries = board["entries"]
    assert [(e["run"], e["rank"], e["of"]) for e in entries] == [
        (RUN_21613, 1, 3),
        (RUN_36818, 2, 3),
        (SEED, 3, 3),
    ]
    assert [e["value"] for e in entries] == [1499085, 1541431, 1750693]
    assert [e["externalId"] for e in entries] == ["21613", "36818", "38823"]
    assert {e["evidenceLevel"] for e in entries} == {"reported"}
    assert [e["tiedWith"] for e in entries] == [[], [], []]  # lists, as the API sends them
    # The chart: one bar per run, the slowest the longest.
    text = demo("leaderboard", KEY).stdout
    assert "source-native comparison · 3 ranked" in text
    bars = [line.count("█") for line in text.splitlines() if "█" in line]
    assert len(bars) == 3 and bars == sorted(bars) and bars[-1] > bars[0]
    assert all(len(line) <= 80 for line in text.splitlines())  # the terminal's width


def test_leaderboard_min_level_verified_and_verified_view_are_empty(demo: Demo) -> None:
    assert demo.json("leaderboard", KEY, "--min-level", "verified")["entries"] == []
    assert demo.json("leaderboard", KEY, "--view", "verified")["entries"] == []
    assert len(demo.json("leaderboard", KEY, "--min-level", "reported")["entries"]) == 3
    assert "no run is ranked" in demo("leaderboard", KEY, "--view", "verified").stdout
    result = demo("leaderboard", KEY, "--min-level", "gold", code=1)
    assert "unknown evidence level" in result.output


def test_compare(demo: Demo) -> None:
    result = demo.json("compare", SEED[:19], RUN_21613[:19])
    assert (result["a"], result["b"]) == (SEED, RUN_21613)
    assert result["ratio"] == pytest.approx(1.1678, abs=1e-4)
    assert result["ratio"] == pytest.approx(1750693 / 1499085)
    paths = {d["path"] for d in result["differences"]}
    assert "run.metadata.name" in paths
    assert "ratio 1.1678" in demo("compare", SEED, RUN_21613).stdout
    assert result["comparable"] is True and result["notComparableBy"] is None
    # Across groups (stack v1.0 vs v1.1) the ratio is given, and said to rank nothing.
    other = demo.json("compare", SEED[:19], "sol-submission-15149")
    assert other["comparable"] is False and other["notComparableBy"] == "protocol"
    text = " ".join(demo("compare", SEED, "15149").stdout.split())
    assert "not in one comparison group: they differ in protocol" in text


def test_compare_fits_80_columns_and_reads_whole(demo: Demo) -> None:
    """`kernelindex compare A B | cat` at COLUMNS=80: no line wider, each field's path and
    both values on lines of their own, unfolded (a digest whole on its line)."""
    env = {**os.environ, "COLUMNS": "80", "KERNELINDEX_KEY_PASSPHRASE": ""}
    where = ["--home", str(demo.home), "--db", demo.db_url]
    code = "from api.cli.main import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", code, "compare", SEED, RUN_21613, *where],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[:3] == [
        f"a  {SEED}",
        f"b  {RUN_21613}",
        "primary latency:mean:ns: ratio 1.1678 (a ÷ b)",
    ]
    differences = demo.json("compare", SEED, RUN_21613)["differences"]
    assert len(differences) > 10
    for d in differences:
        at = lines.index(d["path"])
        end = next((i for i in range(at + 1, len(lines)) if not lines[i].startswith(" ")), None)
        block = "\n".join(lines[at + 1 : end])
        a = str(d["a"]) if d["inA"] else "absent"
        b = str(d["b"]) if d["inB"] else "absent"
        assert block.startswith("    a  ") and "\n    b  " in block
        said_a, said_b = block[len("    a  ") :].split("\n    b  ")
        assert " ".join(said_a.split()) == " ".join(a.split())  # wrapped at words only
        assert " ".join(said_b.split()) == " ".join(b.split())
    digests = [d for d in differences if d["path"] == "run.spec.implementationDigest"]
    assert f"    a  {digests[0]['a']}" in lines


def test_projections_rebuild_is_identical_to_incremental(demo: Demo) -> None:
    status = demo.json("projections", "status")
    rebuilt = demo.json("projections", "rebuild")
    assert rebuilt["identicalToIncremental"] is True
    assert rebuilt["events"] == status["position"] > 0
    assert rebuilt["tables"] == status["tables"]
    assert set(rebuilt["tables"]) == {
        "kernelindex_view_runs",
        "kernelindex_view_ranks",
        "kernelindex_view_manifests",
        "kernelindex_view_records",
    }
    again = demo.json("projections", "status")
    assert (again["folded"], again["tables"]) == (0, status["tables"])
    # The demo is idempotent: running it again changes no view.
    demo("demo")
    assert demo.json("projections", "status")["tables"] == status["tables"]


def test_search_finds_groups_by_every_word_and_tells_lookalikes_apart(demo: Demo) -> None:
    found = demo.json("search", "B200", "056_language")["items"]
    assert KEY in [g["comparisonKey"] for g in found] and len(found) == 2
    # Every word must match: the stack version separates the two lookalike groups.
    only = demo.json("search", "b200", "stack", "v1.1", "decoder")["items"]
    assert [g["comparisonKey"] for g in only] == [KEY]
    assert only[0]["top"]["run"] == RUN_21613 and only[0]["matchingRuns"] == 3
    text = " ".join(demo("search", "B200", "056_language").stdout.split())
    assert "2 comparison groups match" in text and "stack v1.0" in text
    assert "no comparison group matches" in demo("search", "no-such-kernel", code=1).stdout
    # LIKE wildcards in a word are matched literally, not as wildcards.
    assert demo.json("search", "%")["items"] == [] and demo.json("search", "_")["items"] != []
    # Only values match: a JSON key of every manifest finds nothing, in any case.
    for key in ("spec", "metadata", "AXES", "B200 name"):
        assert demo.json("search", *key.split())["items"] == [], key


@pytest.mark.parametrize("values", [(1.0, 1e308), (5e-324, 1.7976931348623157e308)])
def test_a_leaderboard_draws_values_at_the_floats_edges(
    demo: Demo, db_url: str, values: tuple[float, float]
) -> None:
    """A claimed 1e308 is a finite number admission accepts: its group's board printed a
    traceback (40 × 1e308 overflowed) until the ratio came first."""
    home = LedgerHome.at(demo.home, db_url)
    ledger = home.open()
    runs = []
    for i, value in enumerate(values):
        manifests = copy.deepcopy(_data(COHORT_FILE)["cohort"][0])
        manifests["run"]["metadata"]["name"] = f"edge-{i}"
        manifests["run"]["spec"]["observedAt"] = f"2026-08-2{i}T00:00:00.000Z"
        manifests["run"]["spec"].pop("timing")
        manifests["run"]["spec"]["measurements"] = [
            {"metric": "latency", "unit": "ns", "statistic": "mean", "value": value}
        ]
        runs.append(ledger.append(ingestion_envelope(manifests, home.key("ingester"))))
    key = demo.json("show", runs[0].subject_digest)["comparisonKey"]
    text = demo("leaderboard", key).stdout  # exit 0, no traceback
    assert "source-native comparison · 3 ranked" in text  # the cohort's run and these two
    board = demo.json("leaderboard", key)["entries"]
    assert sorted(e["value"] for e in board if e["name"].startswith("edge-")) == list(values)


def test_projections_rebuild_replaces_views_another_build_made(demo: Demo) -> None:
    """Views stamped by an older build (fewer columns): rebuild refolds them as this build's
    instead of reading the old tables with this build's columns."""
    status = demo.json("projections", "status")
    engine = create_engine(demo.db_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE kernelindex_view_schema SET version = version - 1"))
            conn.execute(text("ALTER TABLE kernelindex_view_records DROP COLUMN dated"))
    finally:
        engine.dispose()
    rebuilt = demo.json("projections", "rebuild")
    assert rebuilt["tables"] == status["tables"] and rebuilt["events"] == status["position"]
