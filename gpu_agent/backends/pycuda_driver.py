"""PyCUDA's driver module, loaded lazily, and what the backend keeps of its objects.

Split from ``pycuda_backend.py``: loading the driver (the agent's fault when it cannot be),
the buffer and kernel handles, and the launch checks against a function's limits. PyCUDA is
imported only inside :func:`load_pycuda`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from gpu_agent import build
from gpu_agent.backends.base import BackendError, BackendUnavailable

# Dynamic shared memory above this needs an explicit opt-in per function.
DEFAULT_DYNAMIC_SMEM_LIMIT = 48 * 1024


class PyCudaUnavailable(BackendUnavailable):
    """PyCUDA is not installed (or does not load) on this machine: the agent's problem."""


def load_pycuda() -> Any:
    """``pycuda.driver``, initialised; PyCudaUnavailable if it cannot be imported."""
    try:
        driver = importlib.import_module("pycuda.driver")
    except ImportError as exc:
        raise PyCudaUnavailable(
            "the pycuda backend needs PyCUDA, which is not importable here "
            f"({exc}); install it with `pip install 'kernelindex-ledger[gpu]'` on a machine "
            "with the CUDA toolkit and an NVIDIA driver (gpu_agent/selfcheck.sh installs it "
            "offline from gpu_agent/wheels/)"
        ) from exc
    try:
        driver.init()
    except Exception as exc:  # pycuda raises its own Error types
        raise BackendUnavailable(f"CUDA driver initialisation failed: {exc}") from exc
    return driver


@dataclass(eq=False)  # identity equality and hashing: buffers live in a WeakSet
class DeviceBuffer:
    """A device allocation holding ``nbytes`` bytes (the Buffer protocol)."""

    allocation: Any  # pycuda.driver.DeviceAllocation
    size: int

    @property
    def nbytes(self) -> int:
        return self.size

    @property
    def pointer(self) -> int:
        return int(self.allocation)


@dataclass(frozen=True)
class LoadedKernel:
    """The backend-specific ``CompiledKernel.handle``: the module must outlive the function."""

    module: Any
    function: Any
    build: build.BuildResult
    max_threads_per_block: int
    static_shared_bytes: int
    registers: int
    local_bytes: int


@dataclass(frozen=True)
class Launch:
    kernel: LoadedKernel
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    values: list[Any]


def check_limits(
    loaded: LoadedKernel, block: tuple[int, int, int], shared_mem_bytes: int, attribute: Any
) -> None:
    """Refuse a launch beyond the function's limits; opt in to large dynamic shared memory.

    ``attribute``: PyCUDA's ``function_attribute`` enumeration."""
    threads = block[0] * block[1] * block[2]
    name = loaded.build.function
    if threads > loaded.max_threads_per_block:
        raise BackendError(
            f"block {block} has {threads} threads; {name} allows at most "
            f"{loaded.max_threads_per_block} (registers: {loaded.registers})"
        )
    if shared_mem_bytes > DEFAULT_DYNAMIC_SMEM_LIMIT:
        try:
            loaded.function.set_attribute(
                attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, int(shared_mem_bytes)
            )
        except Exception as exc:
            raise BackendError(
                f"{name}: cannot allow {shared_mem_bytes} bytes of dynamic shared memory "
                f"on this device: {exc}"
            ) from exc
