"""The Python path's parts that need no child: parsing and routing, the comparison rule, the
timer cross-check, the hidden workload, the sandbox, the identity guard, and the rerun/v1
fields that record them (gpu_agent/python_solutions/, domain/statements.py)."""

from __future__ import annotations

import copy
import json
import resource
import time
from typing import Any

import numpy as np
import pytest

from domain.statements import (
    PredicateType,
    RerunCase,
    StatementError,
    build_predicate,
    validate_part,
)
from gpu_agent import inputs
from gpu_agent.case_task import TimingTerms
from gpu_agent.checks import Tolerance, compare
from gpu_agent.definition import parse_definition
from gpu_agent.python_solutions import sandbox
from gpu_agent.python_solutions.defences import DefenceLog, Detected, IdentityGuard
from gpu_agent.python_solutions.routing import cannot_run
from gpu_agent.python_solutions.spec import TorchSolution, parse_job_solution
from gpu_agent.python_solutions.timing import cross_check
from gpu_agent.sol_parsing import SolutionError
from gpu_agent.solution import Solution
from gpu_agent.workload import parse_workload
from tests.paths import FIXTURES

SOL = FIXTURES / "sol-execbench"


def _doc(*parts: str) -> Any:
    return json.loads(FIXTURES.joinpath(*parts).read_text())


# --- parsing and routing --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parts", "kind", "dps"),
    [
        (("sol-execbench", "pytorch-linear_backward", "solution_python.json"), "python", False),
        (("sol-execbench", "triton-rmsnorm", "solution_triton.json"), "triton", True),
        (("sol-execbench", "cuda_cpp-rmsnorm", "solution_cuda.json"), "torch-cpp", False),
        (("sol-execbench", "reward-hacks", "solution_hack_lazy_output.json"), "python", False),
        (("flashinfer-trace", "solution.json"), "python", False),
        (("flashinfer-trace", "llm-solution.json"), "triton", False),
    ],
)
def test_every_fixture_solution_is_parsed_as_its_kind(
    parts: tuple[str, ...], kind: str, dps: bool
) -> None:
    parsed = parse_job_solution(_doc(*parts))
    assert isinstance(parsed, TorchSolution)
    assert (parsed.kind, parsed.destination_passing) == (kind, dps)
    assert parsed.entry_file in parsed.sources


def test_pycuda_solutions_still_go_to_the_declarative_parser() -> None:
    sample = json.loads(
        (FIXTURES.parents[1] / "gpu_agent/samples/rmsnorm_h4096_bf16/solution.json").read_text()
    )
    assert isinstance(parse_job_solution(sample), Solution)


def test_flashinfer_dependencies_are_parsed_with_their_versions() -> None:
    doc = _doc("sol-execbench", "triton-rmsnorm", "solution_triton.json")
    doc["spec"]["dependencies"] = ["torch", "triton >= 2.3"]
    parsed = parse_job_solution(doc)
    assert isinstance(parsed, TorchSolution)
    assert [d.text() for d in parsed.dependencies] == ["torch", "triton >= 2.3"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"languages": ["pytorch", "cuda_cpp"]}, "mixes C\\+\\+ and Python"),
        ({"languages": ["fortran"]}, "unknown language"),
        ({"entry_point": "kernel.cu::run"}, "entry_point"),
        ({"entry_point": "other.py::run"}, "not among the sources"),
        ({"destination_passing_style": "yes"}, "boolean"),
        ({"dependencies": ["torch; rm -rf /"]}, "name \\[op version\\]"),
    ],
)
def test_malformed_python_solutions_are_refused(change: dict[str, Any], message: str) -> None:
    doc = _doc("sol-execbench", "pytorch-linear_backward", "solution_python.json")
    doc["spec"].update(change)
    with pytest.raises(SolutionError, match=message):
        parse_job_solution(doc)


