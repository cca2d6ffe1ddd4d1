"""Run one rerun job (protocol ``kernelindex-rerun-v1``, DESIGN.md §11) on a backend.

Entry point: :func:`run_job` → the ``result`` dict for ``ledger.signing.authoring.rerun_envelope``
(jobId, nonce, cases, summary, environment, calibration), already validated against
``domain.statements.RerunPredicate``.

Process model. The agent loop never touches the device: a *probe* child
(:func:`probe_device`) reads the device fingerprint and calibrates the copy bandwidth, then
every workload case runs in a child of its own (``spawn`` by default: a fresh interpreter,
hence a fresh CUDA context; ``forkserver`` gives the same isolation, faster), so a sticky
CUDA error, a crash or a hang loses that case only. A case child that dies fails its case
(``error``), one that outlives ``case_timeout_s`` is killed (``timeout``).

Per case, in the child: compile once; three correctness rounds (two public seeds, one from
the nonce, in a nonce-shuffled order; see gpu_agent/inputs.py), each with fresh inputs and
freshly poisoned outputs: upload (or, when the backend can ``write`` into a buffer, refill
the same buffers, so pointer-keyed caches see new data at old addresses), hash, launch,
read back, then check that no input changed, every output element was written, and the
outputs match the trusted reference under the case's tolerance; then timing under the stop
rule (gpu_agent/stats.py); then one more correctness round with fresh nonce-derived inputs
in the buffers that were timed (a kernel that stops working once it is being timed, or
serves a cached answer, is caught here); then the roofline floor check.

What is whose fault. A failure of the *submission* (compile error, launch error, wrong or
unwritten output, mutated input, crash, hang, impossible time) becomes a failed case in a
signed result — it refutes. A failure of the *agent* (unsupported solution kind, malformed
job documents, backend unavailable or a backend error marked ``agent_fault``, no reference
for the definition, a bug) raises :class:`HarnessError` /
:class:`~gpu_agent.solution.SolutionError` instead: no measured result exists, because the
agent's own trouble must never refute someone's run.

Where each part lives: child-process isolation in gpu_agent/child_process.py; what crosses
into a case child and back in gpu_agent/case_task.py; the case child itself in
gpu_agent/case_child.py, its correctness rounds in gpu_agent/correctness_round.py; the
result's cases, summary (suite latency) and environment in gpu_agent/result_assembly.py.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from domain.statements import RerunPredicate
from gpu_agent import inputs, stats
from gpu_agent.case_child import probe, run_case
from gpu_agent.case_task import CaseOutcome, CaseTask
from gpu_agent.child_process import ChildResult, in_child
from gpu_agent.definition import Definition, parse_definition
from gpu_agent.expressions import LaunchSpecError
from gpu_agent.launch_spec import ResolvedLaunch, resolve_launch
from gpu_agent.result_assembly import case_record, environment, suite_summary
from gpu_agent.sol_parsing import SolutionError
from gpu_agent.solution import Solution, check_against_definition, parse_solution
from gpu_agent.workload import Workload, parse_workload

PROTOCOL = "kernelindex-rerun-v1"
_JOB_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_NONCE = re.compile(r"[0-9a-f]{64}")
MAX_CASES = 1_000


class HarnessError(Exception):
    """The agent could not run the job; no result must be signed for it."""


@dataclass(frozen=True)
class JobSpec:
    """A claimed rerun job with its documents, digests already checked by the agent loop."""

    job_id: str
    nonce: str  # 64 hex, from the signed rerun request
    solution: Mapping[str, Any]  # SOL Solution JSON (the PyCUDA binding + spec.launch)
    definition: Mapping[str, Any]  # SOL Definition JSON
    workloads: Sequence[Mapping[str, Any]]  # SOL workload objects (the JSONL lines)


@dataclass(frozen=True)
class HarnessConfig:
    stop: stats.StopPolicy = field(default_factory=stats.StopPolicy)
    case_timeout_s: float = 900.0  # compile + rounds + timing of one case
    probe_timeout_s: float = 120.0
    floor_factor: float = stats.DEFAULT_FLOOR_FACTOR
    bootstrap_resamples: int = stats.DEFAULT_RESAMPLES
    # Backend-specific options, passed to create_backend in every child (strings only).
    backend_options: Mapping[str, str] = field(default_factory=dict)
    # Module whose ``reference_for(definition_name)`` returns the trusted numpy reference.
    reference_module: str = "gpu_agent.references"
    # How children start. "spawn" (the default): a fresh interpreter per case. "forkserver":
    # children are forked from a clean server process that preloaded this module and never
    # touched a device, so each child still creates its own CUDA context (CUDA only forbids
    # forking a process that already initialised it) — the same isolation, ~20× faster to
    # start; the CPU test suite uses it.
    start_method: Literal["spawn", "forkserver"] = "spawn"


def _seed(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


@dataclass(frozen=True)
class PreparedJob:
    solution: Solution
    definition: Definition
    workloads: tuple[Workload, ...]


def prepare_job(job: JobSpec) -> PreparedJob:
    """Parse and vet the job's documents; raises UnsupportedSolution / SolutionError."""
    solution = parse_solution(job.solution)
    definition = parse_definition(job.definition)
    check_against_definition(solution, definition)
    if not 1 <= len(job.workloads) <= MAX_CASES:
        raise SolutionError(f"a job needs 1 to {MAX_CASES} workloads, got {len(job.workloads)}")
    workloads = tuple(parse_workload(w, definition) for w in job.workloads)
    if len({w.uuid for w in workloads}) != len(workloads):
        raise SolutionError("workload uuids must be distinct")
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
            f"the {backend_name} backend could not be probed: {outcome.detail or outcome.value}"
        )
    return outcome.value  # type: ignore[no-any-return]


