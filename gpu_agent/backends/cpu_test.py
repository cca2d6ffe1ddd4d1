"""The ``cpu-test`` backend: the Backend protocol on the host, for CI without a GPU.

It cannot run CUDA, so ``compile`` maps the solution's entry point (``"file.cu::kernel"``)
to a registered Python *emulation* of that kernel: ``fn(grid, block, shared_mem_bytes,
args)`` that reads and writes the :class:`HostBuffer` arguments the way the kernel would.
Everything around the launch — poisoning, hashing, tolerance, the stop rule, the floor,
child processes — is the production harness, so the emulations (an honest RMSNorm and the
adversarial ones in the tests) exercise the real detections.

Its measurements are worthless as evidence and say so: ``device()`` reports backend
``cpu-test``, product "CPU test backend (not a GPU)" and architecture ``cpu``, which can match
no GPU run's hardware, and ``cpu-test`` is not in ``MEASURING_BACKENDS``. There is no L2 to
flush; timing is ``time.perf_counter_ns`` around the emulation call. A ``refill``
(``timing_refill.py``) is honoured as on the GPU: before every timed call, outside the timed
region, each output gets its poison image and each input the next fresh variant, so CI
exercises what a GPU run does to a kernel that idles when it is not checked.
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import socket
import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from gpu_agent.backends.base import BackendError, Buffer, CompiledKernel, DeviceInfo, KernelArg
from gpu_agent.backends.timing_refill import TimingRefill, refill_copies

Emulation = Callable[[tuple[int, int, int], tuple[int, int, int], int, list[KernelArg]], None]

_EMULATIONS: dict[str, Emulation] = {}
# Fake device addresses: unique per allocation within a process, like distinct pointers.
_ADDRESSES = itertools.count(0x7F00_0000_0000, 0x1_0000)

# The honest RMSNorm and the adversarial variants (gpu_agent/backends/cpu_adversaries.py).
BUILTIN_EMULATIONS = ("gpu_agent.backends.cpu_emulations", "gpu_agent.backends.cpu_adversaries")


def register_emulation(entry_point: str, fn: Emulation) -> None:
    """Make ``fn`` what ``compile(..., entry_point)`` loads on the cpu-test backend.

    Two different emulations for one entry point are an error, not a silent override: which
    one a case ran would depend on import order."""
    existing = _EMULATIONS.get(entry_point)
    if existing is not None and existing is not fn:
        raise ValueError(f"an emulation for {entry_point!r} is already registered")
    _EMULATIONS[entry_point] = fn


def emulation(entry_point: str) -> Callable[[Emulation], Emulation]:
    """Decorator form of :func:`register_emulation`."""

    def register(fn: Emulation) -> Emulation:
        register_emulation(entry_point, fn)
        return fn

    return register


class HostBuffer:
    """ "Device" memory: a byte array on the host, with a fake but stable address."""

    def __init__(self, nbytes: int) -> None:
        self.data: npt.NDArray[np.uint8] = np.empty(nbytes, dtype=np.uint8)
        self.address = next(_ADDRESSES)

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)

    def view(
        self, dtype: npt.DTypeLike, shape: tuple[int, ...] | None = None
    ) -> npt.NDArray[np.generic]:
        """A writable typed view, as a kernel sees the pointer."""
        typed = self.data.view(np.dtype(dtype))
        return typed if shape is None else typed.reshape(shape)


def _buffer(value: Buffer) -> HostBuffer:
    if not isinstance(value, HostBuffer):
        raise BackendError(f"cpu-test backend got a foreign buffer {type(value).__name__}")
    return value


class FreshBuffersCpuTestBackend:
    """The cpu-test backend that cannot refill a buffer in place: every round uploads to new
    buffers, as such a backend does (option ``buffers=fresh``)."""

    name = "cpu-test"
    # Read by ``correctness_round.buffer_writer``: False, so the harness never calls write.
    writes_in_place = False

    def __init__(self, emulation_modules: tuple[str, ...] = ()) -> None:
        self._timed = 0  # timed launches over the backend's life: the refill's variant index
        self._images: dict[int, tuple[bytes, HostBuffer]] = {}
        for module in (*BUILTIN_EMULATIONS, *emulation_modules):
            try:
                importlib.import_module(module)
            except ImportError as exc:
                raise BackendError(f"cannot import emulation module {module!r}: {exc}") from exc

    def device(self) -> DeviceInfo:
        host = hashlib.sha256(socket.gethostname().encode("utf-8")).hexdigest()
        return DeviceInfo(
            backend=self.name,
            product="CPU test backend (not a GPU)",
            architecture="cpu",
            gpu_uuid_hash=host,
            l2_bytes=0,
        )

    def compile(self, sources: dict[str, str], entry_point: str) -> CompiledKernel:
        file_name, _, kernel_name = entry_point.partition("::")
        text = sources.get(file_name)
        if text is None:
            raise BackendError(f"compile: {file_name!r} is not among the sources")
        # Like nvcc + module load: the named function must exist in the entry file.
        if kernel_name not in text:
            raise BackendError(f"compile: no function {kernel_name!r} in {file_name}")
        fn = _EMULATIONS.get(entry_point)
        if fn is None:
            raise BackendError(
                f"compile: the cpu-test backend has no emulation registered for {entry_point!r}"
            )
        return CompiledKernel(entry_point, "cpu", ("cpu-test-emulation",), fn)

    def upload(self, host: npt.NDArray[np.generic]) -> Buffer:
        contiguous = np.ascontiguousarray(host)
        buffer = HostBuffer(contiguous.nbytes)
        buffer.data[:] = contiguous.reshape(-1).view(np.uint8)
        return buffer

    def empty(self, shape: tuple[int, ...], dtype: np.dtype[np.generic]) -> Buffer:
        count = int(np.prod(shape, dtype=np.int64))
        buffer = HostBuffer(count * dtype.itemsize)
        # Not zeroed, but not left to chance either: stale bytes could fake "written".
        buffer.data[:] = 0x5A
        return buffer

    def write(self, buffer: Buffer, host: npt.NDArray[np.generic]) -> None:
        raise BackendError("this cpu-test backend (buffers=fresh) cannot write into a buffer")

    def fill(self, buffer: Buffer, pattern: bytes) -> None:
        host = _buffer(buffer)
        if not pattern or host.nbytes % len(pattern):
            raise BackendError("fill: the pattern must tile the buffer exactly")
        tile = np.frombuffer(pattern, dtype=np.uint8)
        host.data.reshape(-1, len(pattern))[:] = tile

    def download(
        self, buffer: Buffer, shape: tuple[int, ...], dtype: np.dtype[np.generic]
    ) -> npt.NDArray[np.generic]:
        host = _buffer(buffer)
        return host.data.copy().view(dtype).reshape(shape)

    def _run(
        self,
        kernel: CompiledKernel,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared_mem_bytes: int,
        args: list[KernelArg],
    ) -> None:
        fn = kernel.handle
        if not callable(fn):
            raise BackendError("cpu-test kernel handle is not callable")
        try:
            fn(grid, block, shared_mem_bytes, args)
        except BackendError:
            raise
        except Exception as exc:  # the emulation's fault is the "kernel's" launch failure
            raise BackendError(f"launch failed: {type(exc).__name__}: {exc}") from exc

    def launch(
        self,
        kernel: CompiledKernel,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared_mem_bytes: int,
        args: list[KernelArg],
    ) -> None:
        self._run(kernel, grid, block, shared_mem_bytes, args)

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
        times: list[float] = []
        for _ in range(count):
            for target, source in refill_copies(refill, self._timed, self._poison_image):
                _buffer(target).data[:] = _buffer(source).data  # outside the timed region
            self._timed += 1
            start = time.perf_counter_ns()
            self._run(kernel, grid, block, shared_mem_bytes, args)
            times.append(float(time.perf_counter_ns() - start))
        return times

    def _poison_image(self, buffer: Buffer, pattern: bytes) -> Buffer:
        """A buffer of ``buffer``'s size holding ``pattern`` repeated (made once per buffer)."""
        owned = _buffer(buffer)
        cached = self._images.get(owned.address)
        if cached is not None and cached[0] == pattern:
            return cached[1]
        image = HostBuffer(owned.nbytes)
        self.fill(image, pattern)
        self._images[owned.address] = (pattern, image)
        return image

    def copy_bandwidth(self) -> float:
        """Bytes copied per second by a host memcpy of 32 MiB (best of 5)."""
        size = 32 * 1024 * 1024
        source = np.ones(size, dtype=np.uint8)
        target = np.empty_like(source)
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter_ns()
            np.copyto(target, source)
            best = min(best, float(time.perf_counter_ns() - start))
        return size / (max(best, 1.0) / 1e9)

    def close(self) -> None:
        return None


class CpuTestBackend(FreshBuffersCpuTestBackend):
    """The default cpu-test backend: can refill a buffer, so the harness reuses buffers."""

    writes_in_place = True

    def write(self, buffer: Buffer, host: npt.NDArray[np.generic]) -> None:
        """Copy ``host`` into an existing buffer (the harness reuses buffers across rounds)."""
        target = _buffer(buffer)
        contiguous = np.ascontiguousarray(host)
        if contiguous.nbytes != target.nbytes:
            raise BackendError(
                f"write: {contiguous.nbytes} bytes into a {target.nbytes}-byte buffer"
            )
        target.data[:] = contiguous.reshape(-1).view(np.uint8)
