"""The SOL-ExecBench leaderboard mapper against the seed, the fixtures and the public catalog.

Fixtures: ``conformance/fixtures/sol-leaderboard/`` (saved API responses for kernel 4),
``seed/run-38823.manifest.json`` and the KernelIndex catalog export. The catalog holds 705
SOL-ExecBench leaderboard runs; none of them is one of the fixture's two submissions, so each
catalog run is turned back into the API's shapes (its kernel definition from the catalog's
``OperationSpec`` and suite, its submission from the run's ``sourceNative``) and mapped again:
run, implementation, suite, operation, protocol and environment must all come out identical.
"""

from __future__ import annotations

import io
import itertools
import json
import math
from collections import Counter
from collections.abc import Mapping
from functools import cache
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.canonical import canonical_json
from domain.importers.catalog_form import js_round
from domain.importers.fields import MappingError
from domain.importers.records import ImportRecord, Rejection, Skipped
from domain.importers.sol_execbench import map_definition
from domain.importers.sol_execbench.operation import operation_from_definition
from domain.importers.sol_execbench.values import to_utc_instant
from domain.importers.sol_execbench.workload import workload_entry_key
from domain.importers.sol_leaderboard import (
    map_sol_leaderboard,
    map_sol_leaderboard_definitions,
    submission_status,
)
from domain.manifests.canonical_form import manifest_digest
from domain.manifests.manifest_set import check_manifest_set
from tests.paths import CONFORMANCE

SHARED = CONFORMANCE
FIXTURES = SHARED / "fixtures"
LEADERBOARD = FIXTURES / "sol-leaderboard"
SEED = FIXTURES / "seed" / "run-38823.manifest.json"
CATALOG = FIXTURES / "kernelindex-catalog" / "catalog-2026-08-16-0022af0b.jsonl.zst"

SEED_RUN = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
SEED_PROTOCOL = "sha256:6383f62490dad270ad2146a94f67b48fba5cfcbc0b9b180f02665c69cc4433a0"
SEED_ENVIRONMENT = "sha256:f304afb2fedab4bbeadf8ac36a990ff517ab6e824dfe5a3ee0fe46259ff5e39f"
SEED_WORKLOAD = "sha256:48004025de8965e3b352e082dbbf3d2b8fda4fef5228ed6d4d94e7a479e36421"
SEED_IMPLEMENTATION = "sha256:79ce1c4f83228f883eede68e3d672d5a9ce81969177f5520ccd47525f59abe4c"
# Kernel 4 in the catalog: its OperationSpec and WorkloadSuite.
KERNEL_4_OPERATION = "sha256:2bef7b0c188a44c3fe1801bf95b012b65d417d84b7c82daf09b9315e9e637b8b"
KERNEL_4_SUITE = "sha256:40b67b78664f3dacfaad8470e350d50465e537f7399b5d652edef35a8894be83"
CATALOG_SOL_RUNS = 705


def _files() -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(LEADERBOARD.iterdir()) if p.is_file()}


def _submissions() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads((LEADERBOARD / "submissions.json").read_bytes())[
        "data"
    ]["submissions"]
    return data


def _with_submissions(submissions: list[Any], name: str = "submissions.json") -> dict[str, bytes]:
    files = _files()
    files[name] = json.dumps({"data": {"submissions": submissions}}).encode()
    return files


def _records(items: list[ImportRecord | Rejection]) -> list[ImportRecord]:
    return [i for i in items if isinstance(i, ImportRecord)]


def _rejections(items: list[ImportRecord | Rejection]) -> list[Rejection]:
    return [i for i in items if isinstance(i, Rejection) and not isinstance(i, Skipped)]


def _skipped(items: list[ImportRecord | Rejection]) -> list[Skipped]:
    return [i for i in items if isinstance(i, Skipped)]


KERNELS_LISTING = (
    "kernels.json: the kernel listing (/api/kernels) holds no results; kernel-<id>.json are read"
)


# --- the fixture responses ------------------------------------------------------------------------


