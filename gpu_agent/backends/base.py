"""What the harness needs from a device: the only interface between measuring and CUDA.

A backend compiles one ``extern "C"`` kernel, moves buffers, launches with a declarative
grid/block/args, times launches with device events, and says what it runs on. The harness
(poisoning, mutation checks, tolerance, statistics, stop rule, floor) is plain Python over
this interface, so all of it is tested on CPU with the ``cpu-test`` backend, whose results
are marked as such in the environment fingerprint and can never verify a GPU run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from domain.statements import MEASURING_BACKENDS  # noqa: F401 - re-exported for backends
from gpu_agent.backends.nvml_clocks import ClockReading

if TYPE_CHECKING:
    # timing_refill imports this module (BackendError, Buffer), so the class is re-exported
    # lazily (``__getattr__`` below) rather than imported here at run time.
    from gpu_agent.backends.timing_refill import (
        TimingRefill as TimingRefill,  # noqa: PLC0414 - an explicit re-export, for mypy
    )


class BackendError(Exception):
    """The device or toolchain failed (compile error, launch failure, sticky CUDA error)."""

    # True when the agent itself is at fault (no nvcc, no device): the job then fails as the
    # agent's failure and never counts against the solution.
    agent_fault = False


class BackendUnavailable(BackendError):
    """The agent's toolchain or device is missing or unusable: not the solution's fault."""

    agent_fault = True


@dataclass(frozen=True)
class DeviceInfo:
    backend: str  # "pycuda" or "cpu-test"
    product: str  # e.g. "NVIDIA B200"
    architecture: str  # e.g. "sm_100"
    gpu_uuid_hash: str  # sha256 hex of the GPU UUID (never the UUID itself)
    l2_bytes: int
    driver: str | None = None
    cuda: str | None = None
    clocks_mhz: dict[str, float] = field(default_factory=dict)
    temperature_c: float | None = None


@dataclass(frozen=True)
class CompiledKernel:
    """A loaded kernel and exactly how it was built (recorded in the result)."""

    entry_point: str
    architecture: str
    flags: tuple[str, ...]
    handle: object  # backend-specific (a pycuda Function, a CPU callable...)


class Buffer(Protocol):
    """Device memory holding one array; ``nbytes`` long."""

    @property
    def nbytes(self) -> int: ...


# A kernel argument: a device buffer or a scalar (numpy scalar of the declared C type).
KernelArg = Buffer | np.generic


class Backend(Protocol):
    name: str

    def device(self) -> DeviceInfo:
        """The fingerprint of the device, read now (clocks and temperature change)."""
        ...

    def compile(self, sources: dict[str, str], entry_point: str) -> CompiledKernel:
        """Build ``sources`` (file name → text) for this device's exact architecture and load
        the ``extern "C" __global__`` function ``entry_point``; raise BackendError if it
        does not build or load."""
        ...

    def upload(self, host: npt.NDArray[np.generic]) -> Buffer:
        """A new device buffer holding a copy of ``host``."""
        ...

    def empty(self, shape: tuple[int, ...], dtype: np.dtype[np.generic]) -> Buffer:
        """A new uninitialised device buffer."""
        ...

    def fill(self, buffer: Buffer, pattern: bytes) -> None:
        """Overwrite the whole buffer with ``pattern`` repeated (poisoning outputs)."""
        ...

    def write(self, buffer: Buffer, host: npt.NDArray[np.generic]) -> None:
        """Copy ``host`` into an existing buffer of exactly its size (the harness refills the
        same buffers every round). A backend that cannot (the ``buffers=fresh`` cpu-test
        variant) leaves it out; the harness then uploads to new buffers each round
        (``correctness_round.buffer_writer``)."""
        ...

    def download(
        self, buffer: Buffer, shape: tuple[int, ...], dtype: np.dtype[np.generic]
    ) -> npt.NDArray[np.generic]:
        """A host copy of the buffer's contents."""
        ...

    def launch(
        self,
        kernel: CompiledKernel,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared_mem_bytes: int,
        args: list[KernelArg],
    ) -> None:
        """Launch once and wait for completion; raise BackendError on a launch/runtime error."""
        ...

    def time_launches(
        self,
        kernel: CompiledKernel,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared_mem_bytes: int,
        args: list[KernelArg],
        count: int,
        refill: TimingRefill | None = None,
    ) -> list[float]:
        """``count`` timed launches, in ns each: L2 flushed (≥ 2 × L2 bytes written) before
        each, outside the timed region; all on one stream, timed with device events.
        ``refill``: before every launch, outside the timed region, the outputs' poison and
        the next fresh input variant are copied in (``timing_refill.py``), so a timed launch
        looks like a checked one."""
        ...

    def copy_bandwidth(self) -> float:
        """Calibration: measured device-to-device copy bandwidth in bytes per second."""
        ...

    def close(self) -> None: ...


# --- optional capabilities: GPU backends have them, the cpu-test backend need not fake them ---


def sm_clock_reader(backend: object) -> Callable[[], float | None] | None:
    """The backend's ``sm_clock_mhz()`` (the SM clock read during the latest timed batch) for
    ``stats.collect(..., sm_clock=...)``; None when the backend reads no clocks."""
    reader = getattr(backend, "sm_clock_mhz", None)
    return reader if callable(reader) else None


def timing_clocks(backend: object) -> list[ClockReading]:
    """The clocks the backend read during its timed batches so far (``[]`` when none)."""
    reader = getattr(backend, "timing_clocks", None)
    if not callable(reader):
        return []
    return [r for r in reader() if isinstance(r, ClockReading)]


def event_overhead_ns(backend: object) -> float | None:
    """What the backend's timer adds to every sample (an empty kernel's event-timed latency),
    or None when it does not measure one (the cpu-test backend times host calls)."""
    measure = getattr(backend, "event_overhead_ns", None)
    return float(measure()) if callable(measure) else None


def __getattr__(name: str) -> object:
    # The lazy re-export of TimingRefill (see the TYPE_CHECKING import above).
    if name == "TimingRefill":
        from gpu_agent.backends.timing_refill import TimingRefill  # noqa: PLC0415 - a cycle

        return TimingRefill
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
