"""The measuring backend: CUDA through PyCUDA (docs/design.md §11).

PyCUDA is imported lazily, in :func:`load_pycuda` only, so that this module imports (and is
type-checked and tested) on machines without it; constructing a backend there raises
:class:`PyCudaUnavailable` with instructions. Nothing outside ``gpu_agent/backends/``
imports PyCUDA (``tests/test_static_checks.py``). Beside it: loading the driver and its
handles (``pycuda_driver.py``), the timing stream (``pycuda_timing.py``), the fingerprint
(``cuda_fingerprint.py``), argument packing and fill plans (``cuda_kernel_args.py``), the
timing refill (``timing_refill.py``), clocks (``nvml_clocks.py``), the context's release
(``cuda_context.py``).

Choices that decide what the numbers mean:

* **Context.** The device's *primary* context, retained and pushed for the backend's life
  and left current nowhere by :meth:`PyCudaBackend.close`. The harness creates one backend
  per case in a fresh child process, so the context is still fresh per case; using the
  primary one lets the runtime API (torch, CuPy) in the same process share it, which the
  self-check's independent timer relies on. Where that process is: every case child is
  exec'd inside the jail (``gpu_agent/jail.py``), the probe child is a spawned (exec'd)
  interpreter; neither was ever forked from the agent process that loaded the signing key,
  so a kernel that reads its own process's pageable memory (HMM, ATS) finds no key there.
  nvcc runs inside the case's jail too: an ``#include`` of a path outside it finds nothing.
* **Build.** ``gpu_agent.build`` compiles the entry file for this device's exact target
  (``sm_90a`` on Hopper, ``sm_100a`` on Blackwell: ``build.target_architecture``) with the
  pinned flags; the cubin is loaded with ``module_from_buffer``.
* **Whose fault.** What fails before any submitted kernel has run (no PyCUDA, no device, the
  flush buffer, a cubin the driver refuses although it loads the toolchain's own probe
  kernel, the calibration) raises :class:`BackendUnavailable`: the agent's failure, never
  signed against the submission. Failures once the submission has run are its own.
* **Timing.** One stream. For each sample: the refill (``timing_refill.py``: poisoned
  outputs, the next fresh input variant, device to device) if the harness gave one, an
  asynchronous memset of a scratch buffer of ``max(2 × L2, 256 MiB)`` bytes (evicts every
  line of the solution's data, refilled bytes included, from L2), start event, the launch,
  end event. The memset also keeps the GPU busy while Python enqueues the start event and
  the launch, so the GPU never idles *between* the two events waiting for the host (the
  reason the scratch buffer is larger than 2 × L2 needs). Samples are enqueued back to back;
  the SM clock is read through NVML while the batch runs; then one synchronisation per
  batch of at most :data:`TIMING_BATCH`, read as ``end.time_since(start)`` (ms → ns).
* **Copy bandwidth.** A 256 MiB device-to-device ``cuMemcpyDtoDAsync`` timed with events,
  best of :data:`COPY_REPEATS` after a warm-up, reported as **bytes copied per second**
  (each byte is read once and written once, so DRAM traffic is twice that figure).
* **Event overhead.** :meth:`PyCudaBackend.event_overhead_ns`: the median event-timed
  latency of an empty kernel under the same loop — what the events add to every sample
  and a kernel-duration timer (CUPTI, as SOL-ExecBench uses) does not count.
"""

from __future__ import annotations

import contextlib
import gc
import math
import statistics
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from gpu_agent import build
from gpu_agent.backends.base import (
    BackendError,
    BackendUnavailable,
    CompiledKernel,
    DeviceInfo,
    KernelArg,
)
from gpu_agent.backends.cuda_context import LibcudaStack, release_primary
from gpu_agent.backends.cuda_fingerprint import device_info

# Called through these module names so that a test can stand in for the host's tools.
from gpu_agent.backends.cuda_fingerprint import device_uuid as _device_uuid
from gpu_agent.backends.cuda_fingerprint import nvidia_smi as _nvidia_smi
from gpu_agent.backends.cuda_kernel_args import as_bytes, memset_plan, pack_arguments
from gpu_agent.backends.nvml_clocks import ClockReading, NvmlClocks
from gpu_agent.backends.pycuda_driver import (
    DeviceBuffer,
    Launch,
    LoadedKernel,
    PyCudaUnavailable,
    check_limits,
    load_pycuda,
)
from gpu_agent.backends.pycuda_timing import Copy, StreamTimer
from gpu_agent.backends.timing_refill import TimingRefill, refill_copies

