"""The PyCUDA backend without PyCUDA: lazy import, clear refusal, and its logic on a fake driver.

The fake ``pycuda.driver`` below keeps "device memory" in host byte arrays and runs a Python
stand-in for a kernel, so fills, copies, argument packing, timing batches, calibration and
error mapping are all exercised on CPU. The real driver is exercised by gpu_agent/selfcheck.sh.
"""

from __future__ import annotations

import importlib
import itertools
import struct
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from gpu_agent import build
from gpu_agent.backends.base import BackendError, CompiledKernel
from gpu_agent.backends.registry import GPU_BACKEND, create_backend

MODULE = "gpu_agent.backends.pycuda_backend"
BF16 = np.dtype(ml_dtypes.bfloat16)
L2_BYTES = 64 * 1024  # small: the fake memsets really write the flush buffer


def test_module_imports_without_pycuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pycuda", None)  # importing it now would fail
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    monkeypatch.delitem(sys.modules, "gpu_agent.backends.crosscheck", raising=False)
    module = importlib.import_module(MODULE)
    assert hasattr(module, "PyCudaBackend") and hasattr(module, "create_backend")
    importlib.import_module("gpu_agent.backends.crosscheck")


def test_constructing_without_pycuda_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pycuda", None)  # import pycuda → ImportError
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)
    module = importlib.import_module(MODULE)
    with pytest.raises(module.PyCudaUnavailable) as caught:
        module.PyCudaBackend()
    assert isinstance(caught.value, BackendError)
    assert "pip install" in str(caught.value) and "selfcheck.sh" in str(caught.value)
    with pytest.raises(BackendError, match="PyCUDA"):
        create_backend(GPU_BACKEND)


# --- a fake driver ----------------------------------------------------------------------------


class FakeError(Exception):
    pass


