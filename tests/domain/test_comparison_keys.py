"""Comparison keys (DESIGN.md §8) against every benchmark run of the KernelIndex catalog export.

Each of the 7,857 ``benchmark_runs`` rows states ``comparisonKey``, ``protocolKey``,
``environmentKey``, ``correctnessKey`` and its primary measurement; all must reproduce from
the row's run manifest and its workload manifest (the ``workloads`` row named by
``workloadId``). The full sweep validates every manifest and takes ~3 s, so it is not marked
slow.
"""

from __future__ import annotations

import copy
import io
import json
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from domain.canonical import digest_of
from domain.comparison import (
    NO_MEASUREMENT,
    ComparisonComponents,
    ComparisonKeyError,
    PrimaryMeasurement,
    comparison_components,
    comparison_key,
    correctness_key,
    environment_key,
    metric_key,
    operation_digest,
    primary_measurement,
    protocol_key,
)
from domain.errors import DigestMismatchError, ManifestError
from tests.paths import CONFORMANCE

SHARED = CONFORMANCE
CATALOG = SHARED / "fixtures" / "kernelindex-catalog" / "catalog-2026-08-16-0022af0b.jsonl.zst"
CATALOG_RUNS = 7857

SEED_WORKLOAD = "sha256:48004025de8965e3b352e082dbbf3d2b8fda4fef5228ed6d4d94e7a479e36421"
# The seed run is not in the export (it was observed later), but its workload, protocol and
# environment are: it joins the group of SOL-ExecBench submissions 21613 and 36818.
SEED_COMPARISON_KEY = "sha256:5cd4617efda4cb445cf7a71560098124df3a89c27d0ed74bc852d46e306c1e62"


@cache
def _catalog() -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """(benchmark_runs rows, workloads rows by id)."""
    import zstandard

    runs: list[dict[str, Any]] = []
    workloads: dict[str, dict[str, Any]] = {}
    with CATALOG.open("rb") as raw:
        reader = zstandard.ZstdDecompressor().stream_reader(raw)
        for line in io.TextIOWrapper(reader, encoding="utf-8"):
            record = json.loads(line)
            if record["table"] == "benchmark_runs":
                runs.append(record["row"])
            elif record["table"] == "workloads":
                workloads[record["row"]["id"]] = record["row"]
    return runs, workloads


@pytest.fixture(scope="module")
def catalog() -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    return _catalog()


