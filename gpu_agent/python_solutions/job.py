"""The agent-side half of a Python-solution job: each case's task, and the child's entry point.

Why torch-free: the agent process must start without torch. The harness builds each case's
:class:`TorchCaseTask` here — deriving every round's seed from the job's nonce, so the nonce
itself never enters a child holding submitted code — and runs :func:`run_torch_case` in a
jailed child (``gpu_agent/jail.py``), which imports the torch runner only there.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

from gpu_agent import inputs
from gpu_agent.backends.registry import CPU_TEST
from gpu_agent.case_task import CaseOutcome
from gpu_agent.definition import Definition
from gpu_agent.python_solutions.sandbox import GiB, Limits
from gpu_agent.python_solutions.spec import TorchSolution
from gpu_agent.python_solutions.task import RoundSpec, TorchCaseTask
from gpu_agent.workload import Workload

PROTOCOL = "kernelindex-rerun-v1"


def _seed(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def hidden_case(
    definition: Definition, workloads: Sequence[Workload], nonce: str
) -> tuple[int, dict[str, int]] | None:
    """Which case also runs the hidden workload, and its axes (None: no hidden workload)."""
    axes = inputs.hidden_axes(definition, workloads, nonce)
    if axes is None:
        return None
    return _seed(f"{PROTOCOL}|hidden-case|{nonce}") % len(workloads), axes


def case_rounds(
    job_id: str, nonce: str, workload: Workload, hidden: Mapping[str, int] | None
) -> list[RoundSpec]:
    """The case's rounds: the three pre-timing ones in nonce order, the hidden workload when
    this case runs it, then the post-timing and audit rounds."""
    case = workload.uuid
    rounds = [
        RoundSpec(r.label, r.kind, r.seed) for r in inputs.correctness_rounds(job_id, nonce, case)
    ]
    if hidden is not None:
        drawn = inputs.hidden_round(nonce, case)
        rounds.append(RoundSpec(drawn.label, "hidden", drawn.seed, dict(hidden)))
    post = inputs.post_timing_round(nonce, case)
    audit = inputs.audit_round(nonce, case)
    rounds.append(RoundSpec(post.label, "post", post.seed))
    rounds.append(RoundSpec(audit.label, "audit", audit.seed))
    return rounds


def case_limits(backend_name: str, case_timeout_s: float) -> Limits:
    """The child's rlimits: CPU seconds past the case timeout; address space on the CPU only
    (a CUDA context maps far more virtual memory than any cap would allow)."""
    return Limits(
        address_space_bytes=32 * GiB if backend_name == CPU_TEST else None,
        cpu_seconds=math.ceil(case_timeout_s) + 30,
    )


def torch_task(
    solution: TorchSolution,
    definition: Definition,
    workload: Workload,
    rounds: list[RoundSpec],
    **settings: Any,
) -> TorchCaseTask:
    """One case's task; ``settings`` are the remaining TorchCaseTask fields."""
    return TorchCaseTask(
        definition=definition, workload=workload, solution=solution, rounds=rounds, **settings
    )


def run_torch_case(task: TorchCaseTask) -> CaseOutcome:
    """Body of a Python-solution case child (already in the sandbox)."""
    from gpu_agent.python_solutions import torch_runner  # noqa: PLC0415 - torch, child only

    return torch_runner.run(task)