class FakeDriver:
    """Enough of pycuda.driver for the backend, with memory as host bytes."""

    def __init__(self) -> None:
        self.memory: dict[int, bytearray] = {}
        self._addresses = itertools.count(0x10_0000_0000, 0x1000_0000)
        self.kernels: dict[str, Callable[..., None]] = {}
        self.launches: list[dict[str, Any]] = []
        self.synchronized = 0
        self.context_stack: list[str] = []  # pycuda's own stack
        self.driver_stack: list[int] = []  # the CUDA driver's, per thread
        self.released = 0
        self.init_error: Exception | None = None
        self.refuse_cubins = 0  # module_from_buffer refuses this many loads, then accepts
        self.alloc_limit: int | None = None  # allocations above this many bytes fail
        self.event_clock = itertools.count()
        self.memsets: list[tuple[str, int, int, int]] = []
        driver = self

        class DeviceAllocation:
            def __init__(self, size: int) -> None:
                if driver.alloc_limit is not None and size > driver.alloc_limit:
                    raise FakeError("cuMemAlloc failed: out of memory")
                self.address = next(driver._addresses)
                driver.memory[self.address] = bytearray(size)

            def __int__(self) -> int:
                return self.address

            def free(self) -> None:
                driver.memory.pop(self.address, None)

        class Context:
            @staticmethod
            def synchronize() -> None:
                driver.synchronized += 1

        class PrimaryContext:
            # As pycuda's primary_context: detach() pushes it onto the driver's stack when
            # not current and releases it with cuDevicePrimaryCtxRelease, which pops nothing.
            handle = 0xC0FFEE

            def push(self) -> None:
                driver.context_stack.append("primary")
                driver.driver_stack.append(self.handle)

            def pop(self) -> None:
                driver.context_stack.pop()
                driver.driver_stack.pop()

            def detach(self) -> None:
                if "primary" not in driver.context_stack:
                    driver.driver_stack.append(self.handle)
                driver.released += 1

        class Device:
            @staticmethod
            def count() -> int:
                return 1

            def __init__(self, ordinal: int) -> None:
                self.ordinal = ordinal

            def name(self) -> str:
                return "NVIDIA H200"

            def compute_capability(self) -> tuple[int, int]:
                return (9, 0)

            def get_attribute(self, attribute: str) -> int:
                return {"L2": L2_BYTES}[attribute]

            def retain_primary_context(self) -> PrimaryContext:
                return PrimaryContext()

            def pci_bus_id(self) -> str:
                return "0000:19:00.0"

        class Event:
            def __init__(self) -> None:
                self.at: float | None = None

            def record(self, stream: object = None) -> None:
                self.at = float(next(driver.event_clock))

            def synchronize(self) -> None:
                pass

            def time_since(self, other: Event) -> float:
                assert self.at is not None and other.at is not None
                return (self.at - other.at) * 0.004  # ms: 4 µs per tick

        class Function:
            def __init__(self, name: str) -> None:
                self.name = name
                self.arg_format = ""

            def get_attribute(self, attribute: str) -> int:
                return {"MAX_THREADS": 1024, "SHARED": 0, "REGS": 32, "LOCAL": 0}[attribute]

            def set_attribute(self, attribute: str, value: int) -> None:
                self.dynamic_shared = value

            def prepare(self, arg_format: str) -> None:
                # pycuda packs with its own _pvt_struct, which has no 'e' (half).
                unknown = set(arg_format) - set("xbBchHiIlLnNqQ?fdFDPs")
                if unknown:
                    raise FakeError(f"bad char in struct format: {sorted(unknown)}")
                self.arg_format = arg_format

            def prepared_async_call(
                self,
                grid: tuple[int, ...],
                block: tuple[int, ...],
                stream: object,
                *args: Any,
                shared_size: int = 0,
            ) -> None:
                packed = struct.pack(self.arg_format, *args)  # as pycuda packs them
                driver.launches.append(
                    {"grid": grid, "block": block, "shared": shared_size, "packed": packed}
                )
                driver.kernels[self.name](driver, *args)

        def module_from_buffer(cubin: bytes) -> Module:
            if driver.refuse_cubins:
                driver.refuse_cubins -= 1
                raise FakeError("cuModuleLoadData failed: device kernel image is invalid")
            return Module()

        def init() -> None:
            if driver.init_error is not None:
                raise driver.init_error

        class Module:
            def get_function(self, name: str) -> Function:
                if name not in driver.kernels:
                    raise FakeError(f"cuModuleGetFunction failed: named symbol not found {name}")
                return Function(name)

        self.module = types.SimpleNamespace(
            init=init,
            Device=Device,
            Context=Context,
            Stream=object,
            Event=Event,
            mem_alloc=DeviceAllocation,
            module_from_buffer=module_from_buffer,
            device_attribute=types.SimpleNamespace(L2_CACHE_SIZE="L2"),
            function_attribute=types.SimpleNamespace(
                MAX_THREADS_PER_BLOCK="MAX_THREADS",
                SHARED_SIZE_BYTES="SHARED",
                NUM_REGS="REGS",
                LOCAL_SIZE_BYTES="LOCAL",
                MAX_DYNAMIC_SHARED_SIZE_BYTES="DYN",
            ),
            get_driver_version=lambda: 13000,
            memcpy_htod=self.memcpy_htod,
            memcpy_dtoh=self.memcpy_dtoh,
            memcpy_dtod_async=self.memcpy_dtod_async,
            memset_d8_async=lambda p, v, n, s=None: self.memset("d8", p, v, n),
            memset_d8=lambda p, v, n: self.memset("d8", p, v, n),
            memset_d16=lambda p, v, n: self.memset("d16", p, v, n),
            memset_d32=lambda p, v, n: self.memset("d32", p, v, n),
            memset_d32_async=lambda p, v, n, s=None: self.memset("d32-async", p, v, n),
        )

    def region(self, pointer: int, nbytes: int) -> memoryview:
        for base, data in self.memory.items():
            if base <= pointer and pointer + nbytes <= base + len(data):
                return memoryview(data)[pointer - base : pointer - base + nbytes]
        raise FakeError(f"illegal address {pointer:#x}")

    def memcpy_htod(self, pointer: int, host: np.ndarray) -> None:
        self.region(pointer, host.nbytes)[:] = host.tobytes()

    def memcpy_dtoh(self, host: np.ndarray, pointer: int) -> None:
        host[:] = np.frombuffer(self.region(pointer, host.nbytes), dtype=host.dtype)

    def memcpy_dtod_async(self, target: int, source: int, nbytes: int, stream: object) -> None:
        self.region(target, nbytes)[:] = self.region(source, nbytes)

    def memset(self, kind: str, pointer: int, value: int, count: int) -> None:
        width = {"d8": 1, "d16": 2, "d32": 4, "d32-async": 4}[kind]
        self.memsets.append((kind, pointer, value, count))
        self.region(pointer, count * width)[:] = value.to_bytes(width, "little") * count


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDriver]:
    driver = FakeDriver()
    package = types.ModuleType("pycuda")
    package.driver = driver.module  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pycuda", package)
    monkeypatch.setitem(sys.modules, "pycuda.driver", driver.module)
    module = importlib.import_module(MODULE)
    monkeypatch.setattr(
        module, "_device_uuid", lambda ordinal: "GPU-0123abcd-0000-1111-2222-333344445555"
    )
    monkeypatch.setattr(
        module,
        "_nvidia_smi",
        lambda selector: {
            "clocks.sm": "1980",
            "temperature.gpu": "41",
            "driver_version": "580.159.04",
        },
    )
    monkeypatch.setattr(module, "MIN_FLUSH_BYTES", 4096)
    monkeypatch.setattr(module.LibcudaStack, "load", classmethod(lambda cls: _FakeStack(driver)))
    driver.kernels["kernelindex_probe"] = lambda driver, *args: None
    driver.kernels["kernelindex_empty"] = lambda driver, *args: None

    def fake_build(
        sources: dict[str, str], entry_point: str, architecture: str, **_: Any
    ) -> build.BuildResult:
        file, function = build.split_entry_point(entry_point, sources)
        return build.BuildResult(
            b"\x7fELF",
            architecture,
            file,
            function,
            build.build_flags(architecture),
            "13.0.88",
            "",
            0.0,
        )

    monkeypatch.setattr(module.build, "compile_cubin", fake_build)
    yield driver


