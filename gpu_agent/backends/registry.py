"""Backends by name, imported lazily, and the one solution binding the agent runs.

The binding name lives here rather than in ``gpu_agent/solution.py`` because it is the
PyCUDA backend's name too, and only ``gpu_agent/backends/`` may mention that package
(tests/test_static_checks.py keeps every other module free of it, so the API and CI never
import a GPU driver).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import cast

from gpu_agent.backends.base import Backend, BackendError

# Solutions must declare ``spec.binding`` equal to this: an extern "C" __global__ kernel
# launched declaratively by the agent through PyCUDA, with no host code of the submitter.
SOLUTION_BINDING = "pycuda"

CPU_TEST = "cpu-test"
GPU_BACKEND = "pycuda"
BACKEND_NAMES = (GPU_BACKEND, CPU_TEST)


def create_backend(name: str, options: Mapping[str, str] | None = None) -> Backend:
    """A fresh backend. Called inside each case's child process, never in the agent loop,
    so a CUDA context (and any sticky error in it) lives and dies with that child.

    ``options`` are backend-specific strings (picklable, since they cross into the child):
    for ``cpu-test``, ``emulation_modules`` — comma-separated modules to import so that
    they register kernel emulations — and ``buffers`` — ``reuse`` (default: the backend can
    refill a buffer in place) or ``fresh`` (it cannot, like a backend without ``write``).
    """
    options = dict(options or {})
    if name == CPU_TEST:
        # Lazy, like the GPU backend: a process imports only the backend it runs.
        from gpu_agent.backends import cpu_test  # noqa: PLC0415

        unknown = set(options) - {"emulation_modules", "buffers"}
        if unknown:
            raise BackendError(f"unknown {CPU_TEST} backend options: {sorted(unknown)}")
        modules = tuple(m for m in options.get("emulation_modules", "").split(",") if m)
        buffers = options.get("buffers", "reuse")
        if buffers == "reuse":
            return cpu_test.CpuTestBackend(emulation_modules=modules)
        if buffers == "fresh":
            return cpu_test.FreshBuffersCpuTestBackend(emulation_modules=modules)
        raise BackendError(f"{CPU_TEST} option buffers must be reuse or fresh, got {buffers!r}")
    if name == GPU_BACKEND:
        try:
            module = importlib.import_module("gpu_agent.backends.pycuda_backend")
        except ImportError as exc:
            raise BackendError(f"the {GPU_BACKEND} backend cannot be imported: {exc}") from exc
        # The GPU backend module offers a ``create_backend(**options)`` factory or, failing
        # that, a backend class; either is called with the options as keyword arguments.
        factory = getattr(module, "create_backend", None) or getattr(module, "PyCudaBackend", None)
        if factory is None:
            raise BackendError(
                "gpu_agent.backends.pycuda_backend defines neither create_backend nor PyCudaBackend"
            )
        return cast(Backend, cast(Callable[..., object], factory)(**options))
    raise BackendError(f"unknown backend {name!r} (known: {', '.join(BACKEND_NAMES)})")
