"""The PyCUDA backend's timing stream: L2 flush, device-event samples, clocks read meanwhile.

Split from ``pycuda_backend.py`` (whose docstring says what the loop measures and why). The
driver module is handed in; nothing here imports PyCUDA.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from gpu_agent.backends.base import BackendUnavailable
from gpu_agent.backends.nvml_clocks import ClockReading, NvmlClocks

# A device-to-device copy to enqueue before a sample: (target pointer, source pointer, bytes).
Copy = tuple[int, int, int]


class StreamTimer:
    """One stream with an L2 flush buffer of ``flush_bytes``, allocated when made — before
    any submitted code runs, so failing to get either is the agent's failure."""

    def __init__(self, cuda: Any, flush_bytes: int, nvml: NvmlClocks | None) -> None:
        self._cuda = cuda
        self._nvml = nvml
        self._round = 0
        self.clocks: list[ClockReading] = []
        self.launches = 0  # samples timed so far, over the timer's life
        self.flush_bytes = flush_bytes - flush_bytes % 4
        try:
            self.stream: Any = cuda.Stream()
        except Exception as exc:
            raise BackendUnavailable(f"cannot create a CUDA stream: {exc}") from exc
        try:
            self._flush: Any = cuda.mem_alloc(self.flush_bytes)
        except Exception as exc:
            raise BackendUnavailable(
                f"cannot allocate the {self.flush_bytes}-byte L2 flush buffer: {exc}"
            ) from exc

    def flush_l2(self) -> None:
        # A different word each time, so no layer can treat the memset as a no-op.
        self._round = (self._round + 1) & 0xFFFF
        self._cuda.memset_d32_async(
            int(self._flush), 0x5EED0000 | self._round, self.flush_bytes // 4, self.stream
        )

    def batch(
        self, count: int, copies: Callable[[int], list[Copy]], launch: Callable[[], None]
    ) -> list[float]:
        """``count`` samples in ns: for each, ``copies(sample number)`` (the refill), the
        flush, start event, ``launch()``, end event; the clocks read while the GPU runs the
        batch; one synchronisation."""
        cuda = self._cuda
        events: list[tuple[Any, Any]] = []
        for _ in range(count):
            for target, source, nbytes in copies(self.launches):
                cuda.memcpy_dtod_async(target, source, nbytes, self.stream)
            self.launches += 1
            start, end = cuda.Event(), cuda.Event()
            self.flush_l2()
            start.record(self.stream)
            launch()
            end.record(self.stream)
            events.append((start, end))
        if not events:
            return []
        self._read_clocks()  # the GPU is still busy with this batch
        events[-1][1].synchronize()
        return [float(end.time_since(start)) * 1e6 for start, end in events]

    def _read_clocks(self) -> None:
        reading = self._nvml.read() if self._nvml is not None else None
        if reading is not None:
            self.clocks.append(reading)

    def timed_copy(self, target: int, source: int, nbytes: int) -> float:
        """One event-timed device-to-device copy, in ms."""
        cuda = self._cuda
        start, end = cuda.Event(), cuda.Event()
        start.record(self.stream)
        cuda.memcpy_dtod_async(target, source, nbytes, self.stream)
        end.record(self.stream)
        end.synchronize()
        return float(end.time_since(start))

    def close(self) -> None:
        with contextlib.suppress(Exception):  # already freed, or the context is gone
            self._flush.free()
        self.stream = None