@pytest.fixture(scope="module")
def seed(seed_path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(seed_path.read_text("utf-8"))
    return loaded


def _stated(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "comparisonKey": row["comparisonKey"],
        "protocolKey": row["protocolKey"],
        "environmentKey": row["environmentKey"],
        "correctnessKey": row["correctnessKey"],
        "primary": (
            row["primaryMetric"],
            row["primaryStatistic"],
            row["primaryUnit"],
            row["primaryValue"],
        ),
    }


def _ours(row: dict[str, Any], workload: dict[str, Any], *, trusted: bool) -> dict[str, Any]:
    run = row["manifest"]["run"]
    parts = comparison_components(run, workload["manifest"], trusted=trusted)
    return {
        "comparisonKey": parts.key,
        "protocolKey": parts.protocol,
        "environmentKey": parts.environment,
        "correctnessKey": parts.correctness,
        "primary": tuple(primary_measurement(run)),
    }


def _sweep(
    catalog: tuple[list[dict[str, Any]], dict[str, dict[str, Any]]], step: int, *, trusted: bool
) -> Counter[str]:
    runs, workloads = catalog
    failures: list[str] = []
    metrics: Counter[str] = Counter()
    for index in range(0, len(runs), step):
        row = runs[index]
        workload = workloads[row["workloadId"]]
        try:
            ours = _ours(row, workload, trusted=trusted)
        except Exception as exc:  # report every failure, not just the first
            failures.append(f"benchmark_runs[{index}]: {type(exc).__name__}: {exc}")
            continue
        stated = _stated(row)
        for field, value in stated.items():
            if ours[field] != value or type(ours[field]) is not type(value):
                failures.append(f"benchmark_runs[{index}] {field}: {ours[field]} != {value}")
        metrics[metric_key(row["manifest"]["run"])] += 1
    assert not failures, f"{len(failures)} mismatches:\n" + "\n".join(failures[:20])
    return metrics


def test_every_catalog_run_reproduces_its_keys(catalog: Any) -> None:
    """All 7,857 runs: comparison, protocol, environment and correctness keys, primary."""
    runs, _ = catalog
    assert len(runs) == CATALOG_RUNS
    metrics = _sweep(catalog, 1, trusted=False)
    assert sum(metrics.values()) == CATALOG_RUNS
    # The metric component is not always latency (DESIGN.md §8 said "latency:<stat>:ns").
    assert metrics == Counter(
        {
            "latency:mean:ns": 4636,
            "score:geomean:s": 2063,
            "score:unspecified:s": 1072,
            "none": 86,
        }
    )


def test_trusted_reading_gives_the_same_keys(catalog: Any) -> None:
    _sweep(catalog, 20, trusted=True)


def test_the_recipe_spelled_out(catalog: Any) -> None:
    """The exact JSON that is hashed, on one run of each metric shape."""
    runs, workloads = catalog
    seen: set[str] = set()
    for row in runs:
        run = row["manifest"]["run"]
        metric = row["primaryMetric"]
        if metric in seen:
            continue
        seen.add(metric)
        workload = workloads[row["workloadId"]]["manifest"]
        spec = run["spec"]
        if metric == "none":
            metric_text = "none"
        else:
            metric_text = f"{metric}:{row['primaryStatistic']}:{row['primaryUnit']}"
        hashed = {
            "v": 1,
            "operation": workload["spec"]["operationSpecDigest"],
            "workload": spec["workloadDigest"],
            "protocol": spec["protocolDigest"],
            "environment": spec["environmentDigest"],
            # wrapped: the digest of {"correctness": block}, not of the block
            "correctness": digest_of({"correctness": workload["spec"]["correctness"]}),
            "metric": metric_text,
        }
        assert digest_of(hashed) == row["comparisonKey"]
        assert digest_of(workload["spec"]["correctness"]) != row["correctnessKey"]
        assert comparison_components(run, workload).as_json() == hashed
    assert seen == {"latency", "score", "none"}


def test_component_functions(catalog: Any) -> None:
    runs, workloads = catalog
    row = runs[0]
    run = row["manifest"]["run"]
    workload = workloads[row["workloadId"]]["manifest"]
    assert protocol_key(run) == row["protocolKey"] == run["spec"]["protocolDigest"]
    assert environment_key(run) == row["environmentKey"] == run["spec"]["environmentDigest"]
    assert correctness_key(workload) == row["correctnessKey"]
    assert operation_digest(workload) == workload["spec"]["operationSpecDigest"]


def test_every_group_shares_operation_workload_protocol_environment(catalog: Any) -> None:
    runs, workloads = catalog
    groups: dict[str, set[tuple[str, ...]]] = {}
    for row in runs[::5]:
        parts = comparison_components(
            row["manifest"]["run"], workloads[row["workloadId"]]["manifest"], trusted=True
        )
        groups.setdefault(row["comparisonKey"], set()).add(
            (parts.operation, parts.workload, parts.protocol, parts.environment, parts.metric)
        )
    assert all(len(members) == 1 for members in groups.values())


# --- the seed run ---------------------------------------------------------------------------------


def _seed_workload(catalog: Any) -> dict[str, Any]:
    _, workloads = catalog
    found = [w for w in workloads.values() if w["workloadDigest"] == SEED_WORKLOAD]
    assert len(found) == 1, "the catalog holds the seed run's workload"
    manifest: dict[str, Any] = found[0]["manifest"]
    return manifest


def test_seed_comparison_key(catalog: Any, seed: dict[str, Any]) -> None:
    workload = _seed_workload(catalog)
    assert workload["kind"] == "WorkloadSuite"
    assert comparison_key(seed["run"], workload) == SEED_COMPARISON_KEY
    assert metric_key(seed["run"]) == "latency:mean:ns"
    assert primary_measurement(seed["run"]) == ("latency", "mean", "ns", 1750693)
    runs, _ = catalog
    peers = sorted(
        row["manifest"]["run"]["spec"]["sourceNative"]["externalId"]
        for row in runs
        if row["comparisonKey"] == SEED_COMPARISON_KEY
    )
    assert peers == ["21613", "36818"]


def test_duration_text_gives_the_same_key(catalog: Any, seed: dict[str, Any]) -> None:
    run = copy.deepcopy(seed["run"])
    run["spec"]["timing"]["latencyNs"]["mean"] = "1.750693 ms"
    assert primary_measurement(run).value == 1750693
    assert comparison_key(run, _seed_workload(catalog)) == SEED_COMPARISON_KEY


def test_a_workload_that_is_not_the_runs_is_refused(catalog: Any, seed: dict[str, Any]) -> None:
    other = copy.deepcopy(_seed_workload(catalog))
    other["spec"]["correctness"]["description"] = "changed"
    with pytest.raises(DigestMismatchError, match="workload manifest digests to"):
        comparison_key(seed["run"], other)


def test_without_a_workload_operation_and_correctness_are_needed(
    catalog: Any, seed: dict[str, Any]
) -> None:
    workload = _seed_workload(catalog)
    with pytest.raises(ComparisonKeyError, match="unknown"):
        comparison_key(seed["run"], None)
    with pytest.raises(ComparisonKeyError):
        comparison_key(seed["run"], None, operation=operation_digest(workload))
    assert (
        comparison_key(
            seed["run"],
            None,
            operation=operation_digest(workload),
            correctness=workload["spec"]["correctness"],
        )
        == SEED_COMPARISON_KEY
    )
    with pytest.raises(ComparisonKeyError, match="come from the workload"):
        comparison_key(seed["run"], workload, operation=operation_digest(workload))
    with pytest.raises(ComparisonKeyError, match="not a sha256"):
        comparison_key(seed["run"], None, operation="abc", correctness={"comparator": "x"})


def test_wrong_kinds_are_refused(catalog: Any, seed: dict[str, Any]) -> None:
    workload = _seed_workload(catalog)
    with pytest.raises(ManifestError):
        comparison_key(seed["protocol"], workload, trusted=True)
    with pytest.raises(ManifestError):
        comparison_key(seed["run"], seed["environment"], trusted=True)
    with pytest.raises(ManifestError):  # schema validation when not trusted
        comparison_key({**seed["run"], "spec": {**seed["run"]["spec"], "x": 1}}, workload)


def test_every_component_changes_the_key() -> None:
    base = ComparisonComponents(
        operation="sha256:" + "1" * 64,
        workload="sha256:" + "2" * 64,
        protocol="sha256:" + "3" * 64,
        environment="sha256:" + "4" * 64,
        correctness="sha256:" + "5" * 64,
        metric="latency:mean:ns",
    )
    keys = {base.key}
    for field in ("operation", "workload", "protocol", "environment", "correctness"):
        keys.add(ComparisonComponents(**{**base.as_json(), field: "sha256:" + "f" * 64}).key)
    keys.add(ComparisonComponents(**{**base.as_json(), "metric": "latency:median:ns"}).key)
    keys.add(ComparisonComponents(**{**base.as_json(), "v": 2}).key)
    assert len(keys) == 8


def test_primary_measurement_precedence(seed: dict[str, Any]) -> None:
    run = copy.deepcopy(seed["run"])
    run["spec"]["measurements"] = [
        {"metric": "latency", "statistic": "std", "unit": "ns", "value": 3}
    ]
    assert primary_measurement(run) == PrimaryMeasurement("latency", "mean", "ns", 1750693)
    del run["spec"]["timing"]
    assert primary_measurement(run) == PrimaryMeasurement("latency", "std", "ns", 3)
    del run["spec"]["measurements"]
    assert primary_measurement(run) == NO_MEASUREMENT
    assert NO_MEASUREMENT.key == "none"
    run = copy.deepcopy(seed["run"])
    run["spec"]["timing"]["primaryStatistic"] = "median"  # named but not reported
    assert primary_measurement(run) == PrimaryMeasurement("latency", "median", "ns", None)