__all__ = ["MIN_FLUSH_BYTES", "PyCudaBackend", "PyCudaUnavailable", "create_backend", "load_pycuda"]

BACKEND_NAME = "pycuda"
MIN_FLUSH_BYTES = 256 * 1024 * 1024
COPY_BYTES = 256 * 1024 * 1024
COPY_REPEATS = 10
TIMING_BATCH = 256
EVENT_OVERHEAD_SAMPLES = 200
_EMPTY_KERNEL = {"empty.cu": 'extern "C" __global__ void kernelindex_empty() {}\n'}


class PyCudaBackend:
    """The Backend protocol over PyCUDA; one instance per case's child process."""

    name = BACKEND_NAME

    def __init__(self, device_ordinal: int | str = 0, nvcc: str | None = None) -> None:
        self._cuda = load_pycuda()
        self._closed = False
        self._launched = False  # has submitted code run? (decides whose a failure is)
        self._buffers: weakref.WeakSet[DeviceBuffer] = weakref.WeakSet()
        self._images: weakref.WeakKeyDictionary[DeviceBuffer, tuple[bytes, DeviceBuffer]] = (
            weakref.WeakKeyDictionary()
        )
        self._timer: StreamTimer | None = None
        self._overhead_ns: float | None = None
        self._nvcc = nvcc
        self._ordinal = int(device_ordinal)
        self._open_device()
        self._uuid = _device_uuid(self._ordinal)
        try:
            self._timer = StreamTimer(
                self._cuda, max(2 * self._l2_bytes, MIN_FLUSH_BYTES), NvmlClocks.open(self._uuid)
            )
        except BackendError:
            self.close()
            raise

    def _open_device(self) -> None:
        cuda = self._cuda
        try:
            count = cuda.Device.count()
            if not 0 <= self._ordinal < count:
                raise BackendUnavailable(
                    f"no CUDA device {self._ordinal} (this machine has {count})"
                )
            self._device = cuda.Device(self._ordinal)
            self._context = self._device.retain_primary_context()
            self._context.push()
        except BackendError:
            raise
        except Exception as exc:
            raise BackendUnavailable(f"cannot open CUDA device {self._ordinal}: {exc}") from exc
        major, minor = self._device.compute_capability()
        self._architecture = f"sm_{major}{minor}"
        self._target = build.target_architecture(int(major), int(minor))
        self._l2_bytes = int(self._device.get_attribute(cuda.device_attribute.L2_CACHE_SIZE))
        self._product = str(self._device.name())

    # --- fingerprint -------------------------------------------------------------------------

    @property
    def architecture(self) -> str:
        return self._architecture

    @property
    def target(self) -> str:
        """What kernels are built for: the architecture, ``a``-suffixed where it has one."""
        return self._target

    def device(self) -> DeviceInfo:
        smi = _nvidia_smi(self._uuid or str(self._ordinal))
        return device_info(
            product=self._product,
            architecture=self._architecture,
            l2_bytes=self._l2_bytes,
            uuid=self._uuid or smi.get("uuid"),
            pci_bus_id=lambda: str(self._device.pci_bus_id()),
            smi=smi,
            cuda_version=self._cuda_version,
        )

    def _cuda_version(self) -> str | None:
        try:
            version = int(self._cuda.get_driver_version())  # e.g. 13000: what the driver runs
        except Exception:
            return None
        return f"{version // 1000}.{version % 1000 // 10}"

    def timing_clocks(self) -> list[ClockReading]:
        """The clocks read (NVML) during every timed batch so far, in order."""
        return list(self._stream_timer().clocks)

    def sm_clock_mhz(self) -> float | None:
        """The SM clock read during the latest timed batch (``stats.collect``'s sm_clock)."""
        clocks = self._stream_timer().clocks
        return clocks[-1].sm_mhz if clocks else None

    # --- build -------------------------------------------------------------------------------

    def compile(self, sources: dict[str, str], entry_point: str) -> CompiledKernel:
        built = build.compile_cubin(sources, entry_point, self._target, nvcc=self._nvcc)
        try:
            module = self._cuda.module_from_buffer(built.cubin)
        except Exception as exc:
            raise self._refused(entry_point, exc) from exc
        try:
            function = module.get_function(built.function)
        except Exception as exc:
            raise BackendError(
                f'no extern "C" __global__ function {built.function!r} in {built.entry_file} '
                f'({exc}); declare it extern "C" so its name is not mangled'
            ) from exc
        attribute = self._cuda.function_attribute
        loaded = LoadedKernel(
            module=module,
            function=function,
            build=built,
            max_threads_per_block=int(function.get_attribute(attribute.MAX_THREADS_PER_BLOCK)),
            static_shared_bytes=int(function.get_attribute(attribute.SHARED_SIZE_BYTES)),
            registers=int(function.get_attribute(attribute.NUM_REGS)),
            local_bytes=int(function.get_attribute(attribute.LOCAL_SIZE_BYTES)),
        )
        return CompiledKernel(entry_point, self._target, built.flags, loaded)

    def _refused(self, entry_point: str, exc: Exception) -> BackendError:
        """Whose fault a refused cubin is: the agent's if the driver refuses the toolchain's
        own probe kernel for this target too (driver older than nvcc...), else the source's
        (e.g. more static device memory than the GPU has)."""
        message = f"the driver refused the cubin for {entry_point}: {exc}"
        try:
            probe = build.compile_cubin(
                {"probe.cu": build.PROBE_SOURCE},
                "probe.cu::kernelindex_probe",
                self._target,
                nvcc=self._nvcc,
            )
            self._cuda.module_from_buffer(probe.cubin)
        except Exception as probe_exc:
            return BackendUnavailable(f"{message}; it refuses a trivial kernel too: {probe_exc}")
        return BackendError(message)

    # --- memory ------------------------------------------------------------------------------

    def _fault(self, message: str) -> BackendError:
        # Before submitted code ran, nothing but the agent (or the machine) can be at fault;
        # afterwards a failing call may be a sticky error the kernel left.
        return BackendError(message) if self._launched else BackendUnavailable(message)

    def _alloc(self, nbytes: int) -> DeviceBuffer:
        self._check_open()
        try:
            allocation = self._cuda.mem_alloc(max(int(nbytes), 1))
        except Exception as exc:
            raise self._fault(f"cannot allocate {nbytes} bytes on the device: {exc}") from exc
        buffer = DeviceBuffer(allocation, int(nbytes))
        self._buffers.add(buffer)
        return buffer

    def upload(self, host: npt.NDArray[np.generic]) -> DeviceBuffer:
        raw = as_bytes(host)
        buffer = self._alloc(raw.nbytes)
        if raw.nbytes:
            self._guard("copy to the device", self._cuda.memcpy_htod, buffer.pointer, raw)
        return buffer

    def write(self, buffer: object, host: npt.NDArray[np.generic]) -> None:
        """Copy ``host`` into an existing buffer of exactly its size: the harness refills the
        same buffers every round (and for the timed launches), as on the CPU double."""
        target = self._own(buffer)
        raw = as_bytes(host)
        if raw.nbytes != target.nbytes:
            raise BackendError(f"write: {raw.nbytes} bytes into a {target.nbytes}-byte buffer")
        if raw.nbytes:
            self._synchronize("write")  # nothing still running may read the old contents
            self._guard("copy to the device", self._cuda.memcpy_htod, target.pointer, raw)

    def empty(self, shape: tuple[int, ...], dtype: np.dtype[np.generic]) -> DeviceBuffer:
        count = math.prod(int(n) for n in shape)
        return self._alloc(count * np.dtype(dtype).itemsize)

    def fill(self, buffer: object, pattern: bytes) -> None:
        target = self._own(buffer)
        plan = memset_plan(pattern, target.nbytes)
        if target.nbytes == 0:
            return
        cuda = self._cuda
        if plan is not None:
            width, value, count = plan
            memset = {1: cuda.memset_d8, 2: cuda.memset_d16, 4: cuda.memset_d32}[width]
            self._guard("memset", memset, target.pointer, value, count)
        else:  # any other pattern: copy a host image of the whole buffer
            repeats = -(-target.nbytes // len(pattern))
            image = np.frombuffer((pattern * repeats)[: target.nbytes], dtype=np.uint8)
            self._guard("pattern copy", cuda.memcpy_htod, target.pointer, image)
        self._synchronize("fill")

    def download(
        self, buffer: object, shape: tuple[int, ...], dtype: np.dtype[np.generic]
    ) -> npt.NDArray[np.generic]:
        source = self._own(buffer)
        dtype = np.dtype(dtype)
        nbytes = math.prod(int(n) for n in shape) * dtype.itemsize
        if nbytes > source.nbytes:
            raise BackendError(
                f"cannot read {nbytes} bytes ({shape} {dtype}) from a {source.nbytes}-byte buffer"
            )
        raw = np.empty(nbytes, dtype=np.uint8)
        if nbytes:
            self._synchronize("download")
            self._guard("copy from the device", self._cuda.memcpy_dtoh, raw, source.pointer)
        return raw.view(dtype).reshape(shape)

    # --- launching ---------------------------------------------------------------------------

    def launch(
        self,
        kernel: CompiledKernel,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared_mem_bytes: int,
        args: list[KernelArg],
    ) -> None:
        plan = self._plan(kernel, grid, block, shared_mem_bytes, args)
        self._enqueue(plan)
        self._synchronize(f"kernel {plan.kernel.build.function}")

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
        """``count`` timed launches (ns each). ``refill``: restore poisoned outputs and fresh
        inputs before every one (``timing_refill.py``), so none can be told from a checked
        launch."""
        if count < 0:
            raise BackendError("count must be non-negative")
        plan = self._plan(kernel, grid, block, shared_mem_bytes, args)
        times: list[float] = []
        while len(times) < count:
            batch = min(TIMING_BATCH, count - len(times))
            try:
                times.extend(self._timed_batch(plan, batch, refill))
            except BackendError:
                raise
            except Exception as exc:
                raise BackendError(
                    f"timed launch of {plan.kernel.build.function} failed: {exc}"
                ) from exc
        return times

    def _timed_batch(self, plan: Launch, batch: int, refill: TimingRefill | None) -> list[float]:
        def copies(index: int) -> list[Copy]:
            pairs = refill_copies(refill, index, self._poison_image)
            return [(self._own(t).pointer, self._own(f).pointer, t.nbytes) for t, f in pairs]

        return self._stream_timer().batch(batch, copies, lambda: self._enqueue(plan))

    def _poison_image(self, buffer: object, pattern: bytes) -> DeviceBuffer:
        """A device buffer of ``buffer``'s size holding ``pattern`` repeated (made once)."""
        owned = self._own(buffer)
        cached = self._images.get(owned)
        if cached is not None and cached[0] == pattern:
            return cached[1]
        image = self._alloc(owned.nbytes)
        self.fill(image, pattern)
        self._images[owned] = (pattern, image)
        return image

    def copy_bandwidth(self) -> float:
        source = self._alloc(COPY_BYTES)
        target = self._alloc(COPY_BYTES)
        try:
            self._guard("memset", self._cuda.memset_d8, source.pointer, 0x5A, COPY_BYTES)
            timer = self._stream_timer()
            timer.timed_copy(target.pointer, source.pointer, COPY_BYTES)  # a warm-up
            times = [
                timer.timed_copy(target.pointer, source.pointer, COPY_BYTES)
                for _ in range(COPY_REPEATS)
            ]
        except BackendError:
            raise
        except Exception as exc:
            raise BackendUnavailable(f"copy-bandwidth calibration failed: {exc}") from exc
        finally:
            self._release(source)
            self._release(target)
        # The best rather than the median: the floor derived from it must not be too high.
        best_ms = min((t for t in times if t > 0), default=math.inf)
        if not math.isfinite(best_ms):
            raise BackendUnavailable("copy-bandwidth calibration measured no time")
        return COPY_BYTES / (best_ms * 1e-3)

    def event_overhead_ns(self, samples: int = EVENT_OVERHEAD_SAMPLES) -> float:
        """Median event-timed latency of an empty kernel under the timing loop (measured
        once per backend): the fixed cost the events add to every sample."""
        if self._overhead_ns is None:
            launched = self._launched  # the agent's own kernel is no submitted code
            try:
                empty = self.compile(dict(_EMPTY_KERNEL), "empty.cu::kernelindex_empty")
                times = self.time_launches(empty, (1, 1, 1), (1, 1, 1), 0, [], samples)
            except BackendError as exc:
                raise BackendUnavailable(f"event-overhead calibration failed: {exc}") from exc
            finally:
                self._launched = launched
            self._overhead_ns = statistics.median(times[samples // 10 :])  # skip warm-up
        return self._overhead_ns

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):  # a sticky error: the context is lost anyway
            self._cuda.Context.synchronize()
        gc.collect()
        for buffer in list(self._buffers):
            self._release(buffer)
        if self._timer is not None:
            self._timer.close()
        release_primary(self._context, LibcudaStack.load())

    def __enter__(self) -> PyCudaBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- helpers -----------------------------------------------------------------------------

    def _stream_timer(self) -> StreamTimer:
        self._check_open()
        assert self._timer is not None  # made in __init__, or there is no backend
        return self._timer

    def _check_open(self) -> None:
        if self._closed:
            raise BackendError("the backend is closed")

    def _own(self, buffer: object) -> DeviceBuffer:
        self._check_open()
        if not isinstance(buffer, DeviceBuffer) or buffer not in self._buffers:
            raise BackendError("not a buffer of this backend")
        return buffer

    def _release(self, buffer: DeviceBuffer) -> None:
        self._buffers.discard(buffer)
        with contextlib.suppress(Exception):  # already freed, or the context is gone
            buffer.allocation.free()

    def _guard(self, what: str, call: Any, *args: Any) -> None:
        try:
            call(*args)
        except Exception as exc:
            raise self._fault(f"{what} failed: {exc}") from exc

    def _synchronize(self, what: str) -> None:
        try:
            self._cuda.Context.synchronize()
        except Exception as exc:
            raise self._fault(f"{what}: CUDA error: {exc}") from exc

    def _plan(
        self,
        kernel: CompiledKernel,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared_mem_bytes: int,
        args: Sequence[KernelArg],
    ) -> Launch:
        """Check the launch against the function's limits; pack its arguments."""
        self._check_open()
        loaded = kernel.handle
        if not isinstance(loaded, LoadedKernel):
            raise BackendError(f"kernel {kernel.entry_point} was not compiled by this backend")
        check_limits(loaded, block, shared_mem_bytes, self._cuda.function_attribute)
        formats, values = pack_arguments(args, self._pointer_of)
        loaded.function.prepare(formats)
        geometry = (int(grid[0]), int(grid[1]), int(grid[2]))
        threads_xyz = (int(block[0]), int(block[1]), int(block[2]))
        return Launch(loaded, geometry, threads_xyz, int(shared_mem_bytes), values)

    def _pointer_of(self, arg: object) -> int | None:
        """The device pointer of a buffer of this backend; None for what is no device buffer."""
        if not isinstance(arg, DeviceBuffer):
            return None
        return self._own(arg).pointer

    def _enqueue(self, plan: Launch) -> None:
        self._launched = True
        try:
            plan.kernel.function.prepared_async_call(
                plan.grid,
                plan.block,
                self._stream_timer().stream,
                *plan.values,
                shared_size=plan.shared,
            )
        except Exception as exc:
            raise BackendError(f"launch of {plan.kernel.build.function} failed: {exc}") from exc


def create_backend(**options: str) -> PyCudaBackend:
    """The registry's factory: options ``device`` (ordinal) and ``nvcc`` (path), as strings."""
    unknown = set(options) - {"device", "nvcc"}
    if unknown:
        raise BackendError(f"unknown {BACKEND_NAME} backend options: {sorted(unknown)}")
    return PyCudaBackend(device_ordinal=options.get("device", "0"), nvcc=options.get("nvcc"))
