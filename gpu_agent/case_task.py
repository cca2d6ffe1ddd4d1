"""What crosses between the harness and a case child: the task in, the outcome back.

Both are plain dataclasses (picklable), since the harness starts every case in a child
process of its own (``gpu_agent/child_process.py``). A task carries *seeds*, never the job's
nonce: the child holds submitted code (on a GPU the kernel shares its CUDA context and may
read its memory), and the nonce would tell it the secret and timed inputs from the public
ones. The agent derives every seed (:class:`CaseSeeds`) before the child starts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from gpu_agent import stats
from gpu_agent.definition import Definition
from gpu_agent.inputs import Round
from gpu_agent.launch_spec import ResolvedLaunch
from gpu_agent.workload import Workload

# The trusted reference: inputs by name in, outputs by name out.
ReferenceFn = Callable[..., Mapping[str, npt.NDArray[np.generic]]]


@dataclass(frozen=True)
class TimingTerms:
    """What every case is timed and judged by, whichever path runs the solution (the
    declarative kernel here, a Python solution in gpu_agent/python_solutions): the stop
    rule; the roofline floor's inputs (stats.roofline_floor: bytes the kernel must write,
    the device's L2 size, the calibrated copy rate, the factor); the bootstrap."""

    stop: stats.StopPolicy
    written_bytes: int
    l2_bytes: int
    copy_bandwidth: float
    floor_factor: float
    bootstrap_resamples: int
    bootstrap_seed: int

    def summarize(self, samples: list[float]) -> stats.LatencySummary:
        return stats.summarize(
            samples, seed=self.bootstrap_seed, resamples=self.bootstrap_resamples
        )

    def floor(self) -> tuple[float, str]:
        """The roofline floor (ns) and what it was computed from, in words."""
        return stats.roofline_floor(self.written_bytes, self.copy_bandwidth, self.l2_bytes)

    def note(self, collected: stats.Collected, floor_ns: float, basis: str) -> str:
        """How the case was timed and its floor, for the case's reason."""
        return (
            f"timing: {collected.describe(self.stop)}; roofline floor {floor_ns:.0f} ns ({basis})"
        )

    def below_floor(self, median_ns: float, floor_ns: float) -> bool:
        return stats.sub_floor(median_ns, floor_ns, self.floor_factor)


@dataclass(frozen=True)
class CaseSeeds:
    """A declarative case's rounds and timed-input variants, derived from the job's id and
    nonce by the agent (``correctness_round.case_seeds``)."""

    pre_timing: tuple[Round, ...]  # two public, one secret, in the order they run
    post_timing: Round
    timing_variants: tuple[int, ...]  # the fresh inputs the timed launches rotate through


@dataclass(frozen=True)
class CaseTask:
    backend_name: str
    backend_options: Mapping[str, str]
    reference_module: str
    seeds: CaseSeeds
    definition: Definition
    workload: Workload
    sources: Mapping[str, str]
    entry_point: str
    launch: ResolvedLaunch
    timing: TimingTerms


@dataclass
class CaseOutcome:
    status: str  # a domain CaseStatus value
    # Why, in words, for the agent's own eyes: never signed (it may quote the solution).
    reason: str | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    samples_ns: list[float] = field(default_factory=list)
    latency: dict[str, Any] | None = None
    device: dict[str, Any] | None = None
    # Python-solution cases: every defence that ran ({name, outcome, detail}), the timer
    # cross-check and the build (runtime versions, flags), as rerun/v1 records them.
    defences: list[dict[str, Any]] | None = None
    timer_cross_check: dict[str, Any] | None = None
    build: dict[str, Any] | None = None
    # The clocks (MHz) the backend read during the timed batches, by name ("sm", "memory"),
    # in reading order; empty where the backend reads none (the cpu-test backend).
    timing_clocks_mhz: dict[str, list[float]] = field(default_factory=dict)
    # What the signed case says instead of ``reason``: a domain CaseReason (or
    # ``reward-hack:<defence>``), the round that failed, the stop rule, the floor. None where
    # the child did not say: result_assembly then reads the code from the status and reason.
    code: str | None = None
    round: str | None = None
    stopped_by: str | None = None
    floor_ns: float | None = None


class AgentFault(Exception):
    """Raised inside a child for the agent's own failures (reported, then re-raised)."""
