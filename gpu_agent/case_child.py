"""What runs inside the harness's child processes: the device probe, and one workload case.

A case (:func:`run_case`): compile once; the three pre-timing correctness rounds
(``gpu_agent/correctness_round.py``); timing under the stop rule (``gpu_agent/stats.py``),
every timed launch refilled with poisoned outputs and a fresh input variant (so none can be
told from a checked one), the SM clock read during the batches where the backend can; a
check of the last timed launch's output (when cheap); one more correctness round with fresh
nonce-derived inputs in the buffers that were timed; then the roofline floor check (bytes
written less the L2, ``stats.roofline_floor_ns``). The case records how the kernel was built
(target, flags, nvcc version) and the clocks read while timing. A failure of the submission
becomes the case's outcome; a failure of the agent (a backend error marked
``agent_fault``, no reference...) raises, and the harness then signs nothing.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from gpu_agent import build, inputs, stats
from gpu_agent.backends.base import (
    Backend,
    BackendError,
    CompiledKernel,
    KernelArg,
    event_overhead_ns,
    sm_clock_reader,
    timing_clocks,
)
from gpu_agent.backends.registry import SOLUTION_BINDING, create_backend
from gpu_agent.backends.timing_refill import TimingRefill
from gpu_agent.case_task import CaseOutcome, CaseTask, ReferenceFn
from gpu_agent.correctness_round import (
    DeviceSet,
    RoundResult,
    correctness_round,
    last_timed_launch_failures,
    load_reference,
    timing_plan,
)

MAX_BUILD_FLAGS = 64  # RerunBuild.flags holds at most 64


def probe(payload: tuple[str, Mapping[str, str], bool]) -> dict[str, Any]:
    """Body of the probe child: the device fingerprint and, if asked, the calibration — the
    copy bandwidth and, where the backend measures it, the timer's fixed cost per sample."""
    backend_name, options, calibrate = payload
    backend = create_backend(backend_name, options)
    try:
        info = asdict(backend.device())
        if not calibrate:
            return {"device": info, "copyBandwidth": None, "eventOverheadNs": None}
        return {
            "device": info,
            "copyBandwidth": backend.copy_bandwidth(),
            "eventOverheadNs": event_overhead_ns(backend),
        }
    finally:
        backend.close()


def build_record(kernel: CompiledKernel, backend_name: str) -> dict[str, Any]:
    """``result.build`` for the declarative path: the target, the pinned flags and, where
    nvcc built it, nvcc's version (what a reader needs to rebuild the same cubin)."""
    runtime = {"backend": backend_name, "target": kernel.architecture}
    built = getattr(kernel.handle, "build", None)  # the PyCUDA backend's LoadedKernel.build
    if isinstance(built, build.BuildResult):
        runtime["nvcc"] = built.nvcc_version
    return {
        "solutionKind": SOLUTION_BINDING,  # the declarative binding's name
        "language": 'CUDA C++ (extern "C" kernel, declarative launch)',
        "runtime": runtime,
        "flags": list(kernel.flags[:MAX_BUILD_FLAGS]),
    }


def clocks_by_name(backend: Backend) -> dict[str, list[float]]:
    """The clocks read during the timed batches: ``{"sm": [...], "memory": [...]}``."""
    readings = timing_clocks(backend)
    clocks: dict[str, list[float]] = {}
    if readings:
        clocks["sm"] = [r.sm_mhz for r in readings]
    memory = [r.memory_mhz for r in readings if r.memory_mhz is not None]
    if memory:
        clocks["memory"] = memory
    return clocks


def is_agent_fault(exc: BaseException) -> bool:
    """Whether a backend error is the agent's own trouble (no toolchain, no device...).

    Backends mark such errors with a true ``agent_fault`` attribute (e.g. a
    ``BackendUnavailable(BackendError)`` class with ``agent_fault = True``); everything else a
    backend raises while building or running the submission is the submission's fault.
    """
    return bool(getattr(exc, "agent_fault", False))


def run_case(task: CaseTask) -> CaseOutcome:
    """Body of a case child. Returns the outcome; raises for agent failures."""
    backend = create_backend(task.backend_name, task.backend_options)
    try:
        reference = load_reference(task.reference_module, task.definition.name)
        outcome = measure_case(backend, task, reference)
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


def measure_case(backend: Backend, task: CaseTask, reference: ReferenceFn) -> CaseOutcome:
    """Compile, check, time and check again one case on ``backend``."""
    try:
        kernel = backend.compile(dict(task.sources), task.entry_point)
    except BackendError as exc:
        if is_agent_fault(exc):
            raise
        return CaseOutcome("error", f"compile failed: {exc}")
    outcome = _CaseRun(backend, kernel, task, reference).measure()
    outcome.build = build_record(kernel, backend.name)
    outcome.timing_clocks_mhz = clocks_by_name(backend)
    return outcome


