"""Python solutions end to end on the cpu-test backend: each cheat caught, with its reason.

Every job runs exactly as in production (each case in a fresh child exec'd in the jail, the
solution imported only there; ``start_method`` only picks how the device probe starts) and
with small stop-rule settings. All jobs are independent, so one module fixture runs them two
at a time and the tests read the results.
The cheats are the SOL-ExecBench reward-hack fixtures (lazy output, monkey patch, stream
injection, thread injection) and tests/gpu_agent/data/python_solutions/*.py.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from domain.statements import RerunPredicate, parse_predicate, parse_statement
from gpu_agent.harness import HarnessConfig, HarnessError, JobSpec, run_job
from gpu_agent.stats import StopPolicy
from ledger.signing.authoring import rerun_envelope
from ledger.signing.keys import SigningKey
from tests.paths import FIXTURES

SOL = FIXTURES / "sol-execbench"
FLASHINFER = FIXTURES / "flashinfer-trace"
DATA = Path(__file__).parent / "data" / "python_solutions"
JOB_ID = "0b0b0b0b-1111-4222-8333-444455556666"
NONCE = "a7" * 32
STOP = StopPolicy(warmup=2, batch=20, min_samples=40, max_samples=60, time_budget_s=0.3)
FAST = HarnessConfig(
    stop=STOP, bootstrap_resamples=200, case_timeout_s=120, start_method="forkserver"
)
SPAWN = dataclasses.replace(FAST, start_method="spawn")


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


RMSNORM = _json(SOL / "triton-rmsnorm" / "definition.json")
LOG_F32: dict[str, Any] = {
    "name": "log_f32",
    "axes": {"n": {"type": "var"}},
    "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
    "outputs": {"output": {"shape": ["n"], "dtype": "float32"}},
    "reference": "import torch\n\ndef run(x):\n    return torch.log(x)\n",
}


def solution(file: str, definition: str = "rmsnorm_h4096", dps: bool = True) -> dict[str, Any]:
    """A SOL pytorch solution whose kernel.py is ``DATA/file``."""
    return {
        "name": file.removesuffix(".py"),
        "definition": definition,
        "author": "tests",
        "spec": {
            "languages": ["pytorch"],
            "target_hardware": ["LOCAL"],
            "entry_point": "kernel.py::run",
            "dependencies": ["torch"],
            "destination_passing_style": dps,
        },
        "sources": [{"path": "kernel.py", "content": (DATA / file).read_text()}],
    }


def rows(*counts: int) -> list[dict[str, Any]]:
    return [
        {
            "uuid": f"rows-{n}",
            "axes": {"batch_size": n},
            "inputs": {"hidden_states": {"type": "random"}, "weight": {"type": "random"}},
        }
        for n in counts
    ]


def job(sol: dict[str, Any], workloads: list[dict[str, Any]], definition: Any = None) -> JobSpec:
    return JobSpec(JOB_ID, NONCE, sol, definition or RMSNORM, workloads)


def sol_job(folder: str, file: str, count: int = 1) -> JobSpec:
    """One of SOL-ExecBench's fixture jobs: its solution, definition and first workloads."""
    if folder == "reward-hacks":
        return job(_json(SOL / folder / file), rows(3))
    workloads = [json.loads(line) for line in (SOL / folder / "workload.jsonl").open()][:count]
    return job(_json(SOL / folder / file), workloads, _json(SOL / folder / "definition.json"))


def flashinfer_job() -> JobSpec:
    traces = [json.loads(line) for line in (FLASHINFER / "trace.jsonl").open()]
    return JobSpec(
        JOB_ID,
        NONCE,
        _json(FLASHINFER / "solution.json"),
        _json(FLASHINFER / "definition.json"),
        [traces[0]["workload"]],
    )


