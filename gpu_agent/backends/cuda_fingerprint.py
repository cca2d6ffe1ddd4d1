"""The PyCUDA backend's device fingerprint, from what the host says about the GPU.

PyCUDA gives the product, architecture and L2 size; the rest comes from outside it: the GPU's
UUID from the driver library through ctypes, clocks, temperature and the driver version from
``nvidia-smi`` (else ``/proc/driver/nvidia/version``). Every source is optional: a field
nobody can read is left out, and without any UUID the board's PCI bus id is hashed instead.
Nothing here imports PyCUDA.
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from gpu_agent.backends.base import DeviceInfo

# What results name as their measuring backend: a real GPU timed with CUDA events. Only this
# label moves evidence (domain.statements.MEASURING_BACKENDS); the CPU double says "cpu-test".
FINGERPRINT_BACKEND = "cuda"
NVIDIA_SMI_TIMEOUT_S = 10.0

SMI_FIELDS = (
    "uuid",
    "driver_version",
    "clocks.sm",
    "clocks.mem",
    "clocks.max.sm",
    "clocks.max.mem",
    "temperature.gpu",
)
# DeviceInfo.clocks_mhz key → the nvidia-smi field it is read from.
_CLOCK_FIELDS = (
    ("sm", "clocks.sm"),
    ("memory", "clocks.mem"),
    ("sm_max", "clocks.max.sm"),
    ("memory_max", "clocks.max.mem"),
)


def device_uuid(ordinal: int) -> str | None:
    """``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`` from the driver (as nvidia-smi prints it)."""
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    device = ctypes.c_int()
    if libcuda.cuDeviceGet(ctypes.byref(device), ctypes.c_int(ordinal)) != 0:
        return None
    raw = (ctypes.c_ubyte * 16)()
    getter = getattr(libcuda, "cuDeviceGetUuid_v2", None) or getattr(
        libcuda, "cuDeviceGetUuid", None
    )
    if getter is None or getter(ctypes.byref(raw), device) != 0:
        return None
    h = bytes(raw).hex()
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def nvidia_smi(selector: str) -> dict[str, str]:
    """SMI_FIELDS for one GPU (by UUID or index), or {} when nvidia-smi is unavailable."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {}
    try:
        done = subprocess.run(  # noqa: S603 - a fixed argv, no shell
            [
                exe,
                f"--query-gpu={','.join(SMI_FIELDS)}",
                "--format=csv,noheader,nounits",
                "-i",
                selector,
            ],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not lines:
        return {}
    values = [v.strip() for v in lines[0].split(",")]
    if len(values) != len(SMI_FIELDS):
        return {}
    return {k: v for k, v in zip(SMI_FIELDS, values, strict=True) if v and not v.startswith("[")}


def number(text: str | None) -> float | None:
    """A finite float from nvidia-smi's text, else None."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def proc_driver_version() -> str | None:
    try:
        text = Path("/proc/driver/nvidia/version").read_text("utf-8")
    except OSError:
        return None
    match = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)", text)
    return match.group(1) if match else None


def uuid_hash(uuid: str | None, pci_bus_id: Callable[[], str]) -> str:
    """sha256 hex of the UUID (never the UUID itself); of ``pci:<bus id>`` when there is none."""
    if uuid:
        return hashlib.sha256(uuid.strip().lower().encode("utf-8")).hexdigest()
    # No UUID anywhere: hash what identifies the board on this host, marked as such.
    bus = pci_bus_id().lower()
    return hashlib.sha256(f"pci:{bus}".encode()).hexdigest()


def device_info(
    *,
    product: str,
    architecture: str,
    l2_bytes: int,
    uuid: str | None,
    pci_bus_id: Callable[[], str],
    smi: Mapping[str, str],
    cuda_version: Callable[[], str | None],
) -> DeviceInfo:
    """The fingerprint from what PyCUDA said (product, architecture, L2) and the host said."""
    uuid_digest = uuid_hash(uuid, pci_bus_id)
    clocks: dict[str, float] = {}
    for key, field in _CLOCK_FIELDS:
        value = number(smi.get(field))
        if value is not None:
            clocks[key] = value
    driver = smi.get("driver_version") or proc_driver_version()
    return DeviceInfo(
        backend=FINGERPRINT_BACKEND,
        product=product,
        architecture=architecture,
        gpu_uuid_hash=uuid_digest,
        l2_bytes=l2_bytes,
        driver=driver,
        cuda=cuda_version(),
        clocks_mhz=clocks,
        temperature_c=number(smi.get("temperature.gpu")),
    )
