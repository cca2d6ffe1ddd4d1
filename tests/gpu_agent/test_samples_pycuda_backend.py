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
        self.context_stack: list[str] = []
        self.event_clock = itertools.count()
        self.memsets: list[tuple[str, int, int, int]] = []
        driver = self

        class DeviceAllocation:
            def __init__(self, size: int) -> None:
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
            def push(self) -> None:
                driver.context_stack.append("primary")

            def pop(self) -> None:
                driver.context_stack.pop()

            def detach(self) -> None:
                pass

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

        class Module:
            def get_function(self, name: str) -> Function:
                if name not in driver.kernels:
                    raise FakeError(f"cuModuleGetFunction failed: named symbol not found {name}")
                return Function(name)

        self.module = types.SimpleNamespace(
            init=lambda: None,
            Device=Device,
            Context=Context,
            Stream=object,
            Event=Event,
            mem_alloc=DeviceAllocation,
            module_from_buffer=lambda cubin: Module(),
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


def test_upload_launch_download(fake: FakeDriver) -> None:
    backend = _backend(fake)
    kernel = backend.compile({"kernel.cu": "..."}, "kernel.cu::scale")
    assert isinstance(kernel, CompiledKernel) and kernel.architecture == "sm_90"
    assert kernel.flags == ("-cubin", "-arch=sm_90", *build.NVCC_FLAGS)
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
