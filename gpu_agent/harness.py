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

Suite latency (``summary.samplesNs``): when every case passed, sample *i* of the suite is
the sum over cases of each case's *i*-th kept sample, for i below the smallest per-case
sample count (≤ 2000 = ``MAX_RERUN_SAMPLES``). Cases are timed independently, so this is a
draw from the distribution of "one launch of every case"; ``medianNs``/``meanNs``/``ci95Ns``
are the median, mean and bootstrap CI95 of the median of those sums.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import math
import multiprocessing
import multiprocessing.context
import re
import signal
import statistics
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from domain.statements import MAX_RERUN_SAMPLES, RerunPredicate
from gpu_agent import checks, inputs, stats
from gpu_agent.backends.base import Backend, BackendError, Buffer, CompiledKernel, KernelArg
from gpu_agent.backends.registry import create_backend
from gpu_agent.expressions import LaunchSpecError
from gpu_agent.solution import (
    Definition,
    ResolvedLaunch,
    Solution,
    SolutionError,
    Workload,
    check_against_definition,
    parse_definition,
    parse_solution,
    parse_workload,
    resolve_launch,
)

PROTOCOL = "kernelindex-rerun-v1"
_JOB_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_NONCE = re.compile(r"[0-9a-f]{64}")
MAX_CASES = 1_000
MAX_REASON = 2_000
ReferenceFn = Callable[..., Mapping[str, npt.NDArray[np.generic]]]


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


# --- what crosses into a case child (all picklable) -----------------------------------------


@dataclass(frozen=True)
class CaseTask:
    backend_name: str
    backend_options: Mapping[str, str]
    reference_module: str
    job_id: str
    nonce: str
    definition: Definition
    workload: Workload
    sources: Mapping[str, str]
    entry_point: str
    launch: ResolvedLaunch
    stop: stats.StopPolicy
    bytes_moved: int
    copy_bandwidth: float
    floor_factor: float
    bootstrap_resamples: int
    bootstrap_seed: int


@dataclass
class CaseOutcome:
    status: str  # a domain CaseStatus value
    reason: str | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    samples_ns: list[float] = field(default_factory=list)
    latency: dict[str, Any] | None = None
    device: dict[str, Any] | None = None


class _AgentFault(Exception):
    """Raised inside a child for the agent's own failures (reported, then re-raised)."""


# --- the child side -------------------------------------------------------------------------


