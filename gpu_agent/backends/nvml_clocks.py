"""The GPU's clocks read through NVML while timed launches run (docs/design.md §11).

``nvidia-smi`` (gpu_agent/backends/cuda_fingerprint.py) takes tens of milliseconds a call and
is read idle, before and after a case. Timing needs the clock *during* the timed batches —
to know the GPU was not still ramping from idle while it was measured — so the backend reads
NVML (``libnvidia-ml.so.1``, which ships with the driver) directly, in microseconds, after
enqueuing a batch and before waiting for it, while the GPU is busy with that batch.

Every call degrades to None: no NVML, no such GPU, or an error reading it.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

NVML_SUCCESS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2


@dataclass(frozen=True)
class ClockReading:
    sm_mhz: float
    memory_mhz: float | None


class NvmlClocks:
    """Clock reads for one GPU (by its ``GPU-...`` UUID) over an NVML library handle."""

    def __init__(self, library: Any, device: Any) -> None:
        self._lib = library
        self._device = device

    @classmethod
    def open(cls, uuid: str | None, library: Any | None = None) -> NvmlClocks | None:
        """A reader for the GPU ``uuid``; None when NVML or the GPU cannot be reached."""
        if not uuid:
            return None
        try:
            lib = library if library is not None else ctypes.CDLL("libnvidia-ml.so.1")
            init = getattr(lib, "nvmlInit_v2", None) or lib.nvmlInit
            if init() != NVML_SUCCESS:
                return None
            device = ctypes.c_void_p()
            by_uuid = lib.nvmlDeviceGetHandleByUUID
            if by_uuid(uuid.encode("ascii"), ctypes.byref(device)) != NVML_SUCCESS:
                return None
        except (OSError, AttributeError, UnicodeEncodeError):
            return None
        return cls(lib, device)

    def _clock(self, which: int) -> float | None:
        value = ctypes.c_uint()
        try:
            status = self._lib.nvmlDeviceGetClockInfo(self._device, which, ctypes.byref(value))
        except (OSError, AttributeError):
            return None
        return float(value.value) if status == NVML_SUCCESS and value.value > 0 else None

    def read(self) -> ClockReading | None:
        sm = self._clock(NVML_CLOCK_SM)
        if sm is None:
            return None
        return ClockReading(sm_mhz=sm, memory_mhz=self._clock(NVML_CLOCK_MEM))
