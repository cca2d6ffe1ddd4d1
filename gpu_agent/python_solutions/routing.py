"""Which solution kinds this agent can run on which backend: one rule, asked before any child.

Why here and not in a child: a solution the agent cannot run (Triton on a machine without a
GPU, a torch-binding C++ solution before its build path exists) is *the agent's* limitation.
The harness turns the answer into a ``HarnessError`` — no signed refutation — with the
message below, so the submitter is never blamed for the agent's hardware or toolchain.
"""

from __future__ import annotations

from gpu_agent.backends.registry import CPU_TEST, GPU_BACKEND
from gpu_agent.python_solutions.spec import TorchSolution

# Backends that can run plain PyTorch solutions in a case child.
PYTHON_BACKENDS = frozenset({CPU_TEST})


def cannot_run(solution: TorchSolution, backend_name: str) -> str | None:
    """Why this agent cannot run ``solution`` on ``backend_name``; None when it can."""
    if solution.kind == "torch-cpp":
        return (
            f"solution {solution.name!r} is C++ with the torch binding "
            f"({', '.join(solution.languages)}): building it needs nvcc and a torch extension "
            "build on a GPU machine, which this agent does not have yet"
        )
    if solution.kind in ("triton", "gpu-dsl"):
        if backend_name == CPU_TEST:
            return (
                f"solution {solution.name!r} is {', '.join(solution.languages)}, which runs "
                f"only on a CUDA GPU; this agent's backend is {CPU_TEST} (no GPU)"
            )
        return (
            f"solution {solution.name!r} ({', '.join(solution.languages)}) needs the GPU path "
            f"for Python solutions on the {GPU_BACKEND} backend, which is not built yet"
        )
    if backend_name not in PYTHON_BACKENDS:
        return (
            f"Python solutions run on the {CPU_TEST} backend only so far; the GPU path "
            f"(torch on the {backend_name} backend's device, timed with CUDA events) is not "
            "built yet"
        )
    return None
