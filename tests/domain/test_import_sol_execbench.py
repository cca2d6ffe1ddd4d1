"""The SOL-ExecBench benchmark-folder mapper: solutions → implementations, traces → runs.

Fixtures: ``conformance/fixtures/sol-execbench/`` (NVIDIA SOL-ExecBench examples, Apache-2.0).
None of the folders holds a trace, so the trace tests write trace lines in the documented
format (``docs/trace.md``) beside a real folder's definition, workloads and solutions.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from domain.canonical import canonical_json
from domain.errors import DomainError
from domain.importers.records import ImportRecord, Rejection, Skipped
from domain.importers.sol_execbench import (
    MappedSolution,
    map_definition,
    map_sol_execbench,
    map_sol_execbench_solutions,
)
from domain.importers.sol_execbench.workload import evaluate_axis_expression, workload_entry_key
from domain.manifests.canonical_form import manifest_digest
from domain.manifests.manifest_set import check_manifest_set
from tests.paths import CONFORMANCE

SHARED = CONFORMANCE
BENCH = SHARED / "fixtures" / "sol-execbench"
FOLDERS = ["cuda_cpp-flux_rope", "cuda_cpp-rmsnorm", "pytorch-linear_backward", "triton-rmsnorm"]
# rmsnorm_h4096 as the public KernelIndex catalog holds it (imported there from FlashInfer-Bench).
CATALOG_RMSNORM_OPERATION = (
    "sha256:2871390f2acf5e895c37899aa361f04013a777aa68085c4d9f7f8072f06483bc"
)


def _folder(name: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((BENCH / name).iterdir()) if p.is_file()}


def _solutions(files: dict[str, bytes], definition: bytes | None = None) -> list[MappedSolution]:
    mapped = list(map_sol_execbench_solutions(files, definition))
    assert all(isinstance(m, MappedSolution) for m in mapped), mapped
    return [m for m in mapped if isinstance(m, MappedSolution)]


# --- folders as shipped ------------------------------------------------------------------------


@pytest.mark.parametrize("name", [*FOLDERS, "reward-hacks"])
def test_folders_without_traces_yield_no_records(name: str) -> None:
    files = _folder(name)
    assert not any(n.startswith("trace") for n in files)
    # No record, but one line saying why (issue 14: an import that finds nothing says so).
    [skipped] = list(map_sol_execbench(files))
    assert isinstance(skipped, Skipped) and skipped.external_id is None
    assert skipped.reason.startswith("no trace*.jsonl in the folder (")
    solutions = sum(1 for n in files if n.startswith("solution"))
    assert f"{solutions} solution(s)" in skipped.reason


@pytest.mark.parametrize("name", FOLDERS)
def test_solutions_become_implementations_with_pinned_sources(name: str) -> None:
    files = _folder(name)
    [solution_file] = [n for n in files if n.startswith("solution")]
    raw = json.loads(files[solution_file])
    [mapped] = _solutions(files)
    manifest = mapped.implementation
    assert manifest_digest(manifest) == mapped.implementation_digest  # validates too
    source = manifest["spec"]["source"]
    # The canonical solution document pins every source file and the build spec.
    assert mapped.bundle.content == canonical_json(raw)
    assert source == {
        "contentDigest": mapped.bundle.digest,
        "fileName": "solution.json",
        "sizeBytes": len(mapped.bundle.content),
    }
    assert [(a.name, a.content.decode()) for a in mapped.files] == [
        (s["path"], s["content"]) for s in raw["sources"]
    ]
    # With them, the definition as published (the operation page's reference code).
    assert mapped.definition is not None
    assert json.loads(mapped.definition.content) == json.loads(files["definition.json"])
    assert mapped.artifacts == (mapped.bundle, *mapped.files, mapped.definition)
    definition = map_definition(json.loads(files["definition.json"]), [], with_suite=False)
    assert manifest["spec"]["operation"] == {"specDigest": definition.operation_digest}
    entry_file, _, symbol = raw["spec"]["entry_point"].partition("::")
    assert manifest["spec"]["callable"]["path"] == entry_file
    assert manifest["spec"]["callable"]["symbol"] == symbol
    assert manifest["spec"]["support"]["hardwareArchitectures"] == ["sm_100"]
    assert manifest["spec"]["support"]["productsTested"] == ["NVIDIA B200"]


def test_a_multi_file_solution_is_one_bundle() -> None:
    [mapped] = _solutions(_folder("cuda_cpp-rmsnorm"))
    assert [a.name for a in mapped.files] == ["kernel.h", "kernel.cu", "main.cpp"]
    assert [a.media_type for a in mapped.files] == ["text/x-c", "text/x-cuda", "text/x-c++src"]
    assert mapped.implementation["spec"]["callable"] == {
        "language": "cuda",
        "path": "main.cpp",
        "symbol": "run",
        "interface": "pytorch",
    }


def test_reward_hack_solutions_need_a_definition_from_elsewhere() -> None:
    files = _folder("reward-hacks")
    [rejection] = list(map_sol_execbench_solutions(files))
    assert isinstance(rejection, Rejection)
    assert "no definition.json" in rejection.reason
    definition = (BENCH / "triton-rmsnorm" / "definition.json").read_bytes()
    mapped = _solutions(files, definition)
    assert [m.name for m in mapped] == [
        "rmsnorm_hack_lazy_output",
        "rmsnorm_hack_monkey_patch",
        "rmsnorm_hack_stream_injection",
        "rmsnorm_hack_thread_injection",
    ]
    for solution in mapped:  # the older one-"language" spec, LOCAL hardware only
        spec = solution.implementation["spec"]
        assert spec["callable"]["language"] == "python"
        assert spec["support"]["hardwareArchitectures"] == ["unknown"]
        assert spec["support"]["productsTested"] == []


def test_rmsnorm_definition_matches_the_catalog_operation() -> None:
    for name in ("cuda_cpp-rmsnorm", "triton-rmsnorm"):
        definition = json.loads(_folder(name)["definition.json"])
        assert map_definition(definition, [], with_suite=False).operation_digest == (
            CATALOG_RMSNORM_OPERATION
        )


def test_axes_roles_and_case_shapes() -> None:
    files = _folder("cuda_cpp-flux_rope")
    definition = json.loads(files["definition.json"])
    entries = [json.loads(line) for line in files["workload.jsonl"].splitlines() if line.strip()]
    mapped = map_definition(definition, entries)
    axes = mapped.operation["spec"]["axes"]
    assert axes["batch_size"] == {"role": "variable", "type": "integer"}
    assert axes["attention_head_dim"] == {"role": "constant", "type": "integer", "value": 128}
    assert axes["half_head_dim"] == {
        "role": "derived",
        "type": "integer",
        "expression": "attention_head_dim // 2",
    }
    assert mapped.operation["spec"]["reference"] == {"language": "python"}
    first = mapped.cases[0]["spec"]
    assert first["axes"] == {"batch_size": 1, "seq_len": 128}
    assert first["tensors"]["query_or_key"] == {
        "shape": [1, 128, 24, 128],
        "dtype": "bf16",
        "data": {"generator": "random"},
    }
    assert mapped.suite is not None
    assert [c["externalId"] for c in mapped.suite["spec"]["cases"]] == [e["uuid"] for e in entries]
    assert mapped.suite["spec"]["aggregation"] == {"metric": "latency", "statistic": "mean"}
    # Custom-generated inputs say so (not "random").
    files = _folder("pytorch-linear_backward")
    entries = [json.loads(line) for line in files["workload.jsonl"].splitlines() if line.strip()]
    mapped = map_definition(json.loads(files["definition.json"]), entries)
    assert mapped.cases[0]["spec"]["tensors"]["x"]["data"] == {"generator": "custom"}
    assert mapped.cases[0]["spec"]["tensors"]["x"]["shape"] == [64, 128]


def test_derived_axis_expressions() -> None:
    bindings = {"width": 64, "padding": 1, "kernel_size": 3, "stride": 2, "a": 6}
    expression = "(width + 2 * padding - kernel_size) // stride + 1"
    assert evaluate_axis_expression(expression, bindings) == 32
    assert evaluate_axis_expression("A ** 2 - -a", bindings) == 42
    assert evaluate_axis_expression("a / 3 % 4", bindings) == 2
    for bad in ("a / 4", "b + 1", "a +", "(a", "a $ 2", "a // 0", "2 ** 99", ""):
        with pytest.raises(DomainError):
            evaluate_axis_expression(bad, bindings)


def test_workload_entry_keys() -> None:
    assert workload_entry_key({"uuid": "abc", "axes": {"m": 1}}) == "abc"
    # Without a uuid: KernelIndex's hash of the axes (catalog case ids of kernels 4 and 022).
    kernel_4 = {"num_heads": 32, "head_dim": 64, "hidden_size": 2048, "batch_size": 64}
    assert workload_entry_key({"axes": {**kernel_4, "seq_len": 128}}) == "edabdcf4bcec"
    fp8 = {"BLOCK": 128, "K": 2688, "K_blocks": 21, "M": 7680, "N": 2688, "N_blocks": 21}
    assert workload_entry_key({"axes": fp8}) == "15959af20194"


def test_axis_names_sort_like_javascript_locale_compare() -> None:
    from domain.importers.sol_execbench.workload import _collation_key

    # Node 's [...words].sort((a, b) => a.localeCompare(b)), recorded.
    node_order = [
        "_a", "a", "A", "a b", "a_1", "a_b", "a-b", "a.b", "a+", "a~", "a$", "a1", "ab", "aB",
        "Ab", "AB", "b", "B", "c", "c_4", "c4", "C4", "head_dim", "head1dim", "headdim", "K",
        "k_blocks", "K_blocks", "kBlocks", "m", "M", "n", "N", "seq_len", "seqlen", "x_", "X_",
        "x_9", "x10", "x9",
    ]  # fmt: skip
    assert sorted(reversed(node_order), key=_collation_key) == node_order


# --- traces ----------------------------------------------------------------------------------


def _trace(
    solution: str, status: str, *, workload: dict[str, Any] | None = None, **evaluation: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "status": status,
        "log": "",
        "correctness": None,
        "performance": None,
        "environment": {
            "hardware": "NVIDIA_B200",
            "libs": {"cuda": "12.8", "torch": "2.7.0", "triton": "3.3.0"},
        },
        "timestamp": "2026-06-27T12:45:00Z",
    }
    body.update(evaluation)
    return {
        "definition": "rmsnorm_h4096",
        "solution": solution,
        "workload": workload
        or {
            "uuid": "33bf737d-3b37-4e38-be80-ea39b4b46ae6",
            "axes": {"batch_size": 7},
            "inputs": {"hidden_states": {"type": "random"}, "weight": {"type": "random"}},
        },
        "evaluation": body,
    }


PASSED = _trace(
    "my_rmsnorm_triton",
    "PASSED",
    log="compiled; 100 iterations\n",
    correctness={"max_relative_error": 1.15e-05, "max_absolute_error": 0.89e-05},
    performance={"latency_ms": 0.008, "reference_latency_ms": 0.019, "speedup_factor": 2.375},
)


def _traced_folder(lines: list[Any]) -> dict[str, bytes]:
    files = _folder("triton-rmsnorm")
    files.update(_folder("reward-hacks"))  # same definition; adds four more solutions
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    files["trace.jsonl"] = text.encode() + b"\n"
    return files


def test_traces_become_runs_with_raw_evidence() -> None:
    incorrect = _trace(
        "my_rmsnorm_triton",
        "INCORRECT_NUMERICAL",
        correctness={"max_relative_error": 3.5, "max_absolute_error": 0.25},
    )
    hack = _trace("rmsnorm_hack_lazy_output", "REWARD_HACK", log="timing was bypassed")
    items = list(map_sol_execbench(_traced_folder([PASSED, incorrect, hack])))
    records = [i for i in items if isinstance(i, ImportRecord)]
    assert len(records) == 3 and len(items) == 3
    statuses = [r.manifests["run"]["spec"]["status"] for r in records]
    assert statuses == ["passed", "incorrect_numerical", "suspected_reward_hack"]
    for record in records:
        checked = check_manifest_set(record.manifests)
        assert record.source == "sol-execbench"
        assert record.manifests["workload"]["kind"] == "WorkloadCase"
        implementation = record.manifests["implementation"]["spec"]
        by_digest = {a.digest: a for a in record.artifacts}
        assert implementation["source"]["contentDigest"] in by_digest  # the rerunnable source
        evidence = record.manifests["run"]["spec"]["evidence"]["logs"]
        assert evidence["uri"] == f"kernelindex:artifact/{evidence['digest']}"
        assert evidence["digest"] in by_digest or evidence["digest"] == record.snapshot.digest
        assert (
            checked.digests["implementation"]
            == record.manifests["run"]["spec"]["implementationDigest"]
        )

    passed = records[0].manifests["run"]["spec"]
    assert passed["timing"] == {"primaryStatistic": "mean", "latencyNs": {"mean": 8000}}
    assert passed["correctness"] == {
        "comparator": "sol_execbench_eval",
        "maximumAbsoluteError": 0.89e-05,
        "maximumRelativeError": 1.15e-05,
    }
    assert passed["sourceNative"]["metrics"] == {
        "latency_ms": 0.008,
        "reference_latency_ms": 0.019,
        "speedup_factor": 2.375,
    }
    assert passed["observedAt"] == "2026-06-27T12:45:00.000Z"
    log = {a.digest: a for a in records[0].artifacts}[passed["evidence"]["logs"]["digest"]]
    assert log.content == b"compiled; 100 iterations\n" and log.media_type == "text/plain"
    # A trace without a log keeps the trace record itself as its raw evidence.
    assert records[1].manifests["run"]["spec"]["evidence"]["logs"]["digest"] == (
        records[1].snapshot.digest
    )
    assert "timing" not in records[1].manifests["run"]["spec"]
    case = records[0].manifests["workload"]["spec"]
    assert case["axes"] == {"batch_size": 7}
    assert case["tensors"]["hidden_states"]["shape"] == [7, 4096]
    environment = records[0].manifests["environment"]["spec"]
    assert environment == {
        "hardware": {"vendor": "nvidia", "product": "NVIDIA B200", "architecture": "sm_100"},
        "software": {
            "cudaToolkit": "12.8",
            "framework": {"name": "pytorch", "version": "2.7.0"},
            "libraries": {"triton": "3.3.0"},
        },
    }
    assert records[0].external_id == (
        "trace/my_rmsnorm_triton/33bf737d-3b37-4e38-be80-ea39b4b46ae6/NVIDIA_B200"
    )
    assert records[0].snapshot.content == canonical_json(PASSED)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("PASSED", "passed"),
        ("INCORRECT_SHAPE", "incorrect_shape"),
        ("INCORRECT_DTYPE", "incorrect_dtype"),
        ("INCORRECT_NUMERICAL", "incorrect_numerical"),
        ("RUNTIME_ERROR", "runtime_error"),
        ("COMPILE_ERROR", "compile_error"),
        ("TIMEOUT", "timeout"),
        ("REWARD_HACK", "suspected_reward_hack"),
        ("INVALID_REFERENCE", "invalid_reference"),
    ],
)
def test_trace_status_mapping(status: str, expected: str) -> None:
    performance = PASSED["evaluation"]["performance"] if status == "PASSED" else None
    trace = _trace("my_rmsnorm_triton", status, performance=performance)
    [record] = list(map_sol_execbench(_traced_folder([trace])))
    assert isinstance(record, ImportRecord)
    assert record.manifests["run"]["spec"]["status"] == expected


def test_bad_traces_are_rejected_and_the_rest_still_come_out() -> None:
    negative = _trace(
        "my_rmsnorm_triton",
        "PASSED",
        performance={"latency_ms": -0.008, "reference_latency_ms": 0.019, "speedup_factor": 1},
    )
    unknown_status = _trace("my_rmsnorm_triton", "SORT_OF_PASSED")
    unknown_solution = _trace("nobody_wrote_this", "PASSED")
    no_performance = _trace("my_rmsnorm_triton", "PASSED")
    no_timestamp = _trace("my_rmsnorm_triton", "TIMEOUT", timestamp=None)
    missing = {k: v for k, v in PASSED.items() if k != "evaluation"}
    other_definition = {**PASSED, "definition": "gemm_n4096_k4096"}
    truncated = json.dumps(PASSED)[:80]
    lines = [
        negative,
        truncated,
        unknown_status,
        PASSED,
        unknown_solution,
        no_performance,
        no_timestamp,
        missing,
        other_definition,
    ]
    items = list(map_sol_execbench(_traced_folder(lines)))
    assert [type(i).__name__ for i in items] == [
        "Rejection",
        "Rejection",
        "Rejection",
        "ImportRecord",
        "Rejection",
        "Rejection",
        "Rejection",
        "Rejection",
        "Rejection",
    ]
    reasons = [i.reason for i in items if isinstance(i, Rejection)]
    assert "latency_ms must be positive" in reasons[0]
    assert reasons[1].startswith("trace.jsonl line 2: malformed JSON")
    assert "unknown status 'SORT_OF_PASSED'" in reasons[2]
    assert "'nobody_wrote_this'" in reasons[3]
    assert "must report its performance" in reasons[4]
    assert "timestamp" in reasons[5]
    assert "'evaluation'" in reasons[6]
    assert "gemm_n4096_k4096" in reasons[7]
    assert all(r.startswith("trace.jsonl line ") for r in reasons)


def test_a_broken_definition_rejects_every_trace_with_the_reason() -> None:
    files = _traced_folder([PASSED, PASSED])
    files["definition.json"] = files["definition.json"][:100]
    items = list(map_sol_execbench(files))
    assert len(items) == 2
    assert all(isinstance(i, Rejection) and "definition.json: malformed" in i.reason for i in items)
    # A broken solution file is named in the rejection of the traces that needed it.
    files = _traced_folder([PASSED])
    files["solution_triton.json"] = b'{"name": "my_rmsnorm_triton"'
    [rejection] = list(map_sol_execbench(files))
    assert isinstance(rejection, Rejection)
    assert "solution_triton.json: malformed JSON" in rejection.reason


def test_importing_a_folder_is_deterministic() -> None:
    lines = [PASSED, _trace("rmsnorm_hack_monkey_patch", "REWARD_HACK")]
    first = list(map_sol_execbench(_traced_folder(lines)))
    second = list(map_sol_execbench(dict(reversed(list(_traced_folder(lines).items())))))
    assert first == second
    assert all(isinstance(i, ImportRecord) for i in first)


def _with_latency(value: Any) -> Any:
    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: (value if k == "latency_ms" else walk(v)) for k, v in node.items()}
        return [walk(v) for v in node] if isinstance(node, list) else node

    return walk


@pytest.mark.parametrize("latency", [1e303, 1.7e308])
def test_a_trace_latency_that_overflows_ns_is_a_rejection(latency: float) -> None:
    """ms x 10^6 overflowing to infinity is a rejection naming the value, not an
    OverflowError that stops the import (the one js_round, domain.importers.catalog_form)."""
    from tests.sol_traces import traced_files

    files = traced_files("pytorch-linear_backward")
    patch = _with_latency(latency)
    for name, content in list(files.items()):
        if name.endswith(".jsonl") and b"evaluation" in content:
            rows = [patch(json.loads(line)) for line in content.splitlines() if line.strip()]
            files[name] = "".join(json.dumps(r) + "\n" for r in rows).encode()
    items = list(map_sol_execbench(files))
    reasons = [i.reason for i in items if isinstance(i, Rejection)]
    assert reasons and all("out of range for a whole number of ns" in r for r in reasons)
