"""Built-in kernel emulations for the cpu-test backend (honest ones only).

``kernel.cu::rmsnorm_h4096_bf16`` emulates the RMSNorm sample kernel
(gpu_agent/samples/rmsnorm_h4096_bf16) for SOL's ``rmsnorm_h4096`` (bfloat16, hidden size
4096) launched as one block per row::

    "launch": {"grid": ["batch_size"], "block": ["512"],
               "args": [{"input": "hidden_states"}, {"input": "weight"},
                        {"output": "output"}, {"scalar": "int32", "value": "batch_size"},
                        {"scalar": "float32", "value": 1e-05}]}

(the trailing eps is optional; 1e-5 when absent).

Like the kernel, it only writes the rows its grid covers, so a launch spec with too small a
grid leaves rows unwritten (and the harness says so). Adversarial variants live with the
tests (tests/gpu_agent/agent_emulations.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np
import numpy.typing as npt

from gpu_agent.backends.base import KernelArg
from gpu_agent.backends.cpu_test import HostBuffer, emulation

HIDDEN = 4096
EPS = 1e-5
RMSNORM_ENTRY_POINT = "kernel.cu::rmsnorm_h4096_bf16"


def rmsnorm_rows(
    hidden_states: npt.NDArray[np.generic], weight: npt.NDArray[np.generic], eps: float = EPS
) -> npt.NDArray[np.generic]:
    """RMSNorm in float32, rounded to bfloat16 (what the SOL reference computes)."""
    x = hidden_states.astype(np.float32)
    inv_rms = np.float32(1.0) / np.sqrt(
        np.mean(x * x, axis=-1, keepdims=True, dtype=np.float32) + np.float32(eps)
    )
    y: npt.NDArray[np.generic] = (x * inv_rms * weight.astype(np.float32)).astype(
        ml_dtypes.bfloat16
    )
    return y


@dataclass(frozen=True)
class RmsNormArgs:
    x: HostBuffer
    weight: HostBuffer
    out: HostBuffer
    rows: int
    covered: int  # rows the grid reaches: one block per row
    eps: float

    def arrays(
        self,
    ) -> tuple[npt.NDArray[np.generic], npt.NDArray[np.generic], npt.NDArray[np.generic]]:
        """Typed views of (input, weight, output), as the kernel sees its pointers."""
        return (
            self.x.view(ml_dtypes.bfloat16, (self.rows, HIDDEN)),
            self.weight.view(ml_dtypes.bfloat16, (HIDDEN,)),
            self.out.view(ml_dtypes.bfloat16, (self.rows, HIDDEN)),
        )


def unpack_rmsnorm_args(grid: tuple[int, int, int], args: list[KernelArg]) -> RmsNormArgs:
    """The sample's launch arguments: input, weight, output, int32 rows[, float32 eps]."""
    if len(args) not in (4, 5):
        raise TypeError(f"rmsnorm takes 4 or 5 arguments, got {len(args)}")
    x_buf, w_buf, out_buf, rows = args[:4]
    if not (
        isinstance(x_buf, HostBuffer)
        and isinstance(w_buf, HostBuffer)
        and isinstance(out_buf, HostBuffer)
        and isinstance(rows, np.integer)
    ):
        raise TypeError("rmsnorm takes (bf16*, bf16*, bf16*, int32[, float32])")
    eps = float(args[4]) if len(args) == 5 and isinstance(args[4], np.floating) else EPS
    n = int(rows)
    if x_buf.nbytes < n * HIDDEN * 2 or out_buf.nbytes < n * HIDDEN * 2:
        raise IndexError("illegal memory access: rows beyond the buffers")  # as on a GPU
    return RmsNormArgs(x_buf, w_buf, out_buf, n, min(n, grid[0]), eps)


@emulation(RMSNORM_ENTRY_POINT)
def rmsnorm_h4096(
    grid: tuple[int, int, int], block: tuple[int, int, int], shared: int, args: list[KernelArg]
) -> None:
    unpacked = unpack_rmsnorm_args(grid, args)
    x, w, out = unpacked.arrays()
    covered = unpacked.covered
    out[:covered] = rmsnorm_rows(x[:covered], w, unpacked.eps)