def _child_main(conn: Connection, target: Callable[[Any], Any], payload: Any) -> None:
    try:
        result = target(payload)
        conn.send(("ok", result))
    except BaseException as exc:
        conn.send(("agent-error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
    finally:
        conn.close()


def _probe(payload: tuple[str, Mapping[str, str], bool]) -> dict[str, Any]:
    backend_name, options, calibrate = payload
    backend = create_backend(backend_name, options)
    try:
        info = asdict(backend.device())
        bandwidth = backend.copy_bandwidth() if calibrate else None
        return {"device": info, "copyBandwidth": bandwidth}
    finally:
        backend.close()


def _load_reference(module_name: str, definition_name: str) -> ReferenceFn:
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise _AgentFault(f"reference module {module_name!r} cannot be imported: {exc}") from exc
    reference_for = getattr(module, "reference_for", None)
    if reference_for is None:
        raise _AgentFault(f"{module_name} has no reference_for()")
    try:
        function = reference_for(definition_name)
    except (KeyError, LookupError) as exc:
        raise _AgentFault(f"no trusted reference for definition {definition_name!r}") from exc
    if function is None:
        raise _AgentFault(f"no trusted reference for definition {definition_name!r}")
    return function  # type: ignore[no-any-return]


@dataclass
class _DeviceSet:
    inputs: dict[str, Buffer]
    outputs: dict[str, Buffer]


@dataclass
class _Round:
    failures: list[str]
    max_abs: float
    max_rel: float
    args: list[KernelArg]
    buffers: _DeviceSet


def _writer(backend: Backend) -> Callable[[Buffer, npt.NDArray[np.generic]], None] | None:
    """The backend's optional ``write(buffer, host)`` (copy into an existing buffer).

    With it, every round of a case reuses the same device buffers with fresh contents, and
    the post-timing round refills the very buffers that were timed: a kernel that caches its
    result keyed on the pointers it was given then returns a stale answer, deterministically.
    Without it each round uploads to new buffers (where the allocator may or may not hand
    out the same addresses again).
    """
    write = getattr(backend, "write", None)
    return write if callable(write) else None


def _correctness_round(
    backend: Backend,
    kernel: CompiledKernel,
    task: CaseTask,
    reference: ReferenceFn,
    round_: inputs.Round,
    reuse: _DeviceSet | None = None,
) -> _Round:
    """One round: fresh inputs, freshly poisoned outputs, one launch, every check.

    ``reuse``: the previous round's buffers, refilled in place (see :func:`_writer`)."""
    definition, workload = task.definition, task.workload
    values = inputs.generate(definition, workload, round_.seed)
    try:
        raw_expected = reference(**values)
    except Exception as exc:
        raise _AgentFault(f"the trusted reference failed: {type(exc).__name__}: {exc}") from exc
    shapes = inputs.output_shapes(definition, workload)
    expected: dict[str, npt.NDArray[np.generic]] = {}
    for name, (shape, dtype) in shapes.items():
        if name not in raw_expected:
            raise _AgentFault(f"the reference returned no {name!r}")
        # SOL's reference returns each output in its own dtype; compare against that.
        value = np.asarray(raw_expected[name]).astype(dtype)
        if value.shape != shape:
            raise _AgentFault(f"reference {name!r} has shape {value.shape}, expected {shape}")
        expected[name] = value

    tensors = {n: v for n, v in values.items() if isinstance(v, np.ndarray)}
    before = {name: checks.digest(array) for name, array in tensors.items()}
    write = _writer(backend)
    if reuse is not None and write is not None:
        device_inputs = reuse.inputs
        for name, array in tensors.items():
            write(device_inputs[name], array)
        device_outputs = reuse.outputs
    else:
        device_inputs = {name: backend.upload(array) for name, array in tensors.items()}
        device_outputs = {
            name: backend.empty(shape, dtype) for name, (shape, dtype) in shapes.items()
        }
    for name, (_, dtype) in shapes.items():
        backend.fill(device_outputs[name], checks.poison_pattern(dtype))

    args: list[KernelArg] = []
    for kind, value in task.launch.args:
        if kind == "scalar":
            args.append(value)
        elif kind == "output":
            args.append(device_outputs[value])
        elif value in device_inputs:
            args.append(device_inputs[value])
        else:  # a definition scalar input (shape null): by value, in its declared dtype
            scalar = values[value]
            assert isinstance(scalar, np.generic)
            args.append(scalar)

    launch = task.launch
    backend.launch(kernel, launch.grid, launch.block, launch.shared_mem_bytes, args)

    failures: list[str] = []
    after = {
        name: checks.digest(backend.download(device_inputs[name], array.shape, array.dtype))
        for name, array in tensors.items()
    }
    mutated = checks.mutated_inputs(before, after)
    if mutated:
        failures.append(
            f"input mutation: the kernel modified input(s) {', '.join(mutated)} "
            "(sha256 of the device copy changed across the launch)"
        )
    max_abs = max_rel = 0.0
    for name, (shape, dtype) in shapes.items():
        got = backend.download(device_outputs[name], shape, dtype)
        written = checks.check_written(got, expected[name], name=name)
        if not written.ok:
            failures.append(f"unwritten output: {written.reason}")
        result = checks.compare(got, expected[name], workload.tolerance, name=name)
        max_abs = max(max_abs, result.max_abs_error)
        max_rel = max(max_rel, result.max_rel_error)
        if not result.ok and written.ok:  # unwritten poison is NaN: say it once, precisely
            failures.append(f"tolerance: {result.reason}")
    return _Round(failures, max_abs, max_rel, args, _DeviceSet(device_inputs, device_outputs))


def is_agent_fault(exc: BaseException) -> bool:
    """Whether a backend error is the agent's own trouble (no toolchain, no device...).

    Backends mark such errors with a true ``agent_fault`` attribute (e.g. a
    ``BackendUnavailable(BackendError)`` class with ``agent_fault = True``); everything else a
    backend raises while building or running the submission is the submission's fault.
    """
    return bool(getattr(exc, "agent_fault", False))


def _run_case(task: CaseTask) -> CaseOutcome:
    """Body of a case child. Returns the outcome; raises for agent failures."""
    backend = create_backend(task.backend_name, task.backend_options)
    try:
        reference = _load_reference(task.reference_module, task.definition.name)
        outcome = _measure_case(backend, task, reference)
        try:
            outcome.device = asdict(backend.device())
        except Exception:  # a sticky error the kernel caused may take the fingerprint too
            outcome.device = None
        return outcome
    finally:
        # Same: the verdict is in; a context the kernel broke may fail to close.
        with contextlib.suppress(Exception):
            backend.close()


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _measure_case(backend: Backend, task: CaseTask, reference: ReferenceFn) -> CaseOutcome:
    case = task.workload.uuid
    try:
        kernel = backend.compile(dict(task.sources), task.entry_point)
    except BackendError as exc:
        if is_agent_fault(exc):
            raise
        return CaseOutcome("error", f"compile failed: {exc}")

    worst_abs = worst_rel = 0.0
    last: _Round | None = None
    for round_ in inputs.correctness_rounds(task.job_id, task.nonce, case):
        try:
            last = _correctness_round(
                backend, kernel, task, reference, round_, None if last is None else last.buffers
            )
        except BackendError as exc:
            if is_agent_fault(exc):
                raise
            return CaseOutcome("error", f"round {round_.label}: {exc}")
        worst_abs, worst_rel = max(worst_abs, last.max_abs), max(worst_rel, last.max_rel)
        if last.failures:
            return CaseOutcome(
                "incorrect",
                f"round {round_.label}: " + "; ".join(last.failures),
                _finite(worst_abs),
                _finite(worst_rel),
            )
    assert last is not None

    launch = task.launch

    def measure(count: int) -> list[float]:
        return backend.time_launches(
            kernel, launch.grid, launch.block, launch.shared_mem_bytes, last.args, count
        )

    try:
        collected = stats.collect(measure, task.stop)
    except BackendError as exc:
        if is_agent_fault(exc):
            raise
        return CaseOutcome("error", f"timing: {exc}", _finite(worst_abs), _finite(worst_rel))
    summary = stats.summarize(
        collected.samples, seed=task.bootstrap_seed, resamples=task.bootstrap_resamples
    )
    floor_ns = stats.roofline_floor_ns(task.bytes_moved, task.copy_bandwidth)
    timing_note = (
        f"timing: {collected.describe(task.stop)}; roofline floor {floor_ns:.0f} ns "
        f"({task.bytes_moved} bytes moved)"
    )
    post = inputs.post_timing_round(task.nonce, case)
    try:
        after = _correctness_round(backend, kernel, task, reference, post, last.buffers)
    except BackendError as exc:
        if is_agent_fault(exc):
            raise
        after = None
        status, reason = "error", f"round {post.label}: {exc}"
    if after is not None:
        worst_abs, worst_rel = max(worst_abs, after.max_abs), max(worst_rel, after.max_rel)
        below = stats.sub_floor(summary.median, floor_ns, task.floor_factor)
        floor_text = (
            f"impossible time: median {summary.median:.0f} ns is below "
            f"{task.floor_factor:g} × the roofline floor {floor_ns:.0f} ns "
            f"({task.bytes_moved} bytes at 2 × {task.copy_bandwidth:.4g} B/s copy bandwidth)"
        )
        if after.failures:
            status = "incorrect"
            reason = (
                f"round {post.label} (fresh inputs after {len(collected.samples)} timed "
                "launches): " + "; ".join(after.failures)
            )
            if below:
                reason += f"; also {floor_text}"
        elif below:
            status, reason = "impossible_time", f"{floor_text}; {timing_note}"
        else:
            status, reason = "passed", timing_note
    # The measurement is reported whatever the verdict: it is what the agent observed.
    return CaseOutcome(
        status,
        reason,
        _finite(worst_abs),
        _finite(worst_rel),
        samples_ns=collected.samples,
        latency=summary.to_json(),
    )


# --- the parent side ------------------------------------------------------------------------


@dataclass(frozen=True)
class _ChildResult:
    kind: str  # "ok", "agent-error", "died", "timeout"
    value: Any = None
    detail: str = ""


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "did not exit"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _context(start_method: str) -> multiprocessing.context.BaseContext:
    context = multiprocessing.get_context(start_method)
    if isinstance(context, multiprocessing.context.ForkServerContext):
        # Takes effect when the server starts (once per agent process); numpy and the
        # harness come preloaded, no backend does: backends are imported in each child.
        context.set_forkserver_preload([__name__])
    return context


def _in_child(
    target: Callable[[Any], Any], payload: Any, timeout_s: float, start_method: str = "spawn"
) -> _ChildResult:
    context = _context(start_method)
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(  # type: ignore[attr-defined]
        target=_child_main, args=(sender, target, payload), daemon=True
    )
    process.start()
    sender.close()  # so the receiver sees EOF when the child dies
    try:
        if not receiver.poll(timeout_s):
            return _ChildResult("timeout", detail=f"no result within {timeout_s:g} s")
        try:
            kind, value = receiver.recv()
        except EOFError:
            process.join(10)
            return _ChildResult("died", detail=_describe_exit(process.exitcode))
        return _ChildResult(kind, value)
    finally:
        receiver.close()
        if process.is_alive():
            process.kill()
        process.join(10)


def _seed(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def _clip(text: str) -> str:
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


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
    outcome = _in_child(
        _probe,
        (backend_name, dict(config.backend_options), calibrate),
        config.probe_timeout_s,
        config.start_method,
    )
    if outcome.kind != "ok":
        raise HarnessError(
            f"the {backend_name} backend could not be probed: {outcome.detail or outcome.value}"
        )
    return outcome.value  # type: ignore[no-any-return]


def _case_record(case: str, outcome: CaseOutcome) -> dict[str, Any]:
    record: dict[str, Any] = {"case": case, "status": outcome.status}
    if outcome.max_abs_error is not None:
        record["maxAbsError"] = outcome.max_abs_error
    if outcome.max_rel_error is not None:
        record["maxRelError"] = outcome.max_rel_error
    if outcome.latency is not None:
        record["latencyNs"] = outcome.latency
        record["samples"] = len(outcome.samples_ns)
    if outcome.reason:
        record["reason"] = _clip(outcome.reason)
    return record


def _summary(outcomes: Sequence[CaseOutcome], seed: int, resamples: int) -> dict[str, Any]:
    all_correct = all(o.status == "passed" for o in outcomes)
    if not all_correct or not all(o.samples_ns for o in outcomes):
        return {"allCorrect": all_correct, "samples": 0}
    count = min(MAX_RERUN_SAMPLES, *(len(o.samples_ns) for o in outcomes))
    suite = [sum(o.samples_ns[i] for o in outcomes) for i in range(count)]
    low, high = stats.bootstrap_median_ci(suite, seed=seed, resamples=resamples)
    return {
        "allCorrect": True,
        # statistics.median: exactly what the predicate recomputes from samplesNs.
        "medianNs": statistics.median(suite),
        "meanNs": statistics.fmean(suite),
        "ci95Ns": [low, high],
        "samples": count,
        "samplesNs": suite,
    }


def _environment(start: Mapping[str, Any], end: Mapping[str, Any]) -> dict[str, Any]:
    environment: dict[str, Any] = {
        "product": start["product"],
        "architecture": start["architecture"],
        "gpuUuidHash": start["gpu_uuid_hash"],
        "backend": start["backend"],
    }
    for key in ("driver", "cuda"):
        if start.get(key):
            environment[key] = start[key]
    clocks = {f"{name}.start": float(v) for name, v in (start.get("clocks_mhz") or {}).items()}
    clocks |= {f"{name}.end": float(v) for name, v in (end.get("clocks_mhz") or {}).items()}
    if clocks:
        environment["clocks"] = clocks
    temperature = {
        label: float(info["temperature_c"])
        for label, info in (("start", start), ("end", end))
        if info.get("temperature_c") is not None
    }
    if temperature:
        environment["temperatureC"] = temperature
    return environment


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
    probe = probe_device(backend_name, config, calibrate=True)
    start_device: dict[str, Any] = probe["device"]
    bandwidth = float(probe["copyBandwidth"])
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
        task = CaseTask(
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
        child = _in_child(_run_case, task, config.case_timeout_s, config.start_method)
        if child.kind == "ok":
            outcome: CaseOutcome = child.value
            if outcome.device is not None:
                if outcome.device["gpu_uuid_hash"] != start_device["gpu_uuid_hash"]:
                    raise HarnessError("the case ran on a different device than the probe")
                end_device = outcome.device
            outcomes.append(outcome)
        elif child.kind == "agent-error":
            raise HarnessError(f"case {workload.uuid}: agent failure: {child.value}")
        elif child.kind == "timeout":
            outcomes.append(CaseOutcome("timeout", f"the case child was killed: {child.detail}"))
        else:
            outcomes.append(
                CaseOutcome(
                    "error",
                    f"the case child {child.detail} before reporting (crash, or a fatal "
                    "device error)",
                )
            )
    if end_device is None:  # no case child reported: read the end fingerprint directly
        end_device = probe_device(backend_name, config, calibrate=False)["device"]

    result = {
        "jobId": job.job_id,
        "nonce": job.nonce,
        "cases": [
            _case_record(w.uuid, o) for w, o in zip(prepared.workloads, outcomes, strict=True)
        ],
        "summary": _summary(
            outcomes, _seed(f"{PROTOCOL}|summary|{job.job_id}"), config.bootstrap_resamples
        ),
        "environment": _environment(start_device, end_device),
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
