"""Run one rerun job (protocol ``kernelindex-rerun-v1``, docs/design.md §11) on a backend.

Entry point: :func:`run_job` → the ``result`` dict for ``ledger.signing.authoring.rerun_envelope``
(jobId, nonce, cases, summary, environment, calibration), already validated against
``domain.statements.RerunPredicate``.

Process model. The agent loop never touches the device: a *probe* child
(:func:`probe_device`) reads the device fingerprint and calibrates the copy bandwidth, then
every workload case runs in a child of its own, exec'd fresh in the jail of
gpu_agent/jail.py (a fresh interpreter, hence a fresh CUDA context), so a sticky CUDA error,
a crash or a hang loses that case only. A case child that dies fails its case (``error``),
one that outlives ``case_timeout_s`` is killed (``timeout``). A case child holds submitted
code, so it is sent seeds, never the job's nonce: the agent derives every nonce-seeded value
(:func:`~gpu_agent.correctness_round.case_seeds`, ``python_solutions.job.case_rounds``).

Per case, in the child: compile once; three correctness rounds (two public seeds, one from
the nonce, in a nonce-shuffled order; see gpu_agent/inputs.py), each with fresh inputs and
freshly poisoned outputs: upload (or, when the backend can ``write`` into a buffer, refill
the same buffers, so pointer-keyed caches see new data at old addresses), hash, launch,
read back, then check that no input changed, every output element was written, and the
outputs match the trusted reference under the case's tolerance; then timing under the stop
rule (gpu_agent/stats.py), each timed launch preceded by a refill — outputs poisoned again,
inputs replaced by the next of a few fresh nonce-seeded variants — so that no timed launch
can be told from a checked one, and the output of the last one checked where cheap; then
one more correctness round with fresh nonce-derived inputs in the buffers that were timed
(a kernel that stops working once it is being timed, or serves a cached answer, is caught
here); then the roofline floor check (bytes written less the L2, over the calibrated copy
rate). The probe's calibration (copy bandwidth and, on a GPU, the event overhead of an
empty kernel) goes into ``result.calibration``; the build (target, flags, nvcc version) into
``result.build``; the clocks read while timing into ``result.environment.clocks``.

What is whose fault. A failure of the *submission* (compile error, launch error, wrong or
unwritten output, mutated input, crash, hang, impossible time) becomes a failed case in a
signed result — it refutes. A failure of the *agent* (unsupported solution kind, malformed
job documents, backend unavailable or a backend error marked ``agent_fault``, no reference
for the definition, a bug) raises :class:`HarnessError` /
:class:`~gpu_agent.solution.SolutionError` instead: no measured result exists, because the
agent's own trouble must never refute someone's run.

Python solutions (SOL ``pytorch``/``python``/``triton``, FlashInfer ``python``/``triton``,
parsed by gpu_agent/python_solutions/spec.py) take the same route with a different child:
``gpu_agent/python_solutions/routing.py`` first says whether this agent can run the kind on
its backend (Triton without a GPU, torch-binding C++: HarnessError, the agent's failure);
each case then runs in a *sandboxed* child (gpu_agent/python_solutions/sandbox.py) that gets
seeds, never the nonce, makes every round's inputs and reference outputs before it imports
the solution, and runs the reward-hack defences around every call
(gpu_agent/python_solutions/torch_case.py); its cases carry ``defences`` and
``timerCrossCheck``, the result ``build``. One case of the job (drawn from the nonce) also
runs a hidden workload within the job's axes.

Where each part lives: child-process isolation in gpu_agent/child_process.py; what crosses
into a case child and back in gpu_agent/case_task.py; the case child itself in
gpu_agent/case_child.py, its correctness rounds in gpu_agent/correctness_round.py; the
result's cases, summary (suite latency) and environment in gpu_agent/result_assembly.py.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from domain.errors import DomainError
from domain.statements import CaseReason, JobFailure, PredicateType, build_predicate
from gpu_agent import inputs, stats
from gpu_agent.backends.registry import CPU_TEST
from gpu_agent.case_child import probe, run_case
from gpu_agent.case_task import CaseOutcome, CaseTask, TimingTerms
from gpu_agent.child_process import ChildResult, in_child
from gpu_agent.correctness_round import case_seeds
from gpu_agent.definition import Definition, parse_definition
from gpu_agent.expressions import LaunchSpecError
from gpu_agent.launch_spec import ResolvedLaunch, resolve_launch
from gpu_agent.python_solutions import job as python_job
from gpu_agent.python_solutions.routing import cannot_run, missing_dependency
from gpu_agent.python_solutions.spec import (
    TorchSolution,
    check_torch_against_definition,
    parse_job_solution,
)
from gpu_agent.result_assembly import (
    case_record,
    checked_timing,
    environment,
    invalid_report,
    job_build,
    python_build,
    suite_summary,
    timing_clocks,
)
from gpu_agent.sol_parsing import SolutionError, UnsupportedSolution
from gpu_agent.solution import Solution, check_against_definition
from gpu_agent.workload import Workload, parse_workload, refuse_custom_inputs

PROTOCOL = "kernelindex-rerun-v1"
_JOB_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_NONCE = re.compile(r"[0-9a-f]{64}")
MAX_CASES = 1_000


class HarnessError(Exception):
    """The agent could not run the job; no measured result must be signed for it. ``code``
    is what the job's ``outcome: failed`` result says (the message stays with the agent)."""

    def __init__(self, message: str, code: JobFailure = JobFailure.AGENT_FAULT) -> None:
        super().__init__(message)
        self.code = code