class _FakeStack:
    """The driver's context stack as cuda_context.DriverStack sees it."""

    def __init__(self, driver: FakeDriver) -> None:
        self.driver = driver

    def current(self) -> int | None:
        return self.driver.driver_stack[-1] if self.driver.driver_stack else None

    def pop(self) -> None:
        self.driver.driver_stack.pop()


def _double_kernel(driver: FakeDriver, source: int, target: int, count: Any, scale: Any) -> None:
    """A stand-in kernel: target[i] = source[i] * scale (float32)."""
    n = int(count)
    values = np.frombuffer(driver.region(source, 4 * n), dtype=np.float32)
    driver.region(target, 4 * n)[:] = (values * np.float32(scale)).tobytes()


def _backend(fake: FakeDriver) -> Any:
    module = importlib.import_module(MODULE)
    fake.kernels["scale"] = _double_kernel
    return module.PyCudaBackend()


def test_device_fingerprint(fake: FakeDriver) -> None:
    backend = _backend(fake)
    info = backend.device()
    assert (info.backend, info.product, info.architecture) == ("cuda", "NVIDIA H200", "sm_90")
    assert info.l2_bytes == L2_BYTES
    assert len(info.gpu_uuid_hash) == 64 and "0123abcd" not in info.gpu_uuid_hash
    assert info.driver == "580.159.04" and info.cuda == "13.0"
    assert info.clocks_mhz == {"sm": 1980.0} and info.temperature_c == 41.0
    backend.close()
    assert fake.context_stack == []
    assert fake.driver_stack == []  # the released primary context is current nowhere
    assert fake.released == 1


def test_releasing_a_primary_context_leaves_none_current(fake: FakeDriver) -> None:
    from gpu_agent.backends.cuda_context import release_primary

    backend = _backend(fake)
    context = backend._context
    assert fake.driver_stack == [context.handle]
    context.pop()  # what close() did before: pop, then detach...
    context.detach()
    assert fake.driver_stack == [context.handle]  # ...left the released context current
    fake.driver_stack.clear()
    fake.context_stack.append("primary")
    fake.driver_stack.append(context.handle)
    assert release_primary(context, _FakeStack(fake)) == 1
    assert fake.driver_stack == []


def test_upload_launch_download(fake: FakeDriver) -> None:
    backend = _backend(fake)
    kernel = backend.compile({"kernel.cu": "..."}, "kernel.cu::scale")
    # Built for the arch-specific target (wgmma, TMA, setmaxnreg), the device stays sm_90.
    assert isinstance(kernel, CompiledKernel) and kernel.architecture == "sm_90a"
    assert kernel.flags == ("-cubin", "-arch=sm_90a", *build.NVCC_FLAGS)
    assert backend.architecture == "sm_90" and backend.target == "sm_90a"
    host = np.arange(8, dtype=np.float32)
    source = backend.upload(host)
    target = backend.empty((8,), np.dtype(np.float32))
    backend.launch(kernel, (1, 1, 1), (8, 1, 1), 0, [source, target, np.int32(8), np.float32(2)])
    out = backend.download(target, (8,), np.dtype(np.float32))
    np.testing.assert_array_equal(out, host * 2)
    launch = fake.launches[-1]
    assert struct.unpack("PPif", launch["packed"]) == (
        int(source.pointer),
        int(target.pointer),
        8,
        2.0,
    )
    backend.close()
    assert fake.memory == {}  # every allocation freed on close