@dataclass
class _CaseRun:
    """One compiled case on its backend, and the worst errors its rounds have seen so far."""

    backend: Backend
    kernel: CompiledKernel
    task: CaseTask
    reference: ReferenceFn
    worst_abs: float = 0.0
    worst_rel: float = 0.0

    def round(self, round_: inputs.Round, reuse: DeviceSet | None) -> RoundResult:
        result = correctness_round(
            self.backend, self.kernel, self.task, self.reference, round_, reuse
        )
        self.worst_abs = max(self.worst_abs, result.max_abs)
        self.worst_rel = max(self.worst_rel, result.max_rel)
        return result

    def outcome(
        self,
        status: str,
        reason: str,
        samples_ns: list[float] | None = None,
        latency: dict[str, Any] | None = None,
    ) -> CaseOutcome:
        """An outcome carrying the worst errors seen (None where not finite)."""
        return CaseOutcome(
            status,
            reason,
            _finite(self.worst_abs),
            _finite(self.worst_rel),
            samples_ns=[] if samples_ns is None else samples_ns,
            latency=latency,
        )

    def measure(self) -> CaseOutcome:
        """Rounds, refilled timing, the last timed launch's check, the verdict."""
        task, backend = self.task, self.backend
        last = self.pre_timing_rounds()
        if isinstance(last, CaseOutcome):
            return last
        try:
            plan = timing_plan(backend, task, last.buffers)
            collected = stats.collect(
                self.timer(last.args, plan.refill),
                task.timing.stop,
                sm_clock=sm_clock_reader(backend),
            )
            # Before the post-timing round, which refills these very buffers.
            timed = last_timed_launch_failures(backend, task, self.reference, plan, last.buffers)
        except BackendError as exc:
            if is_agent_fault(exc):
                raise
            return self.outcome("error", f"timing: {exc}")
        summary = task.timing.summarize(collected.samples)
        status, reason = self.post_timing_verdict(last.buffers, collected, summary, timed)
        # The measurement is reported whatever the verdict: it is what the agent observed,
        # with the floor it was held to as a number (the signed case carries no text).
        outcome = self.outcome(status, reason, collected.samples, summary.to_json())
        return replace(outcome, floor_ns=task.timing.floor()[0])

    def pre_timing_rounds(self) -> RoundResult | CaseOutcome:
        """The rounds before timing: the last one's result, or the case's failed outcome."""
        task = self.task
        last: RoundResult | None = None
        for round_ in task.seeds.pre_timing:
            try:
                last = self.round(round_, None if last is None else last.buffers)
            except BackendError as exc:
                if is_agent_fault(exc):
                    raise
                return CaseOutcome("error", f"round {round_.label}: {exc}")
            if last.failures:
                return self.outcome(
                    "incorrect", f"round {round_.label}: " + "; ".join(last.failures)
                )
        assert last is not None
        return last

    def timer(self, args: list[KernelArg], refill: TimingRefill) -> Callable[[int], list[float]]:
        """``count`` → that many timed launches (ns), as the stop rule asks for them, each
        after ``refill`` (poisoned outputs, the next fresh input variant)."""
        launch = self.task.launch

        def measure(count: int) -> list[float]:
            return self.backend.time_launches(
                self.kernel,
                launch.grid,
                launch.block,
                launch.shared_mem_bytes,
                args,
                count,
                refill=refill,
            )

        return measure

    def post_timing_verdict(
        self,
        buffers: DeviceSet,
        collected: stats.Collected,
        summary: stats.LatencySummary,
        timed_failures: list[str],
    ) -> tuple[str, str]:
        """``(status, reason)`` from the last timed launch's check, the post-timing round and
        the roofline floor check."""
        task = self.task
        floor_ns, basis = task.timing.floor()
        timing_note = task.timing.note(collected, floor_ns, basis)
        post = task.seeds.post_timing
        try:
            after = self.round(post, buffers)
        except BackendError as exc:
            if is_agent_fault(exc):
                raise
            return "error", f"round {post.label}: {exc}"
        below = task.timing.below_floor(summary.median, floor_ns)
        floor_text = (
            f"impossible time: median {summary.median:.0f} ns is below "
            f"{task.timing.floor_factor:g} × the roofline floor {floor_ns:.0f} ns ({basis})"
        )
        failures = []
        if timed_failures:
            failures.append(
                "last timed launch (inputs refilled with a fresh variant, outputs poisoned): "
                + "; ".join(timed_failures)
            )
        if after.failures:
            failures.append(
                f"round {post.label} (fresh inputs after {len(collected.samples)} timed "
                "launches): " + "; ".join(after.failures)
            )
        if failures:
            reason = "; ".join(failures)
            return "incorrect", reason + (f"; also {floor_text}" if below else "")
        if below:
            return "impossible_time", f"{floor_text}; {timing_note}"
        return "passed", timing_note