SECRET_ENV = "KERNELINDEX_AGENT_KEY"
SECRET_PATH = "/secret/agent.pem"
# Reports what it can see of the agent: fails (raises) when anything leaked into its child.
PROBE = f"""
import os, sys, torch
LEAKS = [k for k in os.environ if k.startswith("KERNELINDEX") or "{SECRET_PATH}" in os.environ[k]]
LEAKS += [a for a in sys.argv if "{SECRET_PATH}" in a or a == "--key"]
if LEAKS or not os.getcwd().startswith(os.environ["HOME"]):
    raise RuntimeError(f"leaked into the child: {{LEAKS}} cwd {{os.getcwd()}}")

def run(hidden_states, weight, output):
    x = hidden_states.to(torch.float32)
    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-5)
    output.copy_(((x * inv_rms) * weight.to(torch.float32)).to(output.dtype))
"""


def _sandbox_probe_job() -> JobSpec:
    probe = solution("honest_dps.py")
    probe["sources"][0]["content"] = PROBE
    return job(probe, rows(2))


JOBS: dict[str, Callable[[], tuple[JobSpec, HarnessConfig]]] = {
    "honest-dps": lambda: (job(solution("honest_dps.py"), rows(4, 6)), FAST),
    "linear-backward": lambda: (
        sol_job("pytorch-linear_backward", "solution_python.json", 2),
        FAST,
    ),
    "sol-lazy-output": lambda: (sol_job("reward-hacks", "solution_hack_lazy_output.json"), FAST),
    "sol-monkey-patch": lambda: (sol_job("reward-hacks", "solution_hack_monkey_patch.json"), FAST),
    "sol-stream-injection": lambda: (
        sol_job("reward-hacks", "solution_hack_stream_injection.json"),
        FAST,
    ),
    "sol-thread-injection": lambda: (
        sol_job("reward-hacks", "solution_hack_thread_injection.json"),
        FAST,
    ),
    "cached-by-shape": lambda: (job(solution("cached_by_shape.py", dps=False), rows(3)), FAST),
    "mutates-input": lambda: (job(solution("mutates_input.py"), rows(3)), FAST),
    "hardcoded-shapes": lambda: (job(solution("hardcoded_shapes.py"), rows(4, 6)), FAST),
    "unwritten-tail": lambda: (job(solution("unwritten_tail.py"), rows(3)), FAST),
    "runtime-codegen": lambda: (job(solution("runtime_codegen.py"), rows(3)), FAST),
    "native-library": lambda: (job(solution("loads_native_library.py"), rows(3)), FAST),
    "stops-when-timed": lambda: (job(solution("stops_when_timed.py"), rows(4)), FAST),
    "spawns-process": lambda: (job(solution("spawns_process.py"), rows(3)), FAST),
    "patches-comparison": lambda: (job(solution("patches_comparison.py"), rows(3)), FAST),
    "exits": lambda: (job(solution("exits.py"), rows(3)), FAST),
    "nan-mirror": lambda: (
        job(
            solution("log_mirrors_nan.py", "log_f32"),
            [{"uuid": "n-64", "axes": {"n": 64}, "inputs": {"x": {"type": "random"}}}],
            LOG_F32,
        ),
        FAST,
    ),
    "flashinfer": lambda: (flashinfer_job(), FAST),
    # spawn: a fresh interpreter inherits the agent's environment and argv as they are now.
    "sandbox-probe": lambda: (_sandbox_probe_job(), SPAWN),
}


def _run(name: str) -> dict[str, Any] | Exception:
    spec, config = JOBS[name]()
    try:
        return run_job(spec, "cpu-test", config)
    except (HarnessError, ValueError) as exc:
        return exc


@pytest.fixture(scope="module")
def results() -> Iterator[dict[str, dict[str, Any] | Exception]]:
    saved_argv = list(sys.argv)
    os.environ[SECRET_ENV] = SECRET_PATH
    sys.argv[:] = [*saved_argv, "--key", SECRET_PATH]
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            yield dict(zip(JOBS, pool.map(_run, JOBS), strict=True))
    finally:
        os.environ.pop(SECRET_ENV, None)
        sys.argv[:] = saved_argv