def test_fixture_submissions_become_valid_records() -> None:
    items = list(map_sol_leaderboard(_files()))
    records = _records(items)
    assert _rejections(items) == []
    # The one file not read is named, with the reason (issue 14: say why nothing came of it).
    assert [s.reason for s in _skipped(items)] == [KERNELS_LISTING]
    assert [r.external_id for r in records] == ["36577", "36157"]
    by_id = {s["id"]: s for s in _submissions()}
    for record in records:
        checked = check_manifest_set(record.manifests)
        assert set(record.manifests) == {
            "run",
            "protocol",
            "environment",
            "implementation",
            "workload",
        }
        submission = by_id[int(record.external_id)]
        assert record.source == "sol-execbench"
        assert record.snapshot.content == canonical_json(submission)
        assert record.snapshot.media_type == "application/json"
        assert [a.name for a in record.artifacts] == ["kernel-4.json"]
        assert checked.digests["workload"] == KERNEL_4_SUITE
        assert record.manifests["workload"]["kind"] == "WorkloadSuite"

    run = records[0].manifests["run"]
    assert run["metadata"] == {
        "name": "sol-submission-36577",
        "title": "Geometric · 004_attention_output_projection_with_reshape_backward · B200",
        "labels": {"worker": "external-prod-b200-modal-1"},
    }
    assert run["spec"]["status"] == "passed"
    assert run["spec"]["timing"] == {"primaryStatistic": "mean", "latencyNs": {"mean": 50546}}
    assert run["spec"]["observedAt"] == "2026-08-14T05:38:44.902Z"
    assert run["spec"]["sourceNative"] == {
        "source": "sol-execbench",
        "benchmark": "004_attention_output_projection_with_reshape_backward",
        "externalId": "36577",
        "metrics": {
            "latency_ms": 0.050546,
            "sol_score": 0.643494,
            "avg_speedup": 1.4217,
            "fast_1_count": 16,
            "fast_1_total": 16,
        },
    }
    implementation = records[0].manifests["implementation"]["spec"]
    assert implementation["projectRevision"] == {"version": "submission-36577"}
    assert implementation["callable"] == {"language": "unknown"}
    assert implementation["support"] == {
        "hardwareArchitectures": ["sm_100"],
        "productsTested": ["NVIDIA B200"],
        "dtypes": ["bf16"],
    }


def test_seed_protocol_and_environment_are_reproduced_exactly() -> None:
    seed = json.loads(SEED.read_bytes())
    for record in _records(list(map_sol_leaderboard(_files()))):
        assert record.manifests["protocol"] == seed["protocol"]
        assert record.manifests["environment"] == seed["environment"]
        assert manifest_digest(record.manifests["protocol"]) == SEED_PROTOCOL
        assert manifest_digest(record.manifests["environment"]) == SEED_ENVIRONMENT
        assert record.manifests["run"]["spec"]["protocolDigest"] == SEED_PROTOCOL
        assert record.manifests["run"]["spec"]["environmentDigest"] == SEED_ENVIRONMENT


def test_importing_is_deterministic() -> None:
    first = list(map_sol_leaderboard(_files()))
    second = list(map_sol_leaderboard(dict(reversed(list(_files().items())))))
    assert first == second
    assert [manifest_digest(r.manifests["run"]) for r in _records(first)] == [
        manifest_digest(r.manifests["run"]) for r in _records(second)
    ]


# --- the definition: operation, cases, suite ------------------------------------------------------


def test_kernel_definition_maps_axes_roles_and_matches_the_catalog() -> None:
    [mapped] = list(map_sol_leaderboard_definitions(_files()))
    assert not isinstance(mapped, Rejection)
    assert mapped.operation_digest == KERNEL_4_OPERATION
    assert mapped.suite_digest == KERNEL_4_SUITE
    axes = mapped.operation["spec"]["axes"]
    assert axes["batch_size"] == {"role": "variable", "type": "integer"}
    assert axes["num_heads"] == {"role": "constant", "type": "integer", "value": 32}
    assert mapped.operation["spec"]["family"] == "other"  # the first non-subset tag
    assert len(mapped.cases) == 16 and mapped.problems == ()
    catalog_cases = {
        row["workloadDigest"]
        for row in _catalog().workloads.values()
        if row["operationId"] == _catalog().operation_ids[KERNEL_4_OPERATION]
        and row["manifest"]["kind"] == "WorkloadCase"
    }
    assert set(mapped.case_digests.values()) == catalog_cases
    suite_cases = mapped.suite["spec"]["cases"] if mapped.suite else []
    assert suite_cases[0]["externalId"] == "edabdcf4bcec"