def test_fill_patterns(fake: FakeDriver) -> None:
    backend = _backend(fake)
    for pattern, dtype, kind in [
        (b"\x7f\xdb"[::-1], BF16, "d16"),
        ((0x7FFADBAD).to_bytes(4, "little"), np.dtype(np.float32), "d32"),
        (b"\xff\xff", np.dtype(np.int16), "d8"),
        ((0x7FFBADBADBADBADB).to_bytes(8, "little"), np.dtype(np.float64), None),
    ]:
        buffer = backend.empty((6,), dtype)
        backend.fill(buffer, pattern)
        raw = backend.download(buffer, (6 * dtype.itemsize,), np.dtype(np.uint8))
        assert raw.tobytes() == pattern * 6
        if kind is not None:
            assert fake.memsets[-1][0] == kind
    backend.close()


def test_bfloat16_arrays_round_trip(fake: FakeDriver) -> None:
    backend = _backend(fake)
    host = np.linspace(-3, 3, 4096).astype(BF16).reshape(2, 2048)
    back = backend.download(backend.upload(host), (2, 2048), BF16)
    assert back.dtype == BF16 and np.array_equal(back.view(np.uint16), host.view(np.uint16))
    backend.close()


def test_time_launches_flushes_before_every_sample(fake: FakeDriver) -> None:
    backend = _backend(fake)
    kernel = backend.compile({"kernel.cu": ""}, "kernel.cu::scale")
    a, b = backend.upload(np.ones(4, np.float32)), backend.empty((4,), np.dtype(np.float32))
    args = [a, b, np.int32(4), np.float32(3)]
    times = backend.time_launches(kernel, (1, 1, 1), (4, 1, 1), 0, args, 300)
    assert len(times) == 300 and all(t == pytest.approx(4000.0) for t in times)  # 1 tick, ns
    flushes = [m for m in fake.memsets if m[0] == "d32-async"]
    assert len(flushes) == 300
    flush_bytes = flushes[0][3] * 4
    assert flush_bytes >= 2 * L2_BYTES
    assert len({m[2] for m in flushes}) > 1  # not the same word every time
    assert backend.time_launches(kernel, (1, 1, 1), (4, 1, 1), 0, args, 0) == []
    backend.close()


