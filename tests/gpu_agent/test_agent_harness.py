"""The rerun harness end to end on the cpu-test backend (gpu_agent/harness.py).

Each case runs in a child process exactly as on a GPU; only the kernel is a Python emulation
(gpu_agent/backends/cpu_emulations.py, cpu_adversaries.py). Small stop-rule settings keep
the suite fast. The adversarial jobs are independent, so they run concurrently (each job's
children are separate processes); none of their verdicts depends on timing. The refill of
timed launches, the floor and the build record: tests/gpu_agent/test_agent_timing_refill.py.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import statistics
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec
import pytest

from domain.statements import MAX_RERUN_SAMPLES, parse_predicate, parse_statement
from gpu_agent.backends.cpu_adversaries import (
    MEMORIZED_CASES,
    MEMORIZED_JOB_ID,
    RMSNORM_DEFINITION,
)
from gpu_agent.harness import (
    CaseOutcome,
    HarnessConfig,
    HarnessError,
    JobSpec,
    run_job,
    validate_result,
)
from gpu_agent.result_assembly import suite_summary as _summary
from gpu_agent.sol_parsing import UnsupportedSolution
from gpu_agent.stats import StopPolicy
from ledger.signing.authoring import rerun_envelope
from ledger.signing.keys import SigningKey

JOB_ID = "0a0a0a0a-1111-4222-8333-444455556666"
NONCE = "5e" * 32
STOP = StopPolicy(warmup=2, batch=25, min_samples=50, max_samples=100, time_budget_s=0.5)
# The production start method of the device probe's child (case children are always exec'd
# fresh in the jail)...
SPAWN = HarnessConfig(stop=STOP, bootstrap_resamples=200, case_timeout_s=60)
# ...and the equally isolating, faster one, for the many small jobs below.
FAST = dataclasses.replace(SPAWN, start_method="forkserver")


def solution(kernel: str, grid: str = "batch_size") -> dict[str, Any]:
    return {
        "name": f"{kernel}_pycuda",
        "definition": "rmsnorm_h4096",
        "author": "tests",
        "spec": {
            "languages": ["cuda_cpp"],
            "target_hardware": ["LOCAL"],
            "entry_point": f"kernel.cu::{kernel}",
            "dependencies": [],
            "binding": "pycuda",
            "launch": {
                "grid": [grid],
                "block": [512],
                "args": [
                    {"input": "hidden_states"},
                    {"input": "weight"},
                    {"output": "output"},
                    {"scalar": "int32", "value": "batch_size"},
                    {"scalar": "float32", "value": 1e-5},
                ],
            },
        },
        "sources": [
            {"path": "kernel.cu", "content": f'extern "C" __global__ void {kernel}() {{}}'}
        ],
    }


def workload(rows: int, uuid: str | None = None) -> dict[str, Any]:
    return {
        "uuid": uuid or f"rows-{rows}",
        "axes": {"batch_size": rows},
        "inputs": {"hidden_states": {"type": "random"}, "weight": {"type": "random"}},
    }


def job(kernel: str, rows: list[int], job_id: str = JOB_ID, **kw: Any) -> JobSpec:
    return JobSpec(
        job_id=job_id,
        nonce=NONCE,
        solution=solution(kernel, **kw),
        definition=RMSNORM_DEFINITION,
        workloads=[workload(r) for r in rows],
    )


@pytest.fixture(scope="module")
def honest() -> dict[str, Any]:
    return run_job(job("rmsnorm_h4096_bf16", [4, 64]), "cpu-test", SPAWN)


def test_honest_rmsnorm_passes_every_case_with_statistics(honest: dict[str, Any]) -> None:
    assert honest["jobId"] == JOB_ID and honest["nonce"] == NONCE
    cases = honest["cases"]
    assert [c["case"] for c in cases] == ["rows-4", "rows-64"]
    for case in cases:
        assert case["status"] == "passed", case
        assert case["maxAbsError"] <= 0.01 and case["maxRelError"] >= 0
        assert 50 <= case["samples"] <= 100
        stats = case["latencyNs"]
        assert stats["minimum"] <= stats["p05"] <= stats["median"] <= stats["p95"]
        assert stats["p95"] <= stats["maximum"]
        assert stats["ci95"][0] <= stats["ci95"][1]
        assert "reason" not in case  # a passed case carries no words at all
    summary = honest["summary"]
    assert summary["allCorrect"] is True
    assert summary["samples"] == len(summary["samplesNs"]) <= MAX_RERUN_SAMPLES
    assert summary["samples"] == min(c["samples"] for c in cases)
    assert summary["medianNs"] == statistics.median(summary["samplesNs"])
    assert summary["ci95Ns"][0] <= summary["ci95Ns"][1]


def test_cpu_test_results_say_they_are_not_a_gpu(honest: dict[str, Any]) -> None:
    environment = honest["environment"]
    assert environment["backend"] == "cpu-test"
    assert environment["product"] == "CPU test backend (not a GPU)"
    assert environment["architecture"] == "cpu"
    assert len(environment["gpuUuidHash"]) == 64
    assert honest["calibration"]["copyBandwidthBytesPerS"] > 0
    from domain.statements import MEASURING_BACKENDS

    assert environment["backend"] not in MEASURING_BACKENDS


def test_the_result_signs_as_a_rerun_statement(honest: dict[str, Any]) -> None:
    envelope = rerun_envelope(
        "sha256:" + "ab" * 32, "run/test", SigningKey.generate(), result=honest
    )
    statement = parse_statement(json.loads(base64.b64decode(envelope["payload"])))
    predicate = parse_predicate(statement)
    assert msgspec.to_builtins(predicate)["summary"]["allCorrect"] is True


# --- adversarial samples: each caught, with the check that caught it -----------------------

# Each adversary: its job, and what every one of its cases must say — status, the vocabulary's
# reason and, where the sample is built to fail in one round, that round.
ADVERSARIES: dict[str, tuple[JobSpec, str, str, str | None]] = {
    "unwritten": (job("adv_unwritten_tail", [4]), "incorrect", "unwritten-output", None),
    "mutates-input": (job("adv_in_place_too", [4]), "incorrect", "input-mutation", None),
    "cached-per-shape": (job("adv_cached_per_shape", [4]), "incorrect", "output-mismatch", None),
    "cached-per-pointer": (
        job("adv_cached_per_pointer", [4]),
        "incorrect",
        "output-mismatch",
        None,
    ),
    "public-rounds-only": (
        JobSpec(
            job_id=MEMORIZED_JOB_ID,
            nonce=NONCE,
            solution=solution("adv_public_rounds_only"),
            definition=RMSNORM_DEFINITION,
            workloads=[workload(rows, uuid) for uuid, rows in MEMORIZED_CASES.items()],
        ),
        "incorrect",
        "output-mismatch",
        "secret",
    ),
    "idle-on-seen-inputs": (
        job("adv_idle_on_seen_inputs", [64]),
        "incorrect",
        "unwritten-output",
        "last-timed",
    ),
    "lazy-after-3": (
        job("adv_lazy_after_3", [64]),
        "incorrect",
        "unwritten-output",
        "last-timed",  # the first of its failures; the post-timing round fails it too
    ),
    "launch-fault": (job("adv_faults", [4]), "error", "launch-failed", None),
    "does-not-compile": (job("rmsnorm_nowhere", [4]), "error", "build-failed", None),
}


@pytest.fixture(scope="module")
def adversarial_results() -> Iterator[dict[str, dict[str, Any]]]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            name: pool.submit(run_job, spec, "cpu-test", FAST)
            for name, (spec, _, _, _) in ADVERSARIES.items()
        }
        yield {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize("name", list(ADVERSARIES))
def test_adversarial_sample_is_caught(
    adversarial_results: dict[str, dict[str, Any]], name: str
) -> None:
    _, status, reason, round_ = ADVERSARIES[name]
    result = adversarial_results[name]
    assert result["summary"]["allCorrect"] is False
    assert "medianNs" not in result["summary"] and result["summary"]["samples"] == 0
    for case in result["cases"]:
        assert (case["status"], case["reason"]) == (status, reason), case
        if round_ is not None:
            assert case["round"] == round_, case


def test_the_memorizer_passes_its_public_rounds(
    adversarial_results: dict[str, dict[str, Any]],
) -> None:
    # Both of its cases failed on the nonce round, never earlier: the public rounds it had
    # memorised were right, whatever order the nonce put the rounds in.
    for case in adversarial_results["public-rounds-only"]["cases"]:
        assert case["round"] == "secret"


def test_a_failed_case_still_reports_what_was_measured(
    adversarial_results: dict[str, dict[str, Any]],
) -> None:
    (case,) = adversarial_results["idle-on-seen-inputs"]["cases"]
    assert case["samples"] >= 50 and case["latencyNs"]["median"] > 0
    assert case["maxAbsError"] <= 0.01  # every correctness round was right


# --- isolation: crashes and hangs cost their own case only ----------------------------------


def test_a_crashing_child_fails_only_its_case() -> None:
    result = run_job(job("adv_crash_on_3_rows", [2, 3, 4]), "cpu-test", FAST)
    statuses = {c["case"]: c["status"] for c in result["cases"]}
    assert statuses == {"rows-2": "passed", "rows-3": "error", "rows-4": "passed"}
    crashed = result["cases"][1]
    assert crashed["reason"] == "child-died"
    assert "latencyNs" not in crashed
    assert result["summary"] == {"allCorrect": False, "samples": 0}


def test_a_hanging_child_is_killed_as_a_timeout() -> None:
    config = dataclasses.replace(FAST, case_timeout_s=2)
    result = run_job(job("adv_hang_on_5_rows", [5]), "cpu-test", config)
    (case,) = result["cases"]
    assert case["status"] == "timeout"
    assert case["reason"] == "timeout"


def test_backends_without_write_get_fresh_buffers_every_round() -> None:
    config = dataclasses.replace(FAST, backend_options={"buffers": "fresh"})
    honest = run_job(job("rmsnorm_h4096_bf16", [3]), "cpu-test", config)
    assert [c["status"] for c in honest["cases"]] == ["passed"]
    unwritten = run_job(job("adv_unwritten_tail", [3]), "cpu-test", config)
    assert unwritten["cases"][0]["reason"] == "unwritten-output"
    mutating = run_job(job("adv_in_place_too", [3]), "cpu-test", config)
    assert mutating["cases"][0]["reason"] == "input-mutation"
    with pytest.raises(HarnessError, match="buffers must be reuse or fresh"):
        run_job(
            job("rmsnorm_h4096_bf16", [3]),
            "cpu-test",
            dataclasses.replace(FAST, backend_options={"buffers": "some"}),
        )


def test_a_launch_spec_out_of_range_fails_its_case_without_a_child() -> None:
    result = run_job(job("rmsnorm_h4096_bf16", [2], grid="batch_size - 2"), "cpu-test", FAST)
    (case,) = result["cases"]
    assert case["status"] == "error"
    assert case["reason"] == "launch-failed"


# --- refusals and agent failures: nothing to sign -------------------------------------------


def test_torch_binding_solutions_are_the_agents_failure_before_any_child_runs(
    shared: Path,
) -> None:
    fixture = shared / "fixtures" / "sol-execbench" / "cuda_cpp-rmsnorm"
    spec = JobSpec(
        job_id=JOB_ID,
        nonce=NONCE,
        solution=json.loads((fixture / "solution_cuda.json").read_text()),
        definition=json.loads((fixture / "definition.json").read_text()),
        workloads=[json.loads(line) for line in (fixture / "workload.jsonl").open()][:2],
    )
    # No nvcc/torch-extension build path yet: the agent's limitation, never a refutation.
    with pytest.raises(HarnessError, match=re.escape("C++ with the torch binding (cuda_cpp)")):
        run_job(spec, "cpu-test", FAST)


def test_custom_inputs_are_refused_on_the_declarative_path() -> None:
    spec = job("rmsnorm_h4096_bf16", [2])
    workloads = [dict(w) for w in spec.workloads]
    workloads[0]["inputs"] = {"hidden_states": {"type": "custom"}, "weight": {"type": "random"}}
    with pytest.raises(UnsupportedSolution, match="custom_inputs_entrypoint"):
        run_job(dataclasses.replace(spec, workloads=workloads), "cpu-test", FAST)


def test_unknown_backend_is_an_agent_failure() -> None:
    with pytest.raises(HarnessError, match="unknown backend 'cuda-magic'"):
        run_job(job("rmsnorm_h4096_bf16", [2]), "cuda-magic", FAST)


def test_a_missing_reference_is_an_agent_failure_not_a_refutation() -> None:
    config = dataclasses.replace(FAST, reference_module="gpu_agent.stats")
    with pytest.raises(HarnessError, match="has no reference_for"):
        run_job(job("rmsnorm_h4096_bf16", [2]), "cpu-test", config)


def test_an_agent_side_device_failure_aborts_the_job_instead_of_failing_the_case() -> None:
    with pytest.raises(HarnessError, match="the device fell off the bus"):
        run_job(job("agent_device_lost", [2]), "cpu-test", FAST)


def test_job_ids_and_nonces_are_checked_before_any_work() -> None:
    with pytest.raises(HarnessError, match="UUID jobId"):
        run_job(job("rmsnorm_h4096_bf16", [2], job_id="kernelindex-samples"), "cpu-test", FAST)
    bad_nonce = dataclasses.replace(job("rmsnorm_h4096_bf16", [2]), nonce="AB" * 32)
    with pytest.raises(HarnessError, match="64-hex nonce"):
        run_job(bad_nonce, "cpu-test", FAST)


def test_results_are_validated_against_the_predicate() -> None:
    with pytest.raises(HarnessError, match="does not fit rerun/v1"):
        validate_result(
            {
                "jobId": "not-a-uuid",
                "nonce": NONCE,
                "cases": [{"case": "a", "status": "passed"}],
                "summary": {"allCorrect": True, "samples": 0},
                "environment": {},
                "calibration": {},
            }
        )


def test_suite_samples_sum_cases_sample_by_sample() -> None:
    outcomes = [
        CaseOutcome("passed", samples_ns=[1.0, 2.0, 3.0, 4.0]),
        CaseOutcome("passed", samples_ns=[10.0, 20.0, 30.0]),
    ]
    summary = _summary(outcomes, seed=1, resamples=100)
    assert summary["samplesNs"] == [11.0, 22.0, 33.0]
    assert summary["samples"] == 3
    assert summary["medianNs"] == 22.0
    assert summary["meanNs"] == 22.0
    failed = _summary([*outcomes, CaseOutcome("incorrect")], seed=1, resamples=100)
    assert failed == {"allCorrect": False, "samples": 0}
