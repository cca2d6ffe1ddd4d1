"""An independent timing of a kernel, to check the measuring backend's numbers against.

Used by ``gpu_agent/selfcheck.py`` only. It times the *same* loaded kernel with the same
arguments as :meth:`PyCudaBackend.time_launches`, but shares as little of its method as
possible:

* **torch** (when importable and it sees the GPU): ``torch.cuda.Event`` pairs on torch's
  current stream, which is the legacy default stream that an unstreamed PyCUDA launch also
  uses, in the same (primary) context; the L2 is flushed by ``Tensor.fill_`` on a torch
  buffer of the same size; the kernel is launched through PyCUDA's plain ``Function.__call__``
  (not the prepared call the backend uses); synchronised after every sample.
* **driver events** otherwise: PyCUDA events on the default stream (not the backend's own
  stream), an asynchronous ``memset_d8`` of a separate scratch buffer, ``Function.__call__``,
  synchronised after every sample.

Both keep the flush (which precedes the start event) long enough that the GPU is still busy
with it while the host enqueues the start event and the launch, as the backend does, so
neither measures host launch overhead.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from gpu_agent.backends.base import Backend, BackendError, CompiledKernel, KernelArg
from gpu_agent.backends.cuda_kernel_args import call_value
from gpu_agent.backends.pycuda_backend import MIN_FLUSH_BYTES
from gpu_agent.backends.pycuda_driver import DeviceBuffer, LoadedKernel, load_pycuda


def _call_args(args: list[KernelArg]) -> list[Any]:
    """Arguments as ``Function.__call__`` takes them: pointers as np.uintp, numpy scalars
    (float16, bfloat16... by their bits: PyCUDA's packer has no character for them)."""
    converted: list[Any] = []
    for index, arg in enumerate(args):
        if isinstance(arg, DeviceBuffer):
            converted.append(np.uintp(arg.pointer))
        elif isinstance(arg, np.generic):
            converted.append(call_value(arg, index))
        else:
            raise BackendError(f"argument {index}: unsupported type {type(arg).__name__}")
    return converted


def _torch() -> Any | None:
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return None
    try:
        return torch if torch.cuda.is_available() else None
    except Exception:
        return None


class LaunchGeometry(Protocol):
    """Grid, block and dynamic shared memory of a launch (a ``ResolvedLaunch`` has them)."""

    @property
    def grid(self) -> tuple[int, int, int]: ...

    @property
    def block(self) -> tuple[int, int, int]: ...

    @property
    def shared_mem_bytes(self) -> int: ...


@dataclass(frozen=True)
class _TimingPlan:
    """What both timers run: ``warmup`` then ``count`` timed launches, each after a flush."""

    function: Any  # pycuda.driver.Function
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    call_args: list[Any]
    count: int
    warmup: int
    flush_bytes: int

    def launch(self) -> None:
        """One launch through PyCUDA's plain ``Function.__call__``."""
        self.function(*self.call_args, grid=self.grid, block=self.block, shared=self.shared)


def independent_latencies_ns(
    backend: Backend,
    kernel: CompiledKernel,
    launch: LaunchGeometry,
    args: list[KernelArg],
    count: int,
    *,
    warmup: int = 10,
    prefer_torch: bool = True,
) -> tuple[str, list[float]]:
    """``(method, count latencies in ns)`` for ``kernel`` as the pycuda ``backend`` (which
    compiled it and owns the argument buffers) would launch it."""
    handle = kernel.handle
    if not isinstance(handle, LoadedKernel):
        raise BackendError("the kernel was not compiled by the pycuda backend")
    plan = _TimingPlan(
        function=handle.function,
        grid=launch.grid,
        block=launch.block,
        shared=launch.shared_mem_bytes,
        call_args=_call_args(args),
        count=count,
        warmup=warmup,
        flush_bytes=max(2 * backend.device().l2_bytes, MIN_FLUSH_BYTES),
    )
    torch = _torch() if prefer_torch else None
    if torch is not None:
        try:
            return "torch.cuda.Event", _time_with_torch(torch, plan)
        except Exception as exc:  # torch unusable here: say so in the method, time without it
            fallback = f"driver events, default stream (torch failed: {type(exc).__name__})"
            return fallback, _time_with_driver_events(plan)
    return "driver events, default stream", _time_with_driver_events(plan)


def _time_with_torch(torch: Any, plan: _TimingPlan) -> list[float]:
    device = torch.device("cuda", torch.cuda.current_device())
    scratch = torch.empty(plan.flush_bytes // 4, dtype=torch.int32, device=device)
    stream = torch.cuda.current_stream(device)
    if int(stream.cuda_stream) != 0:
        raise BackendError("torch's current stream is not the default stream")
    times: list[float] = []
    for index in range(plan.warmup + plan.count):
        scratch.fill_(index)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record(stream)
        plan.launch()
        end.record(stream)
        end.synchronize()
        if index >= plan.warmup:
            times.append(float(start.elapsed_time(end)) * 1e6)
    del scratch
    return times


def _time_with_driver_events(plan: _TimingPlan) -> list[float]:
    cuda = load_pycuda()
    scratch = cuda.mem_alloc(plan.flush_bytes)
    times: list[float] = []
    try:
        for index in range(plan.warmup + plan.count):
            cuda.memset_d8_async(int(scratch), index & 0xFF, plan.flush_bytes, None)
            start, end = cuda.Event(), cuda.Event()
            start.record()
            plan.launch()
            end.record()
            end.synchronize()
            if index >= plan.warmup:
                times.append(float(end.time_since(start)) * 1e6)
    except Exception as exc:
        raise BackendError(f"independent timing failed: {exc}") from exc
    finally:
        scratch.free()
    return times
