"""CPU emulations of the sample kernels, for the ``cpu-test`` backend (CI has no GPU).

Importing this module registers one emulation per sample entry point (the honest RMSNorm is
built in: ``gpu_agent/backends/cpu_emulations.py``). Each does what its ``kernel.cu`` does,
cheat included, so ``gpu_agent/selfcheck.py --backend cpu-test`` runs the whole sample set
through the production harness and checks that every cheat is caught by the check the
sample names. It tests the samples' *design* and the harness on CPU; the CUDA code itself
is compiled in CI (tests/gpu_agent/test_samples_build.py) and run on a GPU by selfcheck.sh.

Select it with the cpu-test backend option ``emulation_modules=gpu_agent.samples.emulations``.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np

from gpu_agent.backends.base import KernelArg
from gpu_agent.backends.cpu_emulations import HIDDEN, rmsnorm_rows, unpack_rmsnorm_args
from gpu_agent.backends.cpu_test import HostBuffer, emulation
from gpu_agent.samples import SAMPLES_DIR, SECRET_SAMPLE

MODULE = __name__
BF16 = np.dtype(ml_dtypes.bfloat16)
CACHE_ROWS = 256  # as kCacheRows in adv_cached_result/kernel.cu
SKEW = np.float32(1.125)  # as in adv_secret_round_wrong/kernel.cu

Grid = tuple[int, int, int]


def _int(value: KernelArg, what: str) -> int:
    if not isinstance(value, np.integer):
        raise TypeError(f"{what} must be an integer scalar")
    return int(value)


@emulation("kernel.cu::silu_and_mul_bf16")
def silu_and_mul(grid: Grid, block: Grid, shared: int, args: list[KernelArg]) -> None:
    x_buf, out_buf, tokens_arg, d_arg = args
    assert isinstance(x_buf, HostBuffer) and isinstance(out_buf, HostBuffer)
    tokens, d = _int(tokens_arg, "tokens"), _int(d_arg, "d")
    if x_buf.nbytes < tokens * 2 * d * 2 or out_buf.nbytes < tokens * d * 2:
        raise IndexError("illegal memory access: tokens beyond the buffers")
    covered_tokens = min(tokens, grid[0])
    covered_cols = min(d, grid[1] * block[0] * 8)  # one 8-value vector per thread
    x = x_buf.view(BF16, (tokens, 2 * d)).astype(np.float32)
    out = out_buf.view(BF16, (tokens, d))
    gate = x[:covered_tokens, :covered_cols]
    up = x[:covered_tokens, d : d + covered_cols]
    with np.errstate(over="ignore"):
        silu = gate / (np.float32(1.0) + np.exp(-gate))
    out[:covered_tokens, :covered_cols] = (silu * up).astype(BF16)


@emulation("kernel.cu::rmsnorm_unwritten_tail")
def unwritten_tail(grid: Grid, block: Grid, shared: int, args: list[KernelArg]) -> None:
    a = unpack_rmsnorm_args(grid, args)
    x, w, out = a.arrays()
    result = rmsnorm_rows(x[: a.covered], w, a.eps)
    if a.covered == a.rows and a.rows > 0:  # the last row's last vector is never stored
        result[-1, -8:] = out[a.rows - 1, -8:]
    out[: a.covered] = result


@emulation("kernel.cu::rmsnorm_in_place_too")
def in_place_too(grid: Grid, block: Grid, shared: int, args: list[KernelArg]) -> None:
    a = unpack_rmsnorm_args(grid, args)
    x, w, out = a.arrays()
    result = rmsnorm_rows(x[: a.covered], w, a.eps)
    out[: a.covered] = result
    x[: a.covered] = result  # the cheat: the input is overwritten too


# Module state stands in for the kernel's __device__ globals: one per process, as the
# harness runs each case in a fresh child (a fresh CUDA context on a GPU).
_cache = np.zeros((CACHE_ROWS, HIDDEN), dtype=BF16)
_cache_key = {"rows": 0}  # row count the cache holds a result for (0: none)


@emulation("kernel.cu::rmsnorm_cached")
def cached(grid: Grid, block: Grid, shared: int, args: list[KernelArg]) -> None:
    a = unpack_rmsnorm_args(grid, args)
    x, w, out = a.arrays()
    cacheable = a.rows <= CACHE_ROWS
    if cacheable and _cache_key["rows"] == a.rows:
        out[: a.covered] = _cache[: a.covered]  # the cheat: the stale result
    else:
        result = rmsnorm_rows(x[: a.covered], w, a.eps)
        out[: a.covered] = result
        if cacheable:
            _cache[: a.covered] = result
    _cache_key["rows"] = a.rows if cacheable else 0


def _public_table() -> set[tuple[int, int]]:
    """The (word0, word1) pairs in adv_secret_round_wrong/kernel.cu, as the kernel has them."""
    text = (SAMPLES_DIR / SECRET_SAMPLE / "kernel.cu").read_text("utf-8")
    pairs = re.findall(r"\{0x([0-9a-f]{8})u, 0x([0-9a-f]{8})u\}", text)
    return {(int(a, 16), int(b, 16)) for a, b in pairs}


@emulation("kernel.cu::rmsnorm_public_rounds_only")
def public_rounds_only(grid: Grid, block: Grid, shared: int, args: list[KernelArg]) -> None:
    a = unpack_rmsnorm_args(grid, args)
    x, w, out = a.arrays()
    words = a.x.view(np.uint32)[:2]
    known = (int(words[0]), int(words[1])) in _public_table()
    result = rmsnorm_rows(x[: a.covered], w, a.eps)
    if not known:  # the cheat: right on the public inputs only
        result = (result.astype(np.float32) * SKEW).astype(BF16)
    out[: a.covered] = result


@emulation("kernel.cu::rmsnorm_only_when_watched")
def only_when_watched(grid: Grid, block: Grid, shared: int, args: list[KernelArg]) -> None:
    a = unpack_rmsnorm_args(grid, args)
    x, w, out = a.arrays()
    blocks = min(grid[0], a.rows)
    # Block b owns rows b, b + grid, ...; it works only if its first row's first value is NaN.
    watched = np.isnan(out[:blocks, 0].astype(np.float32))
    if not watched.any():
        return  # the cheat: nothing to do when nobody is looking
    mine = watched[np.arange(a.rows) % grid[0]]
    out[mine] = rmsnorm_rows(x[mine], w, a.eps)