def test_copy_bandwidth_counts_bytes_copied(
    fake: FakeDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = importlib.import_module(MODULE)
    monkeypatch.setattr(module, "COPY_BYTES", 1 << 20)
    backend = _backend(fake)
    bandwidth = backend.copy_bandwidth()
    # Each copy spans one tick of the fake clock (4 µs): 1 MiB / 4 µs.
    assert bandwidth == pytest.approx((1 << 20) / 4e-6)
    backend.close()
    assert fake.memory == {}


def test_errors_become_backend_errors(fake: FakeDriver) -> None:
    backend = _backend(fake)
    with pytest.raises(BackendError, match='extern "C"'):
        backend.compile({"kernel.cu": ""}, "kernel.cu::missing")
    kernel = backend.compile({"kernel.cu": ""}, "kernel.cu::scale")
    with pytest.raises(BackendError, match="threads"):
        backend.launch(kernel, (1, 1, 1), (1024, 2, 1), 0, [])
    with pytest.raises(BackendError, match="numpy scalar"):
        backend.launch(kernel, (1, 1, 1), (1, 1, 1), 0, [3])  # a Python int is ambiguous
    other = types.SimpleNamespace(nbytes=4)
    with pytest.raises(BackendError, match="not a buffer of this backend"):
        backend.fill(other, b"\x00")
    with pytest.raises(BackendError, match="bytes"):
        backend.download(backend.empty((2,), np.dtype(np.float32)), (4,), np.dtype(np.float32))
    backend.close()
    with pytest.raises(BackendError, match="closed"):
        backend.empty((1,), np.dtype(np.float32))


def test_scalar_formats() -> None:
    module = importlib.import_module("gpu_agent.backends.cuda_kernel_args")
    assert module.scalar_format(np.int32(-2), 0) == ("i", -2)
    assert module.scalar_format(np.uint64(7), 0)[0] == "Q"
    assert module.scalar_format(np.float32(1.5), 0)[0] == "f"
    fmt, bits = module.scalar_format(BF16.type(1.0), 0)
    assert fmt == "H" and int(bits) == 0x3F80
    with pytest.raises(BackendError, match="cannot be passed"):
        module.scalar_format(np.complex128(1), 0)


def test_registry_factory_options(fake: FakeDriver) -> None:
    module = importlib.import_module(MODULE)
    fake.kernels["scale"] = _double_kernel
    with pytest.raises(BackendError, match="unknown"):
        module.create_backend(colour="blue")
    backend = create_backend(GPU_BACKEND, {"device": "0"})
    assert backend.name == "pycuda"
    backend.close()
    with pytest.raises(BackendError, match="no CUDA device 3"):
        module.create_backend(device="3")


# --- what the reruns rely on: refills, clocks, whose fault --------------------------------


def _watched_kernel(driver: FakeDriver, source: int, target: int, count: Any) -> None:
    """ "Computes only when checked": doubles source into target only if target[0] is NaN."""
    n = int(count)
    out = np.frombuffer(driver.region(target, 4 * n), dtype=np.float32)
    values = np.frombuffer(driver.region(source, 4 * n), dtype=np.float32)
    driver.seen.append(float(values[0]))
    if np.isnan(out[0]):
        driver.region(target, 4 * n)[:] = (values * np.float32(2)).tobytes()
        driver.computed += 1


def test_write_refills_the_same_buffer(fake: FakeDriver) -> None:
    backend = _backend(fake)
    buffer = backend.upload(np.zeros(4, np.float32))
    backend.write(buffer, np.arange(4, dtype=np.float32))
    assert backend.download(buffer, (4,), np.dtype(np.float32)).tolist() == [0, 1, 2, 3]
    with pytest.raises(BackendError, match="write: 8 bytes into a 16-byte buffer"):
        backend.write(buffer, np.zeros(2, np.float32))
    backend.close()


def test_refilled_timed_launches_look_like_checked_ones(fake: FakeDriver) -> None:
    from gpu_agent.backends.timing_refill import TimingRefill
    from gpu_agent.checks import poison_pattern

    fake.seen, fake.computed = [], 0  # type: ignore[attr-defined]
    fake.kernels["watched"] = _watched_kernel
    backend = _backend(fake)
    kernel = backend.compile({"kernel.cu": ""}, "kernel.cu::watched")
    source, target = backend.upload(np.ones(4, np.float32)), backend.empty((4,), np.dtype("f4"))
    poison = poison_pattern(np.dtype(np.float32))
    backend.fill(target, poison)
    args = [source, target, np.int32(4)]
    backend.launch(kernel, (1, 1, 1), (4, 1, 1), 0, args)  # the checked launch computes
    backend.time_launches(kernel, (1, 1, 1), (4, 1, 1), 0, args, 5)
    assert fake.computed == 1  # type: ignore[attr-defined]  # unrefilled: the cheat idles

    variants = tuple(backend.upload(np.full(4, v, np.float32)) for v in (10.0, 20.0, 30.0))
    refill = TimingRefill(outputs=((target, poison),), inputs=((source, variants),))
    backend.time_launches(kernel, (1, 1, 1), (4, 1, 1), 0, args, 300, refill=refill)
    assert fake.computed == 301  # type: ignore[attr-defined]  # every timed launch computed
    timed = fake.seen[6:]  # type: ignore[attr-defined]
    # Fresh inputs in the same buffer, rotating over the backend's life (5 launches before).
    assert timed[:6] == [30.0, 10.0, 20.0, 30.0, 10.0, 20.0] and len(timed) == 300
    # The refill copies come before the flush, so the flush evicts them too.
    kinds = [m[0] for m in fake.memsets[-3:]]
    assert kinds[-1] == "d32-async"
    short = backend.upload(np.ones(2, np.float32))
    with pytest.raises(BackendError, match="variants"):
        TimingRefill(inputs=((source, (short,)),))
    backend.close()
    assert fake.memory == {}


def test_clocks_are_read_during_every_timed_batch(
    fake: FakeDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpu_agent.backends.nvml_clocks import ClockReading

    module = importlib.import_module(MODULE)
    readings = iter(float(v) for v in range(1400, 2000, 10))

    class Clocks:
        @classmethod
        def open(cls, uuid: str | None) -> Clocks:
            return cls()

        def read(self) -> ClockReading:
            return ClockReading(next(readings), 3201.0)

    monkeypatch.setattr(module, "NvmlClocks", Clocks)
    backend = _backend(fake)
    assert backend.sm_clock_mhz() is None
    kernel = backend.compile({"kernel.cu": ""}, "kernel.cu::scale")
    args = [backend.upload(np.ones(4, np.float32)), backend.empty((4,), np.dtype("f4"))]
    args += [np.int32(4), np.float32(3)]
    backend.time_launches(kernel, (1, 1, 1), (4, 1, 1), 0, args, 300)  # two batches
    assert [c.sm_mhz for c in backend.timing_clocks()] == [1400.0, 1410.0]
    assert backend.sm_clock_mhz() == 1410.0
    backend.close()


def test_float16_scalars_are_packed_as_pycuda_can(fake: FakeDriver) -> None:
    from gpu_agent.backends.cuda_kernel_args import PVT_STRUCT_CHARS, call_value, scalar_format

    backend = _backend(fake)
    kernel = backend.compile({"kernel.cu": ""}, "kernel.cu::scale")
    source, target = backend.upload(np.ones(4, np.float32)), backend.empty((4,), np.dtype("f4"))
    fake.kernels["scale"] = lambda driver, s, t, n, scale: None
    backend.launch(kernel, (1, 1, 1), (4, 1, 1), 0, [source, target, np.int32(4), np.float16(1)])
    assert struct.unpack("PPiH", fake.launches[-1]["packed"])[3] == 0x3C00  # half 1.0
    assert scalar_format(np.float16(1.0), 0) == ("H", 0x3C00)
    assert call_value(np.float16(1.0), 0) == np.uint16(0x3C00)
    assert call_value(np.float32(1.5), 0) == np.float32(1.5)
    for dtype in (np.int8, np.uint16, np.int64, np.float16, np.float32, np.float64, BF16):
        assert set(scalar_format(np.dtype(dtype).type(1), 0)[0]) <= PVT_STRUCT_CHARS
    backend.close()


def test_the_agents_failures_are_marked_as_the_agents(
    fake: FakeDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = importlib.import_module(MODULE)
    fake.kernels["scale"] = _double_kernel
    fake.alloc_limit = 64 * 1024  # below the flush buffer (2 × L2)
    with pytest.raises(BackendError, match="flush buffer") as caught:
        module.PyCudaBackend()
    assert caught.value.agent_fault is True
    fake.alloc_limit = None
    fake.init_error = FakeError("cuInit failed: no CUDA-capable device is detected")
    with pytest.raises(BackendError, match="initialisation") as caught:
        module.PyCudaBackend()
    assert caught.value.agent_fault is True
    fake.init_error = None

    backend = module.PyCudaBackend()
    fake.refuse_cubins = 2  # the submission's cubin and the probe's: the driver is at fault
    with pytest.raises(BackendError, match="refused the cubin") as caught:
        backend.compile({"kernel.cu": ""}, "kernel.cu::scale")
    assert caught.value.agent_fault is True
    fake.refuse_cubins = 1  # only the submission's: its own fault
    with pytest.raises(BackendError, match="refused the cubin") as caught:
        backend.compile({"kernel.cu": ""}, "kernel.cu::scale")
    assert caught.value.agent_fault is False

    fake.alloc_limit = 1024
    with pytest.raises(BackendError, match="cannot allocate") as caught:
        backend.empty((1024,), np.dtype(np.float32))  # before any submitted code ran
    assert caught.value.agent_fault is True
    kernel = backend.compile({"kernel.cu": ""}, "kernel.cu::scale")
    a, b = backend.upload(np.ones(4, np.float32)), backend.empty((4,), np.dtype(np.float32))
    backend.launch(kernel, (1, 1, 1), (4, 1, 1), 0, [a, b, np.int32(4), np.float32(2)])
    with pytest.raises(BackendError, match="cannot allocate") as caught:
        backend.empty((1024,), np.dtype(np.float32))  # may be the kernel's sticky error now
    assert caught.value.agent_fault is False
    fake.alloc_limit = None
    backend.close()


def test_event_overhead_is_an_empty_kernel_timed_like_the_rest(fake: FakeDriver) -> None:
    backend = _backend(fake)
    assert backend.event_overhead_ns(samples=50) == pytest.approx(4000.0)  # one fake tick
    assert backend._launched is False  # the agent's own kernel is not the submission's
    backend.close()