def test_routing_says_what_this_agent_cannot_run() -> None:
    python = parse_job_solution(
        _doc("sol-execbench", "pytorch-linear_backward", "solution_python.json")
    )
    triton = parse_job_solution(_doc("sol-execbench", "triton-rmsnorm", "solution_triton.json"))
    assert isinstance(python, TorchSolution) and isinstance(triton, TorchSolution)
    assert cannot_run(python, "cpu-test") is None
    assert "runs only on a CUDA GPU" in (cannot_run(triton, "cpu-test") or "")
    assert "not built yet" in (cannot_run(python, "pycuda") or "")


# --- the comparison rule: NaN/Inf fail, even where the reference has them -------------------


def test_matching_nan_and_inf_are_rejected() -> None:
    reference = np.array([1.0, np.nan, np.inf, 2.0], dtype=np.float32)
    result = compare(reference.copy(), reference, Tolerance())
    assert not result.ok and result.non_finite == 2
    assert "non-finite values fail even where both agree" in (result.reason or "")


def test_negative_inf_matches_only_when_the_workload_allows_it() -> None:
    reference = np.array([-np.inf, 1.0], dtype=np.float32)
    assert not compare(reference.copy(), reference, Tolerance()).ok
    allowed = compare(reference.copy(), reference, Tolerance(allow_negative_inf=True))
    assert allowed.ok


def test_tolerance_ratio_and_cap() -> None:
    reference = np.ones(100, dtype=np.float32)
    close = reference + np.float32(0.005)
    assert compare(close, reference, Tolerance()).ok
    off = reference.copy()
    off[:2] = 5.0  # 98 % matched < 99 %
    failed = compare(off, reference, Tolerance())
    assert not failed.ok and "(98.0000%) within tolerance" in (failed.reason or "")
    capped = compare(close, reference, Tolerance(max_error_cap=0.001))
    assert not capped.ok and "cap" in (capped.reason or "")
    assert not compare(np.ones(3), np.ones(4), Tolerance()).ok


def test_a_finite_output_never_matches_a_non_finite_reference() -> None:
    reference = np.array([np.nan] + [1.0] * 9, dtype=np.float32)
    result = compare(np.ones(10, dtype=np.float32), reference, Tolerance())
    assert not result.ok  # 90 % matched


# --- the timer cross-check ------------------------------------------------------------------


def test_the_cross_check_passes_when_the_clocks_agree() -> None:
    record, problems = cross_check(1e7, 1.02e7, 100, 0.0, 2e7, 0.5)
    assert problems == [] and record["outcome"] == "passed"
    assert record["ratio"] == pytest.approx(1.02)


def test_work_that_escapes_the_timer_fails_the_cross_check() -> None:
    # E.g. a side stream: the timer saw 1 ms, the synchronised wall clock 10 ms.
    record, problems = cross_check(1e6, 1e7, 100, 0.0, 2e7, 0.5)
    assert record["outcome"] == "failed" and "escaped the timer" in problems[0]


def test_a_timer_ahead_of_the_wall_clock_fails() -> None:
    _, problems = cross_check(1e7, 1e6, 10, 0.0, 2e7, 0.5)
    assert "ran ahead of the wall clock" in problems[0]


def test_cpu_burnt_by_other_threads_fails_the_cross_check() -> None:
    _, problems = cross_check(1e7, 1e7, 100, 5e7, 2e7, 0.5)
    assert "deferred to another thread" in problems[0]


# --- the hidden workload --------------------------------------------------------------------


def _rmsnorm() -> Any:
    return parse_definition(_doc("sol-execbench", "triton-rmsnorm", "definition.json"))


def _workloads(definition: Any, *counts: int) -> list[Any]:
    return [
        parse_workload(
            {
                "uuid": f"w{n}",
                "axes": {"batch_size": n},
                "inputs": {"hidden_states": {"type": "random"}, "weight": {"type": "random"}},
            },
            definition,
        )
        for n in counts
    ]