def result_of(results: dict[str, Any], name: str) -> dict[str, Any]:
    value = results[name]
    assert isinstance(value, dict), value
    return value


def defences(case: dict[str, Any]) -> dict[str, str]:
    return {d["name"]: d["outcome"] for d in case["defences"]}


# --- honest solutions pass every defence ----------------------------------------------------


@pytest.mark.parametrize("name", ["honest-dps", "linear-backward"])
def test_honest_python_solutions_pass_with_every_defence_recorded(
    results: dict[str, Any], name: str
) -> None:
    result = result_of(results, name)
    assert result["summary"]["allCorrect"] is True
    for case in result["cases"]:
        assert case["status"] == "passed", case
        outcomes = defences(case)
        assert set(outcomes.values()) <= {"passed", "skipped"}, outcomes
        for expected in (
            "sandbox",
            "reference-before-solution",
            "harness-integrity",
            "thread-injection",
            "side-stream",
            "strict-output-type",
            "input-mutation",
            "non-finite-output",
            "secret-round",
            "fresh-inputs",
            "timing-audit",
            "post-timing-round",
            "roofline-floor",
        ):
            assert outcomes.get(expected) == "passed", (expected, outcomes)
        cross = case["timerCrossCheck"]
        assert cross["outcome"] == "passed" and cross["calls"] >= STOP.min_samples
        assert cross["wallNs"] >= cross["timedNs"] > 0
    # One case of the job also ran a workload nobody had seen.
    hidden = [c for c in result["cases"] if "hidden-workload" in defences(c)]
    assert len(hidden) == 1 and defences(hidden[0])["hidden-workload"] == "passed"
    assert result["build"]["solutionKind"] == "python"
    assert result["build"]["runtime"]["torch"].startswith("2.")
    assert result["environment"]["backend"] == "cpu-test"


def test_destination_passing_outputs_are_poisoned_value_returning_ones_say_why_not(
    results: dict[str, Any],
) -> None:
    dps = result_of(results, "honest-dps")["cases"][0]
    returning = result_of(results, "linear-backward")["cases"][0]
    assert defences(dps)["output-poisoning"] == "passed"
    assert defences(returning)["output-poisoning"] == "skipped"


def test_a_python_result_signs_and_parses_as_rerun_v1(results: dict[str, Any]) -> None:
    result = result_of(results, "linear-backward")
    envelope = rerun_envelope("sha256:" + "1" * 64, "run", SigningKey.generate(), result=result)
    statement = parse_statement(json.loads(base64.b64decode(envelope["payload"])))
    predicate = parse_predicate(statement)
    assert isinstance(predicate, RerunPredicate) and predicate.build is not None
    assert predicate.build.solutionKind == "python"
    assert predicate.cases[0].defences and predicate.cases[0].timerCrossCheck is not None


# --- every cheat fails its case, with the defence that caught it ----------------------------

# The signed case names the defence only (the rerun vocabulary, issue 32): what it saw, in
# words, may quote the solution and stays in the case child.
CAUGHT = [
    ("sol-lazy-output", "strict-output-type"),
    ("sol-monkey-patch", "harness-integrity"),
    ("sol-stream-injection", "side-stream"),
    ("sol-thread-injection", "thread-injection"),
    ("runtime-codegen", "runtime-code-loading"),
    ("native-library", "runtime-code-loading"),
    ("stops-when-timed", "timing-audit"),
    ("spawns-process", "child-processes"),
    ("patches-comparison", "harness-integrity"),
]


@pytest.mark.parametrize(("name", "defence"), CAUGHT)
def test_reward_hacks_are_caught_by_detection(
    results: dict[str, Any], name: str, defence: str
) -> None:
    result = result_of(results, name)
    assert result["summary"]["allCorrect"] is False
    for case in result["cases"]:
        assert case["status"] == "incorrect", case
        assert case["reason"] == f"reward-hack:{defence}", case
        assert defences(case)[defence] == "failed"


