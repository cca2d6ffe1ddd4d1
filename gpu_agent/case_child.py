"""What runs inside the harness's child processes: the device probe, and one workload case.

A case (:func:`run_case`): compile once; the three pre-timing correctness rounds
(``gpu_agent/correctness_round.py``); timing under the stop rule (``gpu_agent/stats.py``);
one more correctness round with fresh nonce-derived inputs in the buffers that were timed;
then the roofline floor check. A failure of the submission becomes the case's outcome; a
failure of the agent (a backend error marked ``agent_fault``, no reference...) raises, and
the harness then signs nothing.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from gpu_agent import inputs, stats
from gpu_agent.backends.base import Backend, BackendError, CompiledKernel, KernelArg
from gpu_agent.backends.registry import create_backend
from gpu_agent.case_task import CaseOutcome, CaseTask, ReferenceFn
from gpu_agent.correctness_round import (
    DeviceSet,
    RoundResult,
    correctness_round,
    load_reference,
)


def probe(payload: tuple[str, Mapping[str, str], bool]) -> dict[str, Any]:
    """Body of the probe child: the device fingerprint and, if asked, the copy bandwidth."""
    backend_name, options, calibrate = payload
    backend = create_backend(backend_name, options)
    try:
        info = asdict(backend.device())
        bandwidth = backend.copy_bandwidth() if calibrate else None
        return {"device": info, "copyBandwidth": bandwidth}
    finally:
        backend.close()


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
    run = _CaseRun(backend, kernel, task, reference)
    last = run.pre_timing_rounds()
    if isinstance(last, CaseOutcome):
        return last
    try:
        collected = stats.collect(run.timer(last.args), task.stop)
    except BackendError as exc:
        if is_agent_fault(exc):
            raise
        return run.outcome("error", f"timing: {exc}")
    summary = stats.summarize(
        collected.samples, seed=task.bootstrap_seed, resamples=task.bootstrap_resamples
    )
    status, reason = run.post_timing_verdict(last.buffers, collected, summary)
    # The measurement is reported whatever the verdict: it is what the agent observed.
    return run.outcome(status, reason, collected.samples, summary.to_json())


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

    def pre_timing_rounds(self) -> RoundResult | CaseOutcome:
        """The rounds before timing: the last one's result, or the case's failed outcome."""
        task = self.task
        last: RoundResult | None = None
        for round_ in inputs.correctness_rounds(task.job_id, task.nonce, task.workload.uuid):
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

    def timer(self, args: list[KernelArg]) -> Callable[[int], list[float]]:
        """``count`` → that many timed launches (ns), as the stop rule asks for them."""
        launch = self.task.launch

        def measure(count: int) -> list[float]:
            return self.backend.time_launches(
                self.kernel, launch.grid, launch.block, launch.shared_mem_bytes, args, count
            )

        return measure

    def post_timing_verdict(
        self, buffers: DeviceSet, collected: stats.Collected, summary: stats.LatencySummary
    ) -> tuple[str, str]:
        """``(status, reason)`` after the post-timing round and the roofline floor check."""
        task = self.task
        floor_ns = stats.roofline_floor_ns(task.bytes_moved, task.copy_bandwidth)
        timing_note = (
            f"timing: {collected.describe(task.stop)}; roofline floor {floor_ns:.0f} ns "
            f"({task.bytes_moved} bytes moved)"
        )
        post = inputs.post_timing_round(task.nonce, task.workload.uuid)
        try:
            after = self.round(post, buffers)
        except BackendError as exc:
            if is_agent_fault(exc):
                raise
            return "error", f"round {post.label}: {exc}"
        below = stats.sub_floor(summary.median, floor_ns, task.floor_factor)
        floor_text = (
            f"impossible time: median {summary.median:.0f} ns is below "
            f"{task.floor_factor:g} × the roofline floor {floor_ns:.0f} ns "
            f"({task.bytes_moved} bytes at 2 × {task.copy_bandwidth:.4g} B/s copy bandwidth)"
        )
        if after.failures:
            reason = (
                f"round {post.label} (fresh inputs after {len(collected.samples)} timed "
                "launches): " + "; ".join(after.failures)
            )
            if below:
                reason += f"; also {floor_text}"
            return "incorrect", reason
        if below:
            return "impossible_time", f"{floor_text}; {timing_note}"
        return "passed", timing_note