def test_the_hidden_workload_is_unseen_within_range_and_fixed_by_the_nonce() -> None:
    definition = _rmsnorm()
    workloads = _workloads(definition, 4, 64)
    drawn = {
        inputs.hidden_axes(definition, workloads, f"{i:064x}")["batch_size"] for i in range(20)
    }  # type: ignore[index]
    assert drawn and all(4 <= n <= 64 and n not in (4, 64) for n in drawn)
    assert len(drawn) > 1  # it depends on the nonce...
    again = inputs.hidden_axes(definition, workloads, f"{3:064x}")
    assert again == inputs.hidden_axes(definition, workloads, f"{3:064x}")  # ...and only on it


def test_no_hidden_workload_without_a_var_axis() -> None:
    doc = _doc("sol-execbench", "triton-rmsnorm", "definition.json")
    doc["axes"]["batch_size"] = {"type": "const", "value": 8}
    definition = parse_definition(doc)
    workload = parse_workload(
        {
            "uuid": "w",
            "axes": {},
            "inputs": {"hidden_states": {"type": "random"}, "weight": {"type": "random"}},
        },
        definition,
    )
    assert inputs.hidden_axes(definition, [workload], "0" * 64) is None


# --- the sandbox ----------------------------------------------------------------------------


def test_the_scrubbed_environment_keeps_no_secret() -> None:
    environ = {
        "PATH": "/usr/bin",
        "LC_ALL": "C",
        "CUDA_VISIBLE_DEVICES": "0",
        "KERNELINDEX_AGENT_KEY": "/keys/agent.pem",
        "KERNELINDEX_SERVER": "http://ledger",
        "CUDA_API_TOKEN": "t",
        "AWS_SECRET_ACCESS_KEY": "s",
        "HOME": "/root",
        "PYTHONPATH": "/somewhere",
    }
    scrubbed = sandbox.scrubbed_environment(environ, "/tmp/case")
    assert scrubbed["PATH"] == "/usr/bin" and scrubbed["CUDA_VISIBLE_DEVICES"] == "0"
    assert scrubbed["HOME"] == "/tmp/case" and scrubbed["TRITON_CACHE_DIR"].startswith("/tmp/case")
    for dropped in ("KERNELINDEX_AGENT_KEY", "KERNELINDEX_SERVER", "CUDA_API_TOKEN"):
        assert dropped not in scrubbed
    assert "AWS_SECRET_ACCESS_KEY" not in scrubbed and "PYTHONPATH" not in scrubbed


def test_limits_are_only_ever_lowered(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, tuple[int, int]]] = []
    monkeypatch.setattr(resource, "setrlimit", lambda which, v: calls.append((which, v)))
    monkeypatch.setattr(
        resource,
        "getrlimit",
        lambda which: (64, 64) if which == resource.RLIMIT_NOFILE else (-1, resource.RLIM_INFINITY),
    )
    applied = sandbox.apply_limits(sandbox.Limits(open_files=1024, cpu_seconds=60))
    assert "RLIMIT_NOFILE" not in applied  # the hard limit 64 is already lower
    assert applied["RLIMIT_CPU"] == 60 and (resource.RLIMIT_CPU, (60, 60)) in calls


# --- the identity guard and the defence log -------------------------------------------------


def test_the_identity_guard_sees_a_replaced_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    guard = IdentityGuard()
    assert guard.replaced() == []
    monkeypatch.setattr(time, "perf_counter_ns", lambda: 0)
    assert "time.perf_counter_ns" in guard.replaced()


def test_the_identity_guard_holds_the_harness_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpu_agent import checks as module

    guard = IdentityGuard()
    monkeypatch.setattr(module, "compare", lambda *a, **k: None)
    assert "gpu_agent.checks.compare" in guard.replaced()


