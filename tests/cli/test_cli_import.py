"""`kernelindex import ...` on the conformance fixtures: idempotent, signed, faithful, and bad
records rejected one by one. On SQLite and PostgreSQL."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import zstandard
from typer.testing import CliRunner

from api.cli.main import app
from domain.importers.sol_execbench import MappedSolution, map_sol_execbench_solutions

SEED_PROTOCOL = "sha256:6383f62490dad270ad2146a94f67b48fba5cfcbc0b9b180f02665c69cc4433a0"
SEED_ENVIRONMENT = "sha256:f304afb2fedab4bbeadf8ac36a990ff517ab6e824dfe5a3ee0fe46259ff5e39f"


class Cli:
    def __init__(self, home: Path, db_url: str) -> None:
        self.env = {"KERNELINDEX_HOME": str(home), "KERNELINDEX_DB": db_url}
        self.runner = CliRunner()

    def __call__(self, *args: object, ok: bool = True) -> Any:
        result = self.runner.invoke(app, [str(a) for a in args], env=self.env)
        if ok:
            assert result.exit_code == 0, result.output
        return result

    def json(self, *args: object) -> Any:
        return json.loads(self(*args, "--json").stdout)


@pytest.fixture
def cli(tmp_path: Path, db_url: str) -> Cli:
    c = Cli(tmp_path / "home", db_url)
    c("init")
    return c


@pytest.mark.parametrize(
    ("kind", "target", "expected_new"),
    [
        ("sol-leaderboard", "fixtures/sol-leaderboard", 2),
        ("flashinfer-trace", "fixtures/flashinfer-trace", 5),
        ("gpumode", "fixtures/gpumode/fp8-mm-top.json", 6),
    ],
)
def test_importing_fixtures_twice_adds_nothing_the_second_time(
    cli: Cli, shared: Path, kind: str, target: str, expected_new: int
) -> None:
    first = cli.json("import", kind, shared / target)
    assert first["new"] == expected_new and first["rejected"] == []
    assert first["events"] == expected_new
    second = cli.json("import", kind, shared / target)
    assert (second["new"], second["events"], second["unchanged"]) == (0, 0, expected_new)


def test_sol_leaderboard_runs_use_the_seed_protocol_and_environment(cli: Cli, shared: Path) -> None:
    cli.json("import", "sol-leaderboard", shared / "fixtures/sol-leaderboard")
    board = cli.json("leaderboard", "--gpu", "NVIDIA B200", "--view", "source-native")
    run = board["groups"][0]["entries"][0]["run"]
    shown = cli.json("show", run)
    assert shown["protocol"]["digest"] == SEED_PROTOCOL
    assert shown["environment"]["digest"] == SEED_ENVIRONMENT
    assert shown["source"] == "sol-execbench"
    history = cli.json("history", run)["events"]
    assert [(e["event"], e["role"], e["verified"]) for e in history] == [
        ("Run.Ingested", "ingester", True)
    ]
    snapshot = history[0]["predicate"]["snapshotDigest"]
    raw = cli("artifact", "get", snapshot).stdout_bytes
    assert json.loads(raw)  # the raw source record, kept by digest


def test_malformed_records_are_rejected_one_by_one(cli: Cli, shared: Path, tmp_path: Path) -> None:
    folder = tmp_path / "board"
    folder.mkdir()
    for name in ("kernels.json", "kernel-4.json"):
        (folder / name).write_bytes((shared / "fixtures/sol-leaderboard" / name).read_bytes())
    submissions = json.loads((shared / "fixtures/sol-leaderboard/submissions.json").read_bytes())
    rows = submissions["data"]["submissions"]
    assert len(rows) >= 2
    rows[0]["latency_ms"] = -1.0  # a negative latency: that record alone is refused
    (folder / "submissions.json").write_text(json.dumps(submissions))
    result = cli.json("import", "sol-leaderboard", folder)
    assert len(result["rejected"]) == 1 and result["new"] == len(rows) - 1
    assert result["rejected"][0]["reason"]
    (folder / "submissions.json").write_text(json.dumps(submissions)[:-40])  # truncated JSON
    truncated = cli("import", "sol-leaderboard", folder, "--json", ok=False)
    reported = truncated.output if truncated.exit_code else json.loads(truncated.stdout)["rejected"]
    assert "JSON" in str(reported)


def test_catalog_sample_imports_with_comparison_keys_equal_to_the_export(
    cli: Cli, shared: Path, tmp_path: Path
) -> None:
    """The first 150 runs of the catalog (the whole export imports in ~3 minutes: -m slow)."""
    path = shared / "fixtures/kernelindex-catalog/catalog-2026-08-16-0022af0b.jsonl.zst"
    lines: list[bytes] = []
    runs = 0
    expected: dict[str, str] = {}
    with path.open("rb") as raw:
        for line in io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw)):
            row = json.loads(line)
            if row["table"] == "benchmark_runs":
                if runs >= 150:
                    continue
                runs += 1
                expected[row["row"]["runDigest"]] = row["row"]["comparisonKey"]
            lines.append(line)
    sample = tmp_path / "sample.jsonl"
    sample.write_bytes(b"".join(lines))
    result = cli.json("import", "kernelindex-catalog", sample)
    assert result["new"] == 150 and result["rejected"] == []
    for digest, key in list(expected.items())[:20]:
        assert cli.json("show", digest)["comparisonKey"] == key
    assert cli.json("import", "kernelindex-catalog", sample)["events"] == 0


@pytest.mark.slow
def test_the_whole_catalog_imports(cli: Cli, shared: Path) -> None:
    path = shared / "fixtures/kernelindex-catalog/catalog-2026-08-16-0022af0b.jsonl.zst"
    result = cli.json("import", "kernelindex-catalog", path)
    assert result["new"] == 7857 and result["rejected"] == []


def test_sol_execbench_solutions_are_kept_for_later_reruns(cli: Cli, shared: Path) -> None:
    folder = shared / "fixtures/sol-execbench/cuda_cpp-rmsnorm"
    result = cli("import", "sol-execbench", folder)
    assert "solutions kept as artifacts: 1" in result.stdout
    files = {p.name: p.read_bytes() for p in folder.iterdir() if p.suffix in (".json", ".jsonl")}
    (solution,) = [s for s in map_sol_execbench_solutions(files) if isinstance(s, MappedSolution)]
    source = solution.implementation["spec"]["source"]["contentDigest"]
    assert source == solution.bundle.digest
    assert cli("artifact", "get", source).stdout_bytes == solution.bundle.content
