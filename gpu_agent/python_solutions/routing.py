"""Which solution kinds this agent can run on which backend: one rule, asked before any child.

Why here and not in a child: a solution the agent cannot run (Triton on a machine without a
GPU, a torch-binding C++ solution before its build path exists) is *the agent's* limitation.
The harness turns the answer into a ``HarnessError`` — no signed refutation — with the
message below, so the submitter is never blamed for the agent's hardware or toolchain.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re

from gpu_agent.backends.registry import CPU_TEST, GPU_BACKEND
from gpu_agent.python_solutions.spec import Dependency, TorchSolution

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


# Dependencies that name C/C++ libraries rather than Python packages (SOL's list).
_LIBRARY_DEPENDENCIES = re.compile(r"^(cutlass(_\d+(_\d+)*)?|cublas|cudnn)$", re.IGNORECASE)
_IMPORT_NAMES = {"torch": "torch", "triton": "triton", "flashinfer": "flashinfer"}


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:4])


def _satisfied(installed: str, dependency: Dependency) -> bool:
    if dependency.operator is None or dependency.version is None:
        return True
    have, want = _version_tuple(installed), _version_tuple(dependency.version)
    return {
        "==": have == want,
        "!=": have != want,
        ">=": have >= want,
        "<=": have <= want,
        ">": have > want,
        "<": have < want,
    }[dependency.operator]


def missing_dependency(dependencies: tuple[Dependency, ...]) -> str | None:
    """Why this agent lacks one of ``dependencies`` (the agent's limitation, not the
    solution's fault); None when it has them all. Asked in the agent, which runs the case
    children with its own interpreter, so no child holding the solution is needed to tell."""
    for dependency in dependencies:
        if _LIBRARY_DEPENDENCIES.match(dependency.name):
            continue  # a C++ library: a matter for the torch-extension build
        module = _IMPORT_NAMES.get(dependency.name.lower(), dependency.name.replace("-", "_"))
        try:  # the top-level name only: finding a submodule would import its parent here
            found = importlib.util.find_spec(module.partition(".")[0]) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return (
                f"the solution depends on {dependency.text()!r}, which this agent does not "
                "have installed (the agent's limitation, not the solution's fault)"
            )
        try:
            installed = importlib.metadata.version(dependency.name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if not _satisfied(installed, dependency):
            return f"the solution needs {dependency.text()!r}; this agent has {installed}"
    return None