def test_expr_axes_become_derived() -> None:
    kernel = {
        "name": "Toy_Kernel",
        "tags": ["L2", "model:X", "Attention Ops"],
        "axes": {
            "B": {"type": "var"},
            "H": {"type": "const", "value": 8},
            "Half": {"type": "expr", "expression": "H // 2"},
        },
        "inputs": {"X": {"shape": ["B", "Half"], "dtype": "float8_e4m3fn"}},
        "outputs": {
            "out": {"shape": ["B", "H"], "dtype": "float32"},
            "s": {"shape": None, "dtype": "bool"},
        },
    }
    operation = operation_from_definition(kernel)
    manifest_digest(operation)  # validates
    spec = operation["spec"]
    assert spec["family"] == "attention-ops"
    assert spec["axes"] == {
        "b": {"role": "variable", "type": "integer"},
        "h": {"role": "constant", "type": "integer", "value": 8},
        "half": {"role": "derived", "type": "integer", "expression": "h // 2"},
    }
    assert spec["inputs"] == [
        {"name": "x", "tensor": {"shape": ["b", "half"], "dtype": "fp8_e4m3"}}
    ]
    assert spec["outputs"][1] == {"name": "s", "scalar": {"dtype": "bool"}}
    assert "reference" not in spec  # the leaderboard's "baseline" is not a reference


# --- statuses -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "correct", "disqualified", "expected"),
    [
        ("COMPLETED", True, False, "passed"),
        ("COMPLETED", False, False, "incorrect_numerical"),
        ("COMPLETED", True, True, "policy_violation"),
        ("FAILED", False, True, "policy_violation"),
        ("FAILED", None, False, "runtime_error"),
        ("COMPILE_ERROR", None, False, "compile_error"),
        ("TIMEOUT", None, False, "timeout"),
        ("OOM", None, False, "resource_exceeded"),
        ("REWARD_HACK", None, False, "suspected_reward_hack"),
    ],
)
def test_status_mapping(
    status: str, correct: bool | None, disqualified: bool, expected: str
) -> None:
    submission = {
        **_submissions()[0],
        "status": status,
        "is_correct": correct,
        "is_disqualified": disqualified,
    }
    assert submission_status(submission) == expected
    [record] = _records(list(map_sol_leaderboard(_with_submissions([submission]))))
    spec = record.manifests["run"]["spec"]
    assert spec["status"] == expected
    assert ("timing" in spec) == (expected == "passed")  # only a pass claims a latency
    assert spec["sourceNative"]["metrics"]["latency_ms"] == 0.050546


@pytest.mark.parametrize("status", ["PENDING", "RUNNING", "CANCELLED", "EXPLODED"])
def test_unfinished_or_unknown_status_is_rejected(status: str) -> None:
    submission = {**_submissions()[0], "status": status}
    [rejection] = _rejections(list(map_sol_leaderboard(_with_submissions([submission]))))
    assert rejection.external_id == "36577"
    assert status in rejection.reason


# --- malformed input ------------------------------------------------------------------------------