def failure_code(exc: BaseException) -> JobFailure:
    """What a failed job's signed result says for ``exc``, raised while the agent fetched,
    parsed or ran it: a word of the rerun vocabulary, never the exception's message."""
    if isinstance(exc, HarnessError):
        return exc.code
    if isinstance(exc, UnsupportedSolution):
        return JobFailure.UNSUPPORTED_SOLUTION
    if isinstance(exc, SolutionError):
        return JobFailure.INVALID_JOB
    if isinstance(exc, DomainError):  # the agent's API client: the ledger or the network
        return JobFailure.ARTIFACT_UNAVAILABLE
    if isinstance(exc, ValueError | KeyError | TypeError):
        return JobFailure.INVALID_JOB  # the job's documents (JSON, shapes) do not fit
    return JobFailure.AGENT_FAULT


@dataclass(frozen=True)
class JobSpec:
    """A claimed rerun job with its documents, digests already checked by the agent loop."""

    job_id: str
    nonce: str  # 64 hex, from the signed rerun request
    solution: Mapping[str, Any]  # SOL Solution JSON (the PyCUDA binding + spec.launch)
    definition: Mapping[str, Any]  # SOL Definition JSON
    workloads: Sequence[Mapping[str, Any]]  # SOL workload objects (the JSONL lines)


# The cpu-test backend's stop rule. The GPU rule (stats.StopPolicy()) is tuned for µs kernels
# whose clocks ramp: ≥ 100 ms of warm-up, ≥ 50 samples, up to 2,000 or 30 s per case. A CPU
# double's call of a large case takes most of a second (a 14,509 × 4,096 RMSNorm: ~0.7 s, plus
# ~0.4 s of fresh inputs before each timed call), so that rule made one honest 14-case rerun
# take 15 minutes and more. Its times never verify anything (cpu-test is no measuring
# backend), so they need to be honest, not precise: a few samples, a short budget. Every
# check (rounds, defences, audit call, cross-check, floor) runs as on the GPU.
CPU_TEST_STOP = stats.StopPolicy(
    warmup=1, warmup_s=0.0, batch=5, min_samples=10, max_samples=200, time_budget_s=2.0
)


def default_stop(backend_name: str) -> stats.StopPolicy:
    """The stop rule a backend is timed by when the configuration names none."""
    return CPU_TEST_STOP if backend_name == CPU_TEST else stats.StopPolicy()


@dataclass(frozen=True)
class HarnessConfig:
    # None: the backend's own (default_stop); tests name a short one.
    stop: stats.StopPolicy | None = None
    case_timeout_s: float = 900.0  # compile + rounds + timing of one case
    probe_timeout_s: float = 120.0
    floor_factor: float = stats.DEFAULT_FLOOR_FACTOR
    bootstrap_resamples: int = stats.DEFAULT_RESAMPLES
    # Backend-specific options, passed to create_backend in every child (strings only).
    backend_options: Mapping[str, str] = field(default_factory=dict)
    # Module whose ``reference_for(definition_name)`` returns the trusted numpy reference.
    reference_module: str = "gpu_agent.references"
    # How the device probe's child starts (it runs only the agent's own code; every case
    # child is exec'd fresh in the jail, whatever this says). "spawn" (the default): a fresh
    # interpreter. "forkserver": forked from a clean server process that preloaded this
    # module and never touched a device, so the child still creates its own CUDA context —
    # the same isolation, faster to start.
    start_method: Literal["spawn", "forkserver"] = "spawn"