def _case_task(
    job: JobSpec,
    prepared: PreparedJob,
    workload: Workload,
    launch: ResolvedLaunch,
    backend_name: str,
    config: HarnessConfig,
    bandwidth: float,
) -> CaseTask:
    return CaseTask(
        backend_name=backend_name,
        backend_options=dict(config.backend_options),
        reference_module=config.reference_module,
        job_id=job.job_id,
        nonce=job.nonce,
        definition=prepared.definition,
        workload=workload,
        sources=dict(prepared.solution.sources),
        entry_point=prepared.solution.entry_point,
        launch=launch,
        stop=config.stop,
        bytes_moved=inputs.bytes_moved(prepared.definition, workload),
        copy_bandwidth=bandwidth,
        floor_factor=config.floor_factor,
        bootstrap_resamples=config.bootstrap_resamples,
        bootstrap_seed=_seed(f"{PROTOCOL}|bootstrap|{job.job_id}|{workload.uuid}"),
    )


def _child_outcome(child: ChildResult, case: str, start_device: Mapping[str, Any]) -> CaseOutcome:
    """The case's outcome from how its child ended; HarnessError for the agent's failures."""
    if child.kind == "ok":
        outcome: CaseOutcome = child.value
        if (
            outcome.device is not None
            and outcome.device["gpu_uuid_hash"] != start_device["gpu_uuid_hash"]
        ):
            raise HarnessError("the case ran on a different device than the probe")
        return outcome
    if child.kind == "agent-error":
        raise HarnessError(f"case {case}: agent failure: {child.value}")
    if child.kind == "timeout":
        return CaseOutcome("timeout", f"the case child was killed: {child.detail}")
    return CaseOutcome(
        "error",
        f"the case child {child.detail} before reporting (crash, or a fatal device error)",
    )


def run_job(job: JobSpec, backend_name: str, config: HarnessConfig | None = None) -> dict[str, Any]:
    """Run ``job`` on the named backend; return the ``result`` for ``rerun_envelope``.

    Raises UnsupportedSolution (e.g. a torch-binding solution) or SolutionError before
    touching the device, and HarnessError when the agent itself fails; in those cases
    nothing should be signed.
    """
    config = config or HarnessConfig()
    # Checked first: a job the ledger could never accept a result for is not worth a device.
    if not _JOB_ID.fullmatch(job.job_id) or not _NONCE.fullmatch(job.nonce):
        raise HarnessError("a job needs a lowercase UUID jobId and a 64-hex nonce (rerun/v1)")
    prepared = prepare_job(job)
    probed = probe_device(backend_name, config, calibrate=True)
    start_device: dict[str, Any] = probed["device"]
    bandwidth = float(probed["copyBandwidth"])
    if not math.isfinite(bandwidth) or bandwidth <= 0:
        raise HarnessError(f"calibration returned a copy bandwidth of {bandwidth}")

    outcomes: list[CaseOutcome] = []
    end_device: dict[str, Any] | None = None
    for workload in prepared.workloads:
        axes = prepared.definition.resolve_axes(workload.axes)
        try:
            launch = resolve_launch(prepared.solution.launch, axes)
        except LaunchSpecError as exc:
            outcomes.append(CaseOutcome("error", f"launch spec: {exc}"))
            continue
        task = _case_task(job, prepared, workload, launch, backend_name, config, bandwidth)
        child = in_child(run_case, task, config.case_timeout_s, config.start_method)
        outcome = _child_outcome(child, workload.uuid, start_device)
        if outcome.device is not None:
            end_device = outcome.device
        outcomes.append(outcome)
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
        "environment": environment(start_device, end_device),
        "calibration": {
            "copyBandwidthBytesPerS": bandwidth,
            "floorFactor": config.floor_factor,
        },
    }
    validate_result(result)
    return result


def validate_result(result: Mapping[str, Any]) -> None:
    """Check ``result`` against the ledger's rerun/v1 predicate before anyone signs it."""
    try:
        RerunPredicate.model_validate(
            {"protocol": PROTOCOL, **result, "issuedAt": "2000-01-01T00:00:00Z"}
        )
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