def test_bad_submissions_are_rejected_and_the_rest_still_come_out() -> None:
    good, other = _submissions()
    missing = {k: v for k, v in other.items() if k != "gpu_type"}
    negative = {**good, "id": 1, "latency_ms": -0.5}
    not_a_number = {**good, "id": 2, "sol_score": "high"}
    no_latency = {**good, "id": 3, "latency_ms": None}
    no_time = {**good, "id": 4, "finished_at": None, "submitted_at": None}
    bad_time = {**good, "id": 5, "finished_at": "yesterday"}
    unknown_kernel = {**good, "id": 6, "kernel_id": 99}
    wrong_kernel = {**good, "id": 7, "kernel_name": "005_something_else"}
    items = list(
        map_sol_leaderboard(
            _with_submissions(
                [
                    missing,
                    negative,
                    "not an object",
                    not_a_number,
                    no_latency,
                    good,
                    no_time,
                    bad_time,
                    unknown_kernel,
                    wrong_kernel,
                ]
            )
        )
    )
    assert [r.external_id for r in _records(items)] == ["36577"]
    reasons = {r.external_id: r.reason for r in _rejections(items)}
    assert "'gpu_type'" in reasons["36157"]
    assert "negative" in reasons["1"]
    assert "must be a number" in reasons["2"]
    assert "latency_ms" in reasons["3"]
    assert "finished_at" in reasons["4"]
    assert "not an ISO 8601 date-time" in reasons["5"]
    assert "kernel-99.json" in reasons["6"]
    assert "005_something_else" in reasons["7"]
    assert "submission #3" in reasons[None]


def test_truncated_files_are_rejected_without_stopping_the_others() -> None:
    files = _files()
    files["submissions-2.json"] = files["submissions.json"][:500]  # truncated JSON
    items = list(map_sol_leaderboard(files))
    assert [r.external_id for r in _records(items)] == ["36577", "36157"]
    [rejection] = _rejections(items)
    assert rejection.external_id is None
    assert rejection.reason.startswith("submissions-2.json: malformed JSON")

    files = _files()
    files["kernel-4.json"] = files["kernel-4.json"][:-10]
    items = list(map_sol_leaderboard(files))
    assert _records(items) == []
    assert len(_rejections(items)) == 2
    assert all("kernel-4.json: malformed JSON" in r.reason for r in _rejections(items))
    [definition] = list(map_sol_leaderboard_definitions(files))
    assert isinstance(definition, Rejection) and definition.external_id == "kernel/4"


def test_repeated_submissions() -> None:
    good, other = _submissions()
    items = list(map_sol_leaderboard(_with_submissions([good, other, good])))
    assert [r.external_id for r in _records(items)] == ["36577", "36157"]
    assert _rejections(items) == []
    repeat = [s for s in _skipped(items) if s.external_id == "36577"]
    assert [s.reason for s in repeat] == [
        "submissions.json submission #3: submission 36577 repeats submissions.json submission #1 "
        "verbatim (overlapping pages); imported once"
    ]
    changed = {**good, "sol_score": 0.9}
    items = list(map_sol_leaderboard(_with_submissions([good, changed])))
    assert [r.external_id for r in _records(items)] == ["36577"]
    assert "twice with different content" in _rejections(items)[0].reason


def test_what_yields_no_run_is_reported_with_the_reason() -> None:
    files = _files()
    page = files.pop("submissions.json")
    files["submission.json"] = page  # misnamed: not a submissions page
    items = list(map_sol_leaderboard(files))
    assert _records(items) == [] and _rejections(items) == []
    assert [s.reason for s in _skipped(items)] == [
        "no submissions*.json among the files, so there is no run to import",
        KERNELS_LISTING,
        "submission.json: neither kernel-<id>.json nor submissions*.json; not read",
    ]
    items = list(map_sol_leaderboard(_with_submissions([])))
    assert "submissions.json: no submissions" in [s.reason for s in _skipped(items)][-1]
    # A kernel file that cannot be mapped is reported even when no submission names it.
    files = _with_submissions([])
    files["kernel-9.json"] = b"{"
    [broken] = _rejections(list(map_sol_leaderboard(files)))
    assert broken.external_id == "kernel/9" and "no submission here names it" in broken.reason


