"""The KernelIndex catalog export mirrored as records (issue 3, item 4).

All 7,857 ``benchmark_runs`` rows of ``catalog-2026-08-16-0022af0b`` map to records whose run
digests and comparison keys equal the export's; a row whose content no longer matches a digest
it states is refused with a reason, and the other rows still come out. The full sweep takes
about 6 s (mapping) on one core, so it is not marked slow.
"""

from __future__ import annotations

import copy
import json
import time
from collections import Counter
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from domain.canonical import canonical_json
from domain.comparison import comparison_key
from domain.importers.flashinfer_trace import external_id_of
from domain.importers.kernelindex_catalog import (
    DEFAULT_MANIFEST_TABLES,
    catalog_manifests,
    map_kernelindex_catalog,
)
from domain.importers.records import ImportRecord, Rejection
from domain.manifests.canonical_form import manifest_digest

CATALOG_NAME = "catalog-2026-08-16-0022af0b.jsonl.zst"
CATALOG_RUNS = 7857
RUNS_BY_SOURCE = {"gpumode-kernelbot": 5215, "flashinfer-bench": 1937, "sol-execbench": 705}
MANIFESTS_BY_TABLE = {
    "workloads": 5627,
    "implementations": 4250,
    "serving_runs": 722,
    "projects": 615,
    "operations": 449,
    "serving_configurations": 130,
    "serving_stack_revisions": 71,
    "serving_workloads": 17,
    "model_revisions": 6,
}


@cache
def _lines(path: Path) -> tuple[bytes, ...]:
    import zstandard

    with path.open("rb") as raw:
        data = zstandard.ZstdDecompressor().stream_reader(raw).read()
    return tuple(data.split(b"\n"))


@pytest.fixture(scope="module")
def lines(shared: Path) -> tuple[bytes, ...]:
    path = shared / "fixtures" / "kernelindex-catalog" / CATALOG_NAME
    if not path.is_file():
        pytest.skip(f"catalog export not found at {path}")
    return _lines(path)


@pytest.fixture(scope="module")
def run_rows(lines: tuple[bytes, ...]) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for line in lines:
        if line.startswith(b'{"table":"benchmark_runs"'):
            row = json.loads(line)["row"]
            rows[row["id"]] = row
    return rows


def _table(line: bytes) -> str | None:
    """The table of an export line (each starts with ``{"table":"<name>"``)."""
    if not line.startswith(b'{"table":"'):
        return None
    return line[10 : line.index(b'"', 10)].decode()


def _sample(lines: tuple[bytes, ...], runs: int) -> list[bytes]:
    """A small export: the sources, the first ``runs`` runs and the rows they name, in order."""
    run_lines = [line for line in lines if _table(line) == "benchmark_runs"][:runs]
    named = {
        json.loads(line)["row"][key].encode()
        for line in run_lines
        for key in ("workloadId", "implementationId")
    }
    context = [
        line
        for line in lines
        if _table(line) == "sources"
        or (
            _table(line) in ("workloads", "implementations")
            and line[line.index(b'"id":"') + 6 : line.index(b'"id":"') + 42] in named
        )
    ]
    return [*context, *run_lines]


def _edit(line: bytes, change: Callable[[dict[str, Any]], object]) -> bytes:
    record = json.loads(line)
    change(record["row"])
    return json.dumps(record).encode()


def _index_of(lines: list[bytes], table: str, row_id: str) -> int:
    for number, line in enumerate(lines):
        if _table(line) == table and json.loads(line)["row"]["id"] == row_id:
            return number
    raise AssertionError(f"{table} {row_id} not in the sample")


def test_every_catalog_run_maps_with_the_exports_digests_and_keys(
    lines: tuple[bytes, ...], run_rows: dict[str, dict[str, Any]]
) -> None:
    started = time.perf_counter()
    results = list(map_kernelindex_catalog(lines))
    elapsed = time.perf_counter() - started
    print(f"\nmapped {len(results)} catalog runs in {elapsed:.1f} s")
    rejections = [r for r in results if isinstance(r, Rejection)]
    assert rejections == []
    records = [r for r in results if isinstance(r, ImportRecord)]
    assert len(records) == CATALOG_RUNS == len(run_rows)
    assert Counter(r.source for r in records) == RUNS_BY_SOURCE
    # One ledger id per run (KernelBot submission ids are qualified by case and runner).
    assert len({(r.source, r.external_id) for r in records}) == CATALOG_RUNS
    seen: set[str] = set()
    for record in records:
        row = run_rows[json.loads(record.snapshot.content)["id"]]
        assert record.snapshot.content == canonical_json(row)
        seen.add(row["id"])
        manifests = record.manifests
        assert set(manifests) == {"run", "protocol", "environment", "workload", "implementation"}
        assert manifest_digest(manifests["run"]) == row["runDigest"]
        assert manifest_digest(manifests["protocol"]) == row["protocolKey"]
        assert manifest_digest(manifests["environment"]) == row["environmentKey"]
        key = comparison_key(manifests["run"], manifests["workload"], trusted=True)
        assert key == row["comparisonKey"]
        native = manifests["run"]["spec"]["sourceNative"]
        if "externalId" in native and record.source != "gpumode-kernelbot":
            assert record.external_id == native["externalId"]
        elif record.source == "flashinfer-bench":
            # The trace importer's id, made of what the manifests keep (issue 14): every
            # FlashInfer run of the export has what it needs, so none falls back to its row id.
            assert record.external_id == external_id_of(manifests) != row["id"]
        elif "externalId" not in native:
            assert record.external_id == row["id"]
    assert seen == set(run_rows)