def test_the_defence_log_records_each_defence_once_with_its_outcome() -> None:
    log = DefenceLog()
    log.passed("thread-injection", "2 threads")
    log.passed("thread-injection", "2 threads")
    log.skipped("output-poisoning", "value-returning")
    with pytest.raises(Detected, match=r"side-stream: torch\.cuda"):
        log.check("side-stream", ["torch.cuda"], "none")
    assert log.as_json() == [
        {
            "name": "thread-injection",
            "outcome": "passed",
            "detail": "2 threads (2 checks)",
            "runs": 2,
        },
        {"name": "output-poisoning", "outcome": "skipped", "detail": "value-returning", "runs": 0},
        {"name": "side-stream", "outcome": "failed", "detail": "torch.cuda", "runs": 1},
    ]


# --- rerun/v1 records the defences; a failed one can never pass -----------------------------


def test_a_case_with_a_failed_defence_cannot_pass() -> None:
    failed = {"name": "thread-injection", "outcome": "failed"}
    hack = {"case": "c", "status": "incorrect", "reason": "reward-hack:thread-injection"}
    validate_part(RerunCase, {**hack, "defences": [failed]})
    with pytest.raises(ValueError, match="cannot pass"):
        validate_part(RerunCase, {"case": "c", "status": "passed", "defences": [failed]})
    cross = {
        "timer": "cuda-events",
        "reference": "CLOCK_MONOTONIC_RAW around the synchronised call",
        "calls": 1,
        "timedNs": 1.0,
        "wallNs": 9.0,
        "ratio": 9.0,
        "outcome": "failed",
    }
    with pytest.raises(ValueError, match="timer-cross-check"):
        validate_part(RerunCase, {"case": "c", "status": "passed", "timerCrossCheck": cross})


def test_older_results_without_the_new_fields_still_parse() -> None:
    result = {
        "jobId": "0a0a0a0a-1111-4222-8333-444455556666",
        "nonce": "5e" * 32,
        "protocol": "kernelindex-rerun-v1",
        "issuedAt": "2026-01-01T00:00:00Z",
        "cases": [{"case": "c", "status": "passed"}],
        "summary": {"allCorrect": True, "samples": 0},
        "environment": {
            "product": "CPU",
            "architecture": "cpu",
            "gpuUuidHash": "0" * 64,
            "backend": "cpu-test",
        },
        "calibration": {},
    }
    build_predicate(PredicateType.RERUN, result)
    bad = copy.deepcopy(result)
    bad["build"] = {"solutionKind": "python", "runtime": {"Torch Version": "2"}}
    with pytest.raises(StatementError, match="build"):
        build_predicate(PredicateType.RERUN, bad)


def test_a_case_task_carries_seeds_never_the_nonce_and_hands_them_over_once() -> None:
    import pickle

    from gpu_agent.python_solutions import job as python_job
    from gpu_agent.stats import StopPolicy

    definition = _rmsnorm()
    (workload,) = _workloads(definition, 4)
    nonce = "c3" * 32
    solution = parse_job_solution(
        _doc("sol-execbench", "reward-hacks", "solution_hack_lazy_output.json")
    )
    assert isinstance(solution, TorchSolution)
    rounds = python_job.case_rounds("0a0a0a0a-1111-4222-8333-444455556666", nonce, workload, None)
    assert [r.kind for r in rounds][-2:] == ["post", "audit"]
    assert sorted(r.label for r in rounds[:3]) == ["public-0", "public-1", "secret"]
    task = python_job.torch_task(
        solution,
        definition,
        workload,
        rounds,
        backend_name="cpu-test",
        backend_options={},
        timing=TimingTerms(
            stop=StopPolicy(),
            written_bytes=1,
            l2_bytes=0,
            copy_bandwidth=1.0,
            floor_factor=0.9,
            bootstrap_resamples=10,
            bootstrap_seed=1,
        ),
    )
    assert nonce.encode() not in pickle.dumps(task)
    assert len(task.take_rounds()) == 5 and task.take_rounds() == []