def test_timestamps_and_rounding_follow_javascript() -> None:
    # Expected values computed with Node's Date#toISOString and Math.round.
    assert to_utc_instant("2026-08-14T05:38:44.902912", "t") == "2026-08-14T05:38:44.902Z"
    assert to_utc_instant("2026-08-14T05:38:44.9999Z", "t") == "2026-08-14T05:38:44.999Z"
    assert to_utc_instant("2026-08-14T05:38:44+02:00", "t") == "2026-08-14T03:38:44.000Z"
    assert to_utc_instant("2026-08-14T05:38Z", "t") == "2026-08-14T05:38:00.000Z"
    assert [js_round(x * 1e6) for x in (0.050546, 1.750693, 0.0000025, 5e-7, 2.5e-7)] == [
        50546,
        1750693,
        3,
        1,
        0,
    ]
    assert js_round(0.1736964999999999 * 1e6) == 173696


# --- the public catalog ---------------------------------------------------------------------------


class _Catalog:
    def __init__(self) -> None:
        self.runs: list[dict[str, Any]] = []
        self.workloads: dict[str, dict[str, Any]] = {}
        self.operations: dict[str, dict[str, Any]] = {}
        self.implementations: dict[str, dict[str, Any]] = {}
        self.operation_ids: dict[str, str] = {}  # semantic digest → id


@cache
def _catalog() -> _Catalog:
    if not CATALOG.is_file():
        pytest.skip(f"catalog export not found at {CATALOG}")
    import zstandard

    catalog = _Catalog()
    with CATALOG.open("rb") as raw:
        reader = zstandard.ZstdDecompressor().stream_reader(raw)
        for line in io.TextIOWrapper(reader, encoding="utf-8"):
            record = json.loads(line)
            table, row = record["table"], record["row"]
            if table == "benchmark_runs":
                native = row["manifest"]["run"]["spec"].get("sourceNative") or {}
                if native.get("source") == "sol-execbench":
                    catalog.runs.append(row)
            elif table == "workloads":
                catalog.workloads[row["id"]] = row
            elif table == "operations":
                catalog.operations[row["id"]] = row
                catalog.operation_ids[row["semanticDigest"]] = row["id"]
            elif table == "implementations":
                catalog.implementations[row["id"]] = row
    return catalog


_SOL_DTYPES = {
    "bf16": "bfloat16",
    "fp16": "float16",
    "fp32": "float32",
    "fp8_e4m3": "float8_e4m3fn",
}


def _arguments(arguments: list[dict[str, Any]]) -> dict[str, Any]:
    result = {}
    for argument in arguments:
        if "tensor" in argument:
            shape, dtype = argument["tensor"]["shape"], argument["tensor"]["dtype"]
        else:
            shape, dtype = None, argument["scalar"]["dtype"]
        result[argument["name"]] = {"shape": shape, "dtype": _SOL_DTYPES.get(dtype, dtype)}
    return result


def _original_axes(cases: list[dict[str, Any]]) -> dict[str, str]:
    """The axis names as SOL spelled them (the catalog lower-cases them; SOL GEMMs use M/N/K).

    Case ids hash the original spelling, so the spelling that reproduces the first case's id is
    the original one. Candidates: as is, upper case (short names), upper-case head (``K_blocks``).
    """
    names = sorted(cases[0]["axes"])
    target = cases[0]["externalId"]

    def spellings(name: str) -> list[str]:
        head, _, tail = name.partition("_")
        options = {name}
        if len(name) <= 5:
            options.add(name.upper())
        if tail and len(head) <= 2:
            options.add(f"{head.upper()}_{tail}")
        return sorted(options)

    options = [spellings(n) for n in names]
    if math.prod(len(o) for o in options) <= 4096:
        for combination in itertools.product(*options):
            spelled = dict(zip(names, combination, strict=True))
            axes = {spelled[k]: v for k, v in cases[0]["axes"].items()}
            if workload_entry_key({"axes": axes}) == target:
                return spelled
    return {n: n for n in names}


