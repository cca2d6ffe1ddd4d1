"""What crosses into a Python-solution case child: its task (picklable, torch-free).

Why a task of its own: the child will hold submitted code, so the task carries *seeds*, never
the job's nonce (the harness derives every round's seed from it in the agent process), and
the child hands its seeds over once, before the solution is imported
(:meth:`TorchCaseTask.take_rounds` empties the list), so no round's inputs can be derived
by code that runs later in that process.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from gpu_agent.case_task import TimingTerms
from gpu_agent.definition import Definition
from gpu_agent.python_solutions.spec import TorchSolution
from gpu_agent.workload import Workload

RoundKind = Literal["public", "secret", "hidden", "post", "audit"]


@dataclass(frozen=True)
class RoundSpec:
    """One round of inputs: its label, kind and seed, and axes when it is not the case's own
    (the hidden workload)."""

    label: str
    kind: RoundKind
    seed: int
    axes: Mapping[str, int] | None = None


@dataclass(frozen=True)
class TorchCaseTask:
    backend_name: str
    backend_options: Mapping[str, str]
    definition: Definition
    workload: Workload
    solution: TorchSolution
    # Pre-timing rounds in the order they run, then the post-timing and audit rounds.
    rounds: list[RoundSpec]
    timing: TimingTerms  # as for the declarative path (gpu_agent.case_task)
    # Relative slack of the timer cross-check: wall time may exceed the timed time by this.
    cross_check_slack: float = 0.5
    notes: list[str] = field(default_factory=list)

    def take_rounds(self) -> list[RoundSpec]:
        """The rounds, handed over once: the task keeps no seed afterwards."""
        taken = list(self.rounds)
        self.rounds.clear()
        return taken
