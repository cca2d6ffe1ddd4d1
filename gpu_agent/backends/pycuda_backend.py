"""The measuring backend: CUDA through PyCUDA (DESIGN.md §11).

PyCUDA is imported lazily, in :func:`load_pycuda` only, so that this module imports (and is
type-checked and tested) on machines without it; constructing a backend there raises
:class:`PyCudaUnavailable` with instructions. Nothing outside ``gpu_agent/backends/``
imports PyCUDA (``tests/test_static_checks.py``). What needs no driver lives beside it: the
fingerprint's host-side sources in ``cuda_fingerprint.py``, argument packing in
``cuda_kernel_args.py``.

Choices that decide what the numbers mean:

* **Context.** The device's *primary* context, retained and pushed for the backend's life.
  The harness creates one backend per case in a fresh child process, so the context is still
  fresh per case; using the primary one lets the runtime API (torch, CuPy) in the same
  process share it, which the self-check's independent timer relies on.
* **Build.** ``gpu_agent.build`` compiles the entry file for exactly this device's
  ``sm_XY`` with the pinned flags; the cubin is loaded with ``module_from_buffer``.
* **Timing.** One stream. For each sample: an asynchronous memset of a scratch buffer of
  ``max(2 × L2, 256 MiB)`` bytes (evicts every line of the solution's data from L2; outside
  the events), start event, the launch, end event. The memset also keeps the GPU busy while
  Python enqueues the start event and the launch, so the GPU never idles *between* the two
  events waiting for the host (the reason the scratch buffer is larger than 2 × L2 needs).
  Samples are enqueued back to back and synchronised once per batch of at most
  :data:`TIMING_BATCH`, then read as ``end.time_since(start)`` (ms → ns).
* **Copy bandwidth.** A 256 MiB device-to-device ``cuMemcpyDtoDAsync`` timed with events,
  best of :data:`COPY_REPEATS` after a warm-up, reported as **bytes copied per second**
  (each byte is read once and written once, so DRAM traffic is twice that figure;
  ``gpu_agent.stats.roofline_floor_ns`` applies the factor 2). The best rather than the
  median makes the floor as low as the hardware allows: it flags only impossible times.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from gpu_agent import build
from gpu_agent.backends.base import BackendError, CompiledKernel, DeviceInfo, KernelArg
from gpu_agent.backends.cuda_fingerprint import device_info

# Called through these module names so that a test can stand in for the host's tools.
from gpu_agent.backends.cuda_fingerprint import device_uuid as _device_uuid
from gpu_agent.backends.cuda_fingerprint import nvidia_smi as _nvidia_smi
from gpu_agent.backends.cuda_kernel_args import as_bytes, pack_arguments

BACKEND_NAME = "pycuda"
MIN_FLUSH_BYTES = 256 * 1024 * 1024
COPY_BYTES = 256 * 1024 * 1024
COPY_REPEATS = 10
TIMING_BATCH = 256
# Dynamic shared memory above this needs an explicit opt-in per function.
DEFAULT_DYNAMIC_SMEM_LIMIT = 48 * 1024


class PyCudaUnavailable(BackendError):
    """PyCUDA is not installed (or does not load) on this machine."""


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
        raise BackendError(f"CUDA driver initialisation failed: {exc}") from exc
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


class PyCudaBackend:
    """The Backend protocol over PyCUDA; one instance per case's child process."""

    name = BACKEND_NAME

    def __init__(self, device_ordinal: int | str = 0, nvcc: str | None = None) -> None:
        self._cuda = load_pycuda()
        cuda = self._cuda
        self._closed = False
        self._buffers: weakref.WeakSet[DeviceBuffer] = weakref.WeakSet()
        self._flush: Any = None
        self._flush_words = 0
        self._flush_round = 0
        self._nvcc = nvcc
        ordinal = int(device_ordinal)
        try:
            count = cuda.Device.count()
            if not 0 <= ordinal < count:
                raise BackendError(f"no CUDA device {ordinal} (this machine has {count})")
            self._device = cuda.Device(ordinal)
            self._context = self._device.retain_primary_context()
            self._context.push()
        except BackendError:
            raise
        except Exception as exc:
            raise BackendError(f"cannot open CUDA device {ordinal}: {exc}") from exc
        self._ordinal = ordinal
        major, minor = self._device.compute_capability()
        self._architecture = f"sm_{major}{minor}"
        attribute = cuda.device_attribute
        self._l2_bytes = int(self._device.get_attribute(attribute.L2_CACHE_SIZE))
        self._product = str(self._device.name())
        self._uuid = _device_uuid(ordinal)
        try:
            self._stream = cuda.Stream()
        except Exception as exc:
            self.close()
            raise BackendError(f"cannot create a CUDA stream: {exc}") from exc

    # --- fingerprint -------------------------------------------------------------------------

    @property
    def architecture(self) -> str:
        return self._architecture

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

    # --- build -------------------------------------------------------------------------------

    def compile(self, sources: dict[str, str], entry_point: str) -> CompiledKernel:
        built = build.compile_cubin(sources, entry_point, self._architecture, nvcc=self._nvcc)
        cuda = self._cuda
        try:
            module = cuda.module_from_buffer(built.cubin)
        except Exception as exc:
            raise BackendError(f"the driver refused the cubin for {entry_point}: {exc}") from exc
        try:
            function = module.get_function(built.function)
        except Exception as exc:
            raise BackendError(
                f'no extern "C" __global__ function {built.function!r} in {built.entry_file} '
                f'({exc}); declare it extern "C" so its name is not mangled'
            ) from exc
        attribute = cuda.function_attribute
        loaded = LoadedKernel(
            module=module,
            function=function,
            build=built,
            max_threads_per_block=int(function.get_attribute(attribute.MAX_THREADS_PER_BLOCK)),
            static_shared_bytes=int(function.get_attribute(attribute.SHARED_SIZE_BYTES)),
            registers=int(function.get_attribute(attribute.NUM_REGS)),
            local_bytes=int(function.get_attribute(attribute.LOCAL_SIZE_BYTES)),
        )
        return CompiledKernel(
            entry_point=entry_point,
            architecture=self._architecture,
            flags=built.flags,
            handle=loaded,
        )

    # --- memory ------------------------------------------------------------------------------

    def _alloc(self, nbytes: int) -> DeviceBuffer:
        self._check_open()
        try:
            allocation = self._cuda.mem_alloc(max(int(nbytes), 1))
        except Exception as exc:
            raise BackendError(f"cannot allocate {nbytes} bytes on the device: {exc}") from exc
        buffer = DeviceBuffer(allocation, int(nbytes))
        self._buffers.add(buffer)
        return buffer

    def upload(self, host: npt.NDArray[np.generic]) -> DeviceBuffer:
        raw = as_bytes(host)
        buffer = self._alloc(raw.nbytes)
        if raw.nbytes:
            self._guard("copy to the device", self._cuda.memcpy_htod, buffer.pointer, raw)
        return buffer

    def empty(self, shape: tuple[int, ...], dtype: np.dtype[np.generic]) -> DeviceBuffer:
        count = math.prod(int(n) for n in shape)
        return self._alloc(count * np.dtype(dtype).itemsize)

    def fill(self, buffer: object, pattern: bytes) -> None:
        target = self._own(buffer)
        if not pattern:
            raise BackendError("fill needs a non-empty pattern")
        size = target.nbytes
        if size == 0:
            return
        cuda = self._cuda
        width = len(pattern)
        if pattern == pattern[:1] * width:  # one repeated byte (covers 1-byte patterns)
            self._guard("memset", cuda.memset_d8, target.pointer, pattern[0], size)
        elif width == 2 and size % 2 == 0:
            value = int.from_bytes(pattern, "little")
            self._guard("memset", cuda.memset_d16, target.pointer, value, size // 2)
        elif width == 4 and size % 4 == 0:
            value = int.from_bytes(pattern, "little")
            self._guard("memset", cuda.memset_d32, target.pointer, value, size // 4)
        else:  # any other pattern: copy a host image of the whole buffer
            repeats = -(-size // width)
            image = np.frombuffer((pattern * repeats)[:size], dtype=np.uint8)
            self._guard("pattern copy", cuda.memcpy_htod, target.pointer, image)
        self._synchronize("fill")

    def download(
        self, buffer: object, shape: tuple[int, ...], dtype: np.dtype[np.generic]
    ) -> npt.NDArray[np.generic]:
        source = self._own(buffer)
        dtype = np.dtype(dtype)
        count = math.prod(int(n) for n in shape)
        nbytes = count * dtype.itemsize
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
        loaded = self._loaded(kernel)
        packed = self._prepare(loaded, block, shared_mem_bytes, args)
        self._enqueue(loaded, grid, block, shared_mem_bytes, packed)
        self._synchronize(f"kernel {loaded.build.function}")

    def time_launches(
        self,
        kernel: CompiledKernel,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared_mem_bytes: int,
        args: list[KernelArg],
        count: int,
    ) -> list[float]:
        if count < 0:
            raise BackendError("count must be non-negative")
        loaded = self._loaded(kernel)
        packed = self._prepare(loaded, block, shared_mem_bytes, args)
        self._ensure_flush()
        cuda = self._cuda
        times: list[float] = []
        while len(times) < count:
            batch = min(TIMING_BATCH, count - len(times))
            events: list[tuple[Any, Any]] = []
            try:
                for _ in range(batch):
                    start, end = cuda.Event(), cuda.Event()
                    self._flush_l2()
                    start.record(self._stream)
                    self._enqueue(loaded, grid, block, shared_mem_bytes, packed)
                    end.record(self._stream)
                    events.append((start, end))
                events[-1][1].synchronize()
                times.extend(float(end.time_since(start)) * 1e6 for start, end in events)
            except BackendError:
                raise
            except Exception as exc:
                raise BackendError(
                    f"timed launch of {loaded.build.function} failed: {exc}"
                ) from exc
        return times

    def copy_bandwidth(self) -> float:
        cuda = self._cuda
        source = self._alloc(COPY_BYTES)
        target = self._alloc(COPY_BYTES)
        try:
            self._guard("memset", cuda.memset_d8, source.pointer, 0x5A, COPY_BYTES)
            best_ms = math.inf
            for repeat in range(COPY_REPEATS + 1):
                start, end = cuda.Event(), cuda.Event()
                start.record(self._stream)
                cuda.memcpy_dtod_async(target.pointer, source.pointer, COPY_BYTES, self._stream)
                end.record(self._stream)
                end.synchronize()
                elapsed = float(end.time_since(start))
                if repeat > 0 and elapsed > 0:  # the first copy is a warm-up
                    best_ms = min(best_ms, elapsed)
        except BackendError:
            raise
        except Exception as exc:
            raise BackendError(f"copy-bandwidth calibration failed: {exc}") from exc
        finally:
            self._release(source)
            self._release(target)
        if not math.isfinite(best_ms):
            raise BackendError("copy-bandwidth calibration measured no time")
        return COPY_BYTES / (best_ms * 1e-3)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):  # a sticky error: the context is lost anyway
            self._cuda.Context.synchronize()
        gc.collect()
        for buffer in list(self._buffers):
            self._release(buffer)
        if self._flush is not None:
            with contextlib.suppress(Exception):
                self._flush.free()
            self._flush = None
        self._stream = None
        try:
            self._context.pop()
        finally:
            self._context.detach()

    def __enter__(self) -> PyCudaBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- helpers -----------------------------------------------------------------------------

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
            raise BackendError(f"{what} failed: {exc}") from exc

    def _synchronize(self, what: str) -> None:
        try:
            self._cuda.Context.synchronize()
        except Exception as exc:
            raise BackendError(f"{what}: CUDA error: {exc}") from exc

    def _loaded(self, kernel: CompiledKernel) -> LoadedKernel:
        self._check_open()
        handle = kernel.handle
        if not isinstance(handle, LoadedKernel):
            raise BackendError(f"kernel {kernel.entry_point} was not compiled by this backend")
        return handle

    def _prepare(
        self,
        loaded: LoadedKernel,
        block: tuple[int, int, int],
        shared_mem_bytes: int,
        args: Sequence[KernelArg],
    ) -> list[Any]:
        """Check the launch against the function's limits; return the packed arguments."""
        threads = block[0] * block[1] * block[2]
        name = loaded.build.function
        if threads > loaded.max_threads_per_block:
            raise BackendError(
                f"block {block} has {threads} threads; {name} allows at most "
                f"{loaded.max_threads_per_block} (registers: {loaded.registers})"
            )
        if shared_mem_bytes > DEFAULT_DYNAMIC_SMEM_LIMIT:
            attribute = self._cuda.function_attribute
            try:
                loaded.function.set_attribute(
                    attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, int(shared_mem_bytes)
                )
            except Exception as exc:
                raise BackendError(
                    f"{name}: cannot allow {shared_mem_bytes} bytes of dynamic shared memory "
                    f"on this device: {exc}"
                ) from exc
        formats, values = pack_arguments(args, self._pointer_of)
        loaded.function.prepare(formats)
        return values

    def _pointer_of(self, arg: object) -> int | None:
        """The device pointer of a buffer of this backend; None for what is no device buffer."""
        if not isinstance(arg, DeviceBuffer):
            return None
        return self._own(arg).pointer

    def _enqueue(
        self,
        loaded: LoadedKernel,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared_mem_bytes: int,
        values: list[Any],
    ) -> None:
        try:
            loaded.function.prepared_async_call(
                tuple(grid), tuple(block), self._stream, *values, shared_size=shared_mem_bytes
            )
        except Exception as exc:
            raise BackendError(f"launch of {loaded.build.function} failed: {exc}") from exc

    def _ensure_flush(self) -> None:
        if self._flush is not None:
            return
        size = max(2 * self._l2_bytes, MIN_FLUSH_BYTES)
        size -= size % 4
        try:
            self._flush = self._cuda.mem_alloc(size)
        except Exception as exc:
            raise BackendError(f"cannot allocate the {size}-byte L2 flush buffer: {exc}") from exc
        self._flush_words = size // 4

    def _flush_l2(self) -> None:
        # A different word each time, so no layer can treat the memset as a no-op.
        self._flush_round = (self._flush_round + 1) & 0xFFFF
        self._cuda.memset_d32_async(
            int(self._flush), 0x5EED0000 | self._flush_round, self._flush_words, self._stream
        )


def create_backend(**options: str) -> PyCudaBackend:
    """The registry's factory: options ``device`` (ordinal) and ``nvcc`` (path), as strings."""
    unknown = set(options) - {"device", "nvcc"}
    if unknown:
        raise BackendError(f"unknown {BACKEND_NAME} backend options: {sorted(unknown)}")
    return PyCudaBackend(device_ordinal=options.get("device", "0"), nvcc=options.get("nvcc"))