def _kernel_from_catalog(operation: Mapping[str, Any], suite: Mapping[str, Any]) -> dict[str, Any]:
    """The leaderboard's /api/kernels/<id> shape of a catalog OperationSpec and its suite."""
    spec = operation["manifest"]["spec"]
    axes: dict[str, Any] = {}
    for name, axis in spec["axes"].items():
        if axis["role"] == "variable":
            axes[name] = {"type": "var"}
        elif axis["role"] == "constant":
            axes[name] = {"type": "const", "value": axis["value"]}
        else:
            axes[name] = {"type": "expr", "expression": axis["expression"]}
    cases = suite["manifest"]["spec"]["cases"]
    spelled = _original_axes(cases)
    return {
        "name": operation["name"],
        "description": operation["manifest"]["metadata"].get("description"),
        "tags": ["L1", spec["family"]],
        "axes": axes,
        "inputs": _arguments(spec["inputs"]),
        "outputs": _arguments(spec["outputs"]),
        "workloads": [{"axes": {spelled[k]: v for k, v in c["axes"].items()}} for c in cases],
    }


def _submission_from_catalog(run: Mapping[str, Any], kernel_id: int) -> dict[str, Any]:
    """The leaderboard's submission shape of a catalog run (its facts, as the run states them)."""
    manifest = run["manifest"]["run"]
    native = manifest["spec"]["sourceNative"]
    username = manifest["metadata"]["title"].rsplit(" · ", 2)[0]
    hardware = run["manifest"]["environment"]["spec"]["hardware"]["product"]
    return {
        "id": int(native["externalId"]),
        "type": "kernel",
        "username": username,
        "kernel_id": kernel_id,
        "kernel_name": native["benchmark"],
        "status": "COMPLETED",
        "is_correct": True,
        "is_disqualified": False,
        **native["metrics"],
        "gpu_type": {"NVIDIA B200": "B200"}[hardware],
        "worker_id": manifest["metadata"].get("labels", {}).get("worker"),
        "evaluation_stack_version": run["manifest"]["protocol"]["spec"]["harness"]["version"],
        # The API writes naive UTC times with microseconds; the run keeps milliseconds.
        "finished_at": manifest["spec"]["observedAt"][:-1] + "417",
    }


def test_seed_run_is_reproduced_exactly() -> None:
    """Submission 38823 (the seed) on kernel 056, rebuilt from the catalog: every digest equal."""
    catalog = _catalog()
    seed = json.loads(SEED.read_bytes())
    [suite] = [w for w in catalog.workloads.values() if w["workloadDigest"] == SEED_WORKLOAD]
    operation = catalog.operations[suite["operationId"]]
    native = seed["run"]["spec"]["sourceNative"]
    submission = {
        "id": 38823,
        "username": "Geometric",
        "kernel_id": 56,
        "kernel_name": native["benchmark"],
        "status": "COMPLETED",
        "is_correct": True,
        "is_disqualified": False,
        **native["metrics"],
        "gpu_type": "B200",
        "worker_id": "external-prod-b200-modal-1",
        "evaluation_stack_version": "v1.1",
        "finished_at": "2026-08-22T11:05:31.586244",
    }
    files = {
        "kernel-56.json": json.dumps({"data": _kernel_from_catalog(operation, suite)}).encode(),
        "submissions.json": json.dumps({"data": {"submissions": [submission]}}).encode(),
    }
    [record] = list(map_sol_leaderboard(files))
    assert isinstance(record, ImportRecord)
    checked = check_manifest_set(record.manifests)
    assert checked.digests == {
        "run": SEED_RUN,
        "protocol": SEED_PROTOCOL,
        "environment": SEED_ENVIRONMENT,
        "implementation": SEED_IMPLEMENTATION,
        "workload": SEED_WORKLOAD,
    }
    assert record.manifests["run"] == seed["run"]