WRONG = [
    ("cached-by-shape", None, "output-mismatch"),
    ("mutates-input", "input-mutation", "input-mutation"),
    ("hardcoded-shapes", "hidden-workload", "output-mismatch"),
    ("unwritten-tail", "output-poisoning", "unwritten-output"),
    ("nan-mirror", "non-finite-output", "output-mismatch"),
]


@pytest.mark.parametrize(("name", "defence", "reason"), WRONG)
def test_wrong_answers_fail_with_the_check_that_saw_them(
    results: dict[str, Any], name: str, defence: str | None, reason: str
) -> None:
    result = result_of(results, name)
    failed = [c for c in result["cases"] if c["status"] == "incorrect"]
    assert failed, result["cases"]
    for case in failed:
        assert case["reason"] == reason, case
        if defence is not None:
            assert defences(case)[defence] == "failed"
    assert result["summary"]["allCorrect"] is False


def test_the_hardcoded_shapes_pass_their_own_workloads(results: dict[str, Any]) -> None:
    cases = result_of(results, "hardcoded-shapes")["cases"]
    statuses = sorted(c["status"] for c in cases)
    assert statuses == ["incorrect", "passed"]  # only the case that ran the hidden workload


def test_a_memoised_answer_passes_one_round_then_fails_fresh_inputs(
    results: dict[str, Any],
) -> None:
    (case,) = result_of(results, "cached-by-shape")["cases"]
    # The first round got a real answer; the next one, with fresh inputs, the cached one.
    assert case["reason"] == "output-mismatch" and "round" in case
    assert "secret-round" not in defences(case) or defences(case)["secret-round"] == "failed"


def test_a_solution_that_exits_is_its_error_not_the_agents(results: dict[str, Any]) -> None:
    (case,) = result_of(results, "exits")["cases"]
    assert case["status"] == "error"
    assert case["reason"] == "solution-raised"


def test_the_child_sees_no_agent_secret_argv_or_working_directory(
    results: dict[str, Any],
) -> None:
    (case,) = result_of(results, "sandbox-probe")["cases"]
    assert case["status"] == "passed", case.get("reason")
    sandbox = next(d for d in case["defences"] if d["name"] == "sandbox")
    assert sandbox["outcome"] == "passed"


# --- what the agent cannot run is the agent's failure, never a refutation -------------------


def test_a_missing_dependency_is_the_agents_fault(results: dict[str, Any]) -> None:
    error = results["flashinfer"]
    assert isinstance(error, HarnessError)
    assert "'flashinfer'" in str(error) and "not have installed" in str(error)


@pytest.mark.parametrize(
    ("folder", "file", "words"),
    [
        ("triton-rmsnorm", "solution_triton.json", "runs only on a CUDA GPU"),
        ("cuda_cpp-rmsnorm", "solution_cuda.json", r"C\+\+ with the torch binding"),
    ],
)
def test_solutions_that_need_a_gpu_or_a_build_are_refused_as_the_agents_fault(
    folder: str, file: str, words: str
) -> None:
    with pytest.raises(HarnessError, match=words):
        run_job(sol_job(folder, file), "cpu-test", FAST)


def test_python_solutions_on_the_gpu_backend_are_not_built_yet() -> None:
    with pytest.raises(HarnessError, match="GPU path"):
        run_job(sol_job("pytorch-linear_backward", "solution_python.json"), "pycuda", FAST)


def test_a_definition_without_reference_code_cannot_judge_a_python_solution() -> None:
    definition = copy.deepcopy(RMSNORM)
    del definition["reference"]
    with pytest.raises(ValueError, match="no reference code"):
        run_job(job(solution("honest_dps.py"), rows(2), definition), "cpu-test", FAST)