def _seed(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


@dataclass(frozen=True)
class PreparedJob:
    solution: Solution | TorchSolution
    definition: Definition
    workloads: tuple[Workload, ...]


def prepare_job(job: JobSpec) -> PreparedJob:
    """Parse and vet the job's documents; raises UnsupportedSolution / SolutionError."""
    solution = parse_job_solution(job.solution)
    definition = parse_definition(job.definition)
    if isinstance(solution, Solution):
        check_against_definition(solution, definition)
    else:
        check_torch_against_definition(solution, definition)
    if not 1 <= len(job.workloads) <= MAX_CASES:
        raise SolutionError(f"a job needs 1 to {MAX_CASES} workloads, got {len(job.workloads)}")
    workloads = tuple(parse_workload(w, definition) for w in job.workloads)
    if len({w.uuid for w in workloads}) != len(workloads):
        raise SolutionError("workload uuids must be distinct")
    if isinstance(solution, Solution):
        for workload in workloads:
            refuse_custom_inputs(workload)
    return PreparedJob(solution, definition, workloads)


def probe_device(backend_name: str, config: HarnessConfig, calibrate: bool) -> dict[str, Any]:
    """Read the device in a child: ``{"device": asdict(DeviceInfo), "copyBandwidth": float |
    None}`` (bytes copied per second, measured only with ``calibrate``). HarnessError when the
    backend cannot even start: an agent problem."""
    outcome = in_child(
        probe,
        (backend_name, dict(config.backend_options), calibrate),
        config.probe_timeout_s,
        config.start_method,
    )
    if outcome.kind != "ok":
        raise HarnessError(
            f"the {backend_name} backend could not be probed: {outcome.detail or outcome.value}",
            JobFailure.BACKEND_UNAVAILABLE,
        )
    if not isinstance(outcome.value, dict):
        detail = f"the {backend_name} backend's probe answered {type(outcome.value).__name__}"
        raise HarnessError(detail, JobFailure.BACKEND_UNAVAILABLE)
    return outcome.value


@dataclass(frozen=True)
class Calibration:
    """What the probe measured before the cases: the floor's inputs and the timer's cost."""

    copy_bandwidth: float  # bytes copied per second
    l2_bytes: int
    event_overhead_ns: float | None = None

    def to_json(self, floor_factor: float) -> dict[str, float]:
        """``result.calibration`` (a dict of floats in rerun/v1)."""
        recorded = {"copyBandwidthBytesPerS": self.copy_bandwidth, "floorFactor": floor_factor}
        if self.event_overhead_ns is not None:
            recorded["eventOverheadNs"] = self.event_overhead_ns
        return recorded


def _calibration(probed: Mapping[str, Any]) -> Calibration:
    bandwidth = float(probed["copyBandwidth"])
    if not math.isfinite(bandwidth) or bandwidth <= 0:
        raise HarnessError(f"calibration returned a copy bandwidth of {bandwidth}")
    overhead = probed.get("eventOverheadNs")
    if overhead is not None and not (math.isfinite(overhead) and overhead >= 0):
        raise HarnessError(f"calibration returned an event overhead of {overhead} ns")
    return Calibration(bandwidth, int(probed["device"]["l2_bytes"]), overhead)


def _timing_terms(
    job: JobSpec,
    prepared: PreparedJob,
    workload: Workload,
    config: HarnessConfig,
    calibration: Calibration,
    backend_name: str,
) -> TimingTerms:
    """The terms of this case, made once for either path that runs it."""
    return TimingTerms(
        stop=config.stop or default_stop(backend_name),
        written_bytes=stats.written_bytes(inputs.output_shapes(prepared.definition, workload)),
        l2_bytes=calibration.l2_bytes,
        copy_bandwidth=calibration.copy_bandwidth,
        floor_factor=config.floor_factor,
        bootstrap_resamples=config.bootstrap_resamples,
        bootstrap_seed=_seed(f"{PROTOCOL}|bootstrap|{job.job_id}|{workload.uuid}"),
    )


def _case_task(
    job: JobSpec,
    prepared: PreparedJob,
    workload: Workload,
    launch: ResolvedLaunch,
    backend_name: str,
    config: HarnessConfig,
    calibration: Calibration,
) -> CaseTask:
    assert isinstance(prepared.solution, Solution)
    return CaseTask(
        backend_name=backend_name,
        backend_options=dict(config.backend_options),
        reference_module=config.reference_module,
        seeds=case_seeds(job.job_id, job.nonce, workload.uuid),
        definition=prepared.definition,
        workload=workload,
        sources=dict(prepared.solution.sources),
        entry_point=prepared.solution.entry_point,
        launch=launch,
        timing=_timing_terms(job, prepared, workload, config, calibration, backend_name),
    )


# What the agent logs of a Python-solution child's claim of an agent failure (none of its text).
UNTRUSTED_AGENT_ERROR = "the case child claimed an agent failure after it was ready"


def child_outcome(
    child: ChildResult, case: str, timing: TimingTerms, *, host_code: bool
) -> CaseOutcome:
    """The case's outcome from how its child ended, its timing judged by the agent against
    the terms it sent (``checked_timing``); HarnessError for the agent's failures.

    ``host_code``: submitted code ran in the child's own process (a Python solution), so
    it may have written the report, a claimed agent failure included: that is the case's
    ``invalid-report``, and its text is dropped — the job does not close as the agent's
    failure on the solution's word. A declarative child runs submitted code only on the
    device (a cubin), so its agent failures are the agent's."""
    if child.kind == "ok":
        return checked_timing(child.value, timing)
    if child.kind == "invalid-report":
        return replace(invalid_report(), reason=f"the case child {child.detail}")
    if child.kind == "late-agent-error" and host_code:
        return replace(invalid_report(), reason=UNTRUSTED_AGENT_ERROR)
    if child.kind in ("agent-error", "late-agent-error"):
        raise HarnessError(f"case {case}: agent failure: {child.value}")
    if child.kind == "timeout":
        return CaseOutcome(
            "timeout", f"the case child was killed: {child.detail}", code=CaseReason.TIMEOUT
        )
    return CaseOutcome(
        "error",
        f"the case child {child.detail} before reporting (crash, or a fatal device error)",
        code=CaseReason.CHILD_DIED,
    )


# Called with each case's record (``result.cases[i]``) as soon as it is measured.
CaseCallback = Callable[[dict[str, Any]], None]


def run_job(
    job: JobSpec,
    backend_name: str,
    config: HarnessConfig | None = None,
    *,
    on_case: CaseCallback | None = None,
) -> dict[str, Any]:
    """Run ``job`` on the named backend; return the ``result`` for ``rerun_envelope``.

    Raises UnsupportedSolution (e.g. a torch-binding solution) or SolutionError before
    touching the device, and HarnessError when the agent itself fails; in those cases
    nothing should be signed. ``on_case``: told each case's record as soon as it is measured
    (the self-check writes its table row then, so a run cut short keeps its rows).
    """
    config = config or HarnessConfig()
    # Checked first: a job the ledger could never accept a result for is not worth a device.
    if not _JOB_ID.fullmatch(job.job_id) or not _NONCE.fullmatch(job.nonce):
        raise HarnessError(
            "a job needs a lowercase UUID jobId and a 64-hex nonce (rerun/v1)",
            JobFailure.INVALID_JOB,
        )
    prepared = prepare_job(job)
    if isinstance(prepared.solution, TorchSolution):
        refusal = cannot_run(prepared.solution, backend_name)
        if refusal is not None:
            raise HarnessError(refusal, JobFailure.UNSUPPORTED_SOLUTION)
        missing = missing_dependency(prepared.solution.dependencies)
        if missing is not None:
            raise HarnessError(missing, JobFailure.MISSING_DEPENDENCY)
    probed = probe_device(backend_name, config, calibrate=True)
    start_device: dict[str, Any] = probed["device"]
    calibration = _calibration(probed)
    outcomes, end_device = _run_cases(
        job, prepared, backend_name, config, calibration, start_device, on_case
    )
    if end_device is None:  # no case child reported: read the end fingerprint directly
        end_device = probe_device(backend_name, config, calibrate=False)["device"]

    result = {
        "jobId": job.job_id,
        "nonce": job.nonce,
        "cases": [
            case_record(w.uuid, o) for w, o in zip(prepared.workloads, outcomes, strict=True)
        ],
        "summary": suite_summary(
            outcomes, _seed(f"{PROTOCOL}|summary|{job.job_id}"), config.bootstrap_resamples
        ),
        "environment": environment(start_device, end_device, timing_clocks(outcomes)),
        "calibration": calibration.to_json(config.floor_factor),
    }
    if isinstance(prepared.solution, TorchSolution):
        build: dict[str, Any] | None = python_build(prepared.solution, "cpu")
    else:
        build = job_build(outcomes)
    if build is not None:
        result["build"] = build
    validate_result(result)
    return result


def _run_cases(
    job: JobSpec,
    prepared: PreparedJob,
    backend_name: str,
    config: HarnessConfig,
    calibration: Calibration,
    start_device: Mapping[str, Any],
    on_case: CaseCallback | None,
) -> tuple[list[CaseOutcome], dict[str, Any] | None]:
    """Every case in its child, in order: the outcomes and the last fingerprint reported."""
    outcomes: list[CaseOutcome] = []
    end_device: dict[str, Any] | None = None
    for index, workload in enumerate(prepared.workloads):
        if isinstance(prepared.solution, Solution):
            outcome = _declarative_case(job, prepared, workload, backend_name, config, calibration)
        else:
            outcome = _python_case(job, prepared, index, backend_name, config, calibration)
        if outcome.device is not None:
            if outcome.device["gpu_uuid_hash"] != start_device["gpu_uuid_hash"]:
                raise HarnessError("the case ran on a different device than the probe")
            end_device = outcome.device
        outcomes.append(outcome)
        if on_case is not None:
            on_case(case_record(workload.uuid, outcome))
    return outcomes, end_device


def _declarative_case(
    job: JobSpec,
    prepared: PreparedJob,
    workload: Workload,
    backend_name: str,
    config: HarnessConfig,
    calibration: Calibration,
) -> CaseOutcome:
    """One case of a declarative-binding solution: its launch resolved, run in a child."""
    assert isinstance(prepared.solution, Solution)
    axes = prepared.definition.resolve_axes(workload.axes)
    try:
        launch = resolve_launch(prepared.solution.launch, axes)
    except LaunchSpecError as exc:
        return CaseOutcome("error", f"launch spec: {exc}", code=CaseReason.LAUNCH_FAILED)
    task = _case_task(job, prepared, workload, launch, backend_name, config, calibration)
    child = in_child(
        run_case,
        task,
        config.case_timeout_s,
        sandboxed=True,  # the jail: nvcc and the kernel see nothing of the agent's
        limits=python_job.case_limits(backend_name, config.case_timeout_s),
    )
    return child_outcome(child, workload.uuid, task.timing, host_code=False)


def _python_case(
    job: JobSpec,
    prepared: PreparedJob,
    index: int,
    backend_name: str,
    config: HarnessConfig,
    calibration: Calibration,
) -> CaseOutcome:
    """One case of a Python solution, in a sandboxed child (gpu_agent/python_solutions)."""
    assert isinstance(prepared.solution, TorchSolution)
    workload = prepared.workloads[index]
    hidden = python_job.hidden_case(prepared.definition, prepared.workloads, job.nonce)
    hidden_axes = hidden[1] if hidden is not None and hidden[0] == index else None
    task = python_job.torch_task(
        prepared.solution,
        prepared.definition,
        workload,
        python_job.case_rounds(job.job_id, job.nonce, workload, hidden_axes),
        backend_name=backend_name,
        backend_options=dict(config.backend_options),
        timing=_timing_terms(job, prepared, workload, config, calibration, backend_name),
    )
    child = in_child(
        python_job.run_torch_case,
        task,
        config.case_timeout_s,
        sandboxed=True,
        limits=python_job.case_limits(backend_name, config.case_timeout_s),
    )
    return child_outcome(child, workload.uuid, task.timing, host_code=True)


def validate_result(result: Mapping[str, Any]) -> None:
    """Check ``result`` against the ledger's rerun/v1 predicate before anyone signs it."""
    try:
        fields = {"protocol": PROTOCOL, **result, "issuedAt": "2000-01-01T00:00:00Z"}
        build_predicate(PredicateType.RERUN, fields)
    except Exception as exc:
        raise HarnessError(f"the result does not fit rerun/v1: {exc}") from exc


__all__ = [
    "CaseOutcome",
    "HarnessConfig",
    "HarnessError",
    "JobSpec",
    "PreparedJob",
    "prepare_job",
    "run_job",
    "validate_result",
]