def test_every_catalog_sol_run_is_reproduced() -> None:
    catalog = _catalog()
    assert len(catalog.runs) == CATALOG_SOL_RUNS
    kernels: dict[str, int] = {}
    files: dict[str, bytes] = {}
    submissions = []
    for run in catalog.runs:
        suite = catalog.workloads[run["workloadId"]]
        operation = catalog.operations[suite["operationId"]]
        if operation["id"] not in kernels:
            kernels[operation["id"]] = len(kernels) + 1
            kernel = _kernel_from_catalog(operation, suite)
            files[f"kernel-{kernels[operation['id']]}.json"] = json.dumps({"data": kernel}).encode()
        submissions.append(_submission_from_catalog(run, kernels[operation["id"]]))
    files["submissions.json"] = json.dumps({"data": {"submissions": submissions}}).encode()

    items = list(map_sol_leaderboard(files))
    assert _rejections(items) == []
    by_id = {r["manifest"]["run"]["spec"]["sourceNative"]["externalId"]: r for r in catalog.runs}
    equal: Counter[str] = Counter()
    for record in _records(items):
        row = by_id[record.external_id]
        suite = catalog.workloads[row["workloadId"]]
        implementation = catalog.implementations[row["implementationId"]]
        equal["run digest"] += manifest_digest(record.manifests["run"]) == row["runDigest"]
        equal["run manifest"] += record.manifests["run"] == row["manifest"]["run"]
        equal["protocol"] += record.manifests["protocol"] == row["manifest"]["protocol"]
        equal["environment"] += record.manifests["environment"] == row["manifest"]["environment"]
        equal["implementation"] += record.manifests["implementation"] == implementation["manifest"]
        equal["suite"] += record.manifests["workload"] == suite["manifest"]
        operation_digest = record.manifests["workload"]["spec"]["operationSpecDigest"]
        equal["operation"] += operation_digest == suite["manifest"]["spec"]["operationSpecDigest"]
    assert equal == Counter(
        {
            key: CATALOG_SOL_RUNS
            for key in (
                "run digest",
                "run manifest",
                "protocol",
                "environment",
                "implementation",
                "suite",
                "operation",
            )
        }
    )


def test_every_catalog_sol_operation_and_workload_case_is_reproduced() -> None:
    """All 235 SOL OperationSpecs and their 3,924 WorkloadCases (derived axes, scalars...)."""
    catalog = _catalog()
    suites: dict[str, dict[str, Any]] = {}
    cases: dict[str, set[str]] = {}
    for row in catalog.workloads.values():
        if row["manifest"]["kind"] == "WorkloadSuite":
            suites[row["operationId"]] = row
        else:
            cases.setdefault(row["operationId"], set()).add(row["workloadDigest"])
    operations = cases_checked = 0
    for operation in catalog.operations.values():
        refs = operation["manifest"]["metadata"].get("sourceRefs", [])
        if not any("sol-execbench" in ref["url"] for ref in refs):
            continue
        kernel = _kernel_from_catalog(operation, suites[operation["id"]])
        mapped = map_definition(kernel, kernel["workloads"])
        assert mapped.operation_digest == operation["semanticDigest"], operation["name"]
        assert mapped.problems == ()
        assert set(mapped.case_digests.values()) == cases[operation["id"]], operation["name"]
        operations += 1
        cases_checked += len(mapped.case_digests)
    assert (operations, cases_checked) == (235, 3924)


@pytest.mark.parametrize("latency", [1e303, 1.7e308, 1e300, 2.0**60])
def test_a_latency_with_no_whole_number_of_ns_is_rejected_with_a_reason(latency: float) -> None:
    """ms x 10^6 overflowing to infinity, or beyond 2^53 ns: a rejection with its reason,
    never an OverflowError that stops the whole import; the other submissions come out."""
    good, _ = _submissions()
    items = list(
        map_sol_leaderboard(_with_submissions([{**good, "id": 11, "latency_ms": latency}, good]))
    )
    assert [r.external_id for r in _records(items)] == ["36577"]
    reason = {r.external_id: r.reason for r in _rejections(items)}["11"]
    assert "out of range" in reason or "whole nanoseconds" in reason


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_js_round_gives_a_safe_integer_or_a_mapping_error(value: float) -> None:
    """The one ms -> ns rounding every importer uses: never a bare OverflowError/ValueError."""
    try:
        rounded = js_round(value)
    except MappingError as exc:
        assert "out of range" in exc.message
    else:
        assert abs(rounded) <= 2**53 - 1 and abs(rounded - value) <= 0.5