def test_sample_maps(lines: tuple[bytes, ...]) -> None:
    sample = _sample(lines, 500)
    results = list(map_kernelindex_catalog(sample))
    assert len(results) == 500
    assert all(isinstance(r, ImportRecord) for r in results)


def test_a_tampered_run_is_refused_and_the_rest_still_map(lines: tuple[bytes, ...]) -> None:
    sample = _sample(lines, 20)
    runs = [i for i, line in enumerate(sample) if _table(line) == "benchmark_runs"]

    def faster(row: dict[str, Any]) -> None:  # edit a manifest field, keep runDigest
        spec = row["manifest"]["run"]["spec"]
        if "timing" in spec:
            spec["timing"]["latencyNs"]["mean"] = 1
        else:
            spec["measurements"][0]["value"] = 1e-9

    sample[runs[0]] = _edit(sample[runs[0]], faster)
    sample[runs[1]] = _edit(
        sample[runs[1]], lambda row: row.__setitem__("comparisonKey", "sha256:" + "0" * 64)
    )
    sample[runs[2]] = _edit(
        sample[runs[2]],
        lambda row: row["manifest"]["protocol"]["spec"]["measurement"].__setitem__(
            "primaryStatistic", "median"
        ),
    )
    sample[runs[3]] = _edit(sample[runs[3]], lambda row: row.__setitem__("status", "timeout"))
    results = list(map_kernelindex_catalog(sample))
    assert len(results) == 20
    rejections = [r for r in results if isinstance(r, Rejection)]
    assert [r.external_id for r in rejections] == [
        json.loads(sample[i])["row"]["id"] for i in runs[:4]
    ]
    assert "runDigest states" in rejections[0].reason
    assert "comparisonKey states" in rejections[1].reason
    assert "spec.protocolDigest" in rejections[2].reason  # the protocol no longer matches
    assert "status states 'timeout'" in rejections[3].reason
    assert sum(isinstance(r, ImportRecord) for r in results) == 16


def test_a_tampered_workload_or_implementation_refuses_its_runs(lines: tuple[bytes, ...]) -> None:
    sample = _sample(lines, 5)
    first_run = json.loads(next(line for line in sample if _table(line) == "benchmark_runs"))["row"]
    w = _index_of(sample, "workloads", first_run["workloadId"])
    sample[w] = _edit(
        sample[w],
        lambda row: row["manifest"]["spec"]["correctness"].__setitem__("comparator", "other"),
    )
    results = list(map_kernelindex_catalog(sample))
    refused = [r for r in results if isinstance(r, Rejection)]
    assert refused and refused[0].external_id == first_run["id"]
    assert "workloadDigest states" in refused[0].reason
    assert len(results) == 5

    sample = _sample(lines, 5)
    i = _index_of(sample, "implementations", first_run["implementationId"])
    sample[i] = _edit(
        sample[i], lambda row: row["manifest"]["spec"]["callable"].__setitem__("language", "cuda")
    )
    refused = [r for r in map_kernelindex_catalog(sample) if isinstance(r, Rejection)]
    assert refused and "implementationDigest states" in refused[0].reason


def test_a_run_before_its_workload_waits_and_malformed_lines_are_reported(
    lines: tuple[bytes, ...],
) -> None:
    sample = _sample(lines, 3)
    run_line = sample.pop()
    row = json.loads(run_line)["row"]
    w = _index_of(sample, "workloads", row["workloadId"])
    workload_line = sample.pop(w)
    reordered = [run_line, b"{not json", b"", *sample, workload_line]
    results = list(map_kernelindex_catalog(reordered))
    rejections = [r for r in results if isinstance(r, Rejection)]
    assert len(rejections) == 1 and rejections[0].reason.startswith("line 2: malformed JSON")
    records = [r for r in results if isinstance(r, ImportRecord)]
    assert len(records) == 3
    assert f"benchmark_runs:{row['id']}" in {r.snapshot.name for r in records}

    results = list(map_kernelindex_catalog([*sample, run_line]))  # the workload never comes
    assert isinstance(results[-1], Rejection)
    assert f"workload {row['workloadId']} is not in the export" in results[-1].reason


def test_catalog_manifests_yield_the_other_kinds(lines: tuple[bytes, ...]) -> None:
    rejected: list[Rejection] = []
    found = Counter(table for table, _ in catalog_manifests(lines, rejected=rejected))
    assert rejected == []
    assert dict(found) == MANIFESTS_BY_TABLE
    assert set(found) == set(DEFAULT_MANIFEST_TABLES)


def test_catalog_manifests_skip_a_mismatch_with_a_reason(lines: tuple[bytes, ...]) -> None:
    operations = [line for line in lines if line.startswith(b'{"table":"operations"')][:3]
    tampered = copy.copy(operations)
    tampered[0] = _edit(
        tampered[0], lambda row: row["manifest"]["spec"].__setitem__("family", "other")
    )
    rejected: list[Rejection] = []
    yielded = list(catalog_manifests(tampered, tables=["operations"], rejected=rejected))
    assert len(yielded) == 2 and all(kind == "operations" for kind, _ in yielded)
    assert len(rejected) == 1
    assert rejected[0].external_id == json.loads(operations[0])["row"]["id"]
    assert "semanticDigest states" in rejected[0].reason
    with pytest.raises(ValueError, match="benchmark_runs"):
        list(catalog_manifests(operations, tables=["benchmark_runs"]))
