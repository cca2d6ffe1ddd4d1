"""Adversarial kernel emulations for the cpu-test backend: each must be caught.

Every one is an RMSNorm (``rmsnorm_h4096``, the sample's launch: grid = batch_size rows,
args = input, weight, output, int32 rows[, float32 eps]) that cheats in one way, registered
as ``kernel.cu::<name>``. The ``adv_`` names keep them apart from the emulations of the CUDA
adversarial samples (gpu_agent/samples/emulations.py), which model those kernels exactly.
Which check must catch which:

==============================  ===============================================================
``adv_unwritten_tail``          poisoning: the last 8 values of the last row are never written
                                (under 1 %: the 0.99 matched ratio alone would pass it)
``adv_in_place_too``            mutation: also writes its result into the input
``adv_cached_per_shape``        fresh inputs: memoises its result per row count, so the second
                                round gets the first round's answer
``adv_cached_per_pointer``      fresh inputs in reused buffers: memoises per input address
``adv_public_rounds_only``      the nonce round: right only on the public rounds' inputs of
                                job :data:`MEMORIZED_JOB_ID` (public seeds are derivable)
``adv_only_when_watched``       computes only when the output is poisoned (NaN): every
                                correctness round, even the one after timing, is right, and
                                timed launches would be empty (a sub-floor time) — but the
                                refill poisons every timed launch's output, so it is timed
                                working: *neutralised*, not caught
``adv_idle_on_seen_inputs``     the check of the last timed launch: skips the work for inputs
                                it has seen before, trusting the output to hold their answer
                                (timed launches rotate through a few variants); the refill
                                poisoned that output, so it is left unwritten
``adv_lazy_after_3``            the post-timing round: honest for 3 launches, then idle
``adv_crash_on_3_rows``         process isolation: kills its process on a 3-row workload
``adv_hang_on_5_rows``          the case timeout: never returns on a 5-row workload
``adv_faults``                  launch errors: every launch is an illegal memory access
``agent_device_lost``           not a cheat: the *agent's* device fails (an error marked
                                ``agent_fault``), so the job aborts and nothing is signed
==============================  ===============================================================

State (caches, launch counters) is per process, like device memory per context: each case
runs in a fresh child, as on a GPU.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
import numpy.typing as npt

from gpu_agent import inputs
from gpu_agent.backends.base import BackendError, KernelArg
from gpu_agent.backends.cpu_emulations import HIDDEN, rmsnorm_rows, unpack_rmsnorm_args
from gpu_agent.backends.cpu_test import emulation
from gpu_agent.checks import poisoned
from gpu_agent.definition import parse_definition
from gpu_agent.workload import parse_workload

Grid = tuple[int, int, int]

# The job whose public rounds ``adv_public_rounds_only`` has "seen", and its workloads
# (uuid → batch_size). Public seeds derive from the job id and the workload only.
MEMORIZED_JOB_ID = "5eed5eed-0000-4000-8000-00000000a11e"
MEMORIZED_CASES = {"memorized-rows-4": 4, "memorized-rows-6": 6}
RMSNORM_DEFINITION: dict[str, Any] = {
    "name": "rmsnorm_h4096",
    "axes": {"batch_size": {"type": "var"}, "hidden_size": {"type": "const", "value": HIDDEN}},
    "inputs": {
        "hidden_states": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"},
        "weight": {"shape": ["hidden_size"], "dtype": "bfloat16"},
    },
    "outputs": {"output": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"}},
}


@emulation("kernel.cu::adv_unwritten_tail")
def unwritten_tail(grid: Grid, block: Grid, shared: int, args: list[KernelArg]) -> None:
    a = unpack_rmsnorm_args(grid, args)
    x, w, out = a.arrays()
    result = rmsnorm_rows(x[: a.covered], w, a.eps)
    out[: a.covered] = result
    if a.covered:
        # Put the poison back where it was: those 8 values are simply never stored.
        out[a.covered - 1, -8:] = poison_like(out[a.covered - 1, -8:])


def poison_like(values: npt.NDArray[np.generic]) -> npt.NDArray[np.generic]:
    """What the harness filled in (the kernel never touched it): the bf16 poison NaN."""
    return poisoned(values.shape, values.dtype)


@emulation("kernel.cu::adv_in_place_too")
def in_place_too(grid: Grid, block: Grid, shared: int, args: list[KernelArg]) -> None:
    a = unpack_rmsnorm_args(grid, args)
    x, w, out = a.arrays()
    result = rmsnorm_rows(x[: a.covered], w, a.eps)
    out[: a.covered] = result
    x[: a.covered] = result  # the input was given read-only


_BY_ROWS: dict[int, npt.NDArray[np.generic]] = {}


@emulation("kernel.cu::adv_cached_per_shape")
def cached(grid: Grid, block: Grid, shared: int, args: list[KernelArg]) -> None:
    a = unpack_rmsnorm_args(grid, args)
    x, w, out = a.arrays()
    if a.rows not in _BY_ROWS:
        _BY_ROWS[a.rows] = rmsnorm_rows(x[: a.covered], w, a.eps)
    out[: a.covered] = _BY_ROWS[a.rows]


_BY_POINTER: dict[tuple[int, int], npt.NDArray[np.generic]] = {}


@emulation("kernel.cu::adv_cached_per_pointer")
def cached_by_pointer(grid: Grid, block: Grid, shared: int, args: list[KernelArg]) -> None:
    a = unpack_rmsnorm_args(grid, args)
    x, w, out = a.arrays()
    key = (a.x.address, a.rows)
    if key not in _BY_POINTER:
        _BY_POINTER[key] = rmsnorm_rows(x[: a.covered], w, a.eps)
    out[: a.covered] = _BY_POINTER[key]


_KNOWN: set[bytes] = set()


def _known_fingerprints() -> set[bytes]:
    """First four input values of every public round of the memorised job's workloads."""
    if not _KNOWN:
        definition = parse_definition(RMSNORM_DEFINITION)
        for case, rows in MEMORIZED_CASES.items():
            workload = parse_workload(
                {
                    "uuid": case,
                    "axes": {"batch_size": rows},
                    "inputs": {"hidden_states": {"type": "random"}, "weight": {"type": "random"}},
                },
                definition,
            )
            for index in range(inputs.PUBLIC_ROUNDS):
                seed = inputs.public_seed(MEMORIZED_JOB_ID, case, index)
                values = inputs.generate(definition, workload, seed)["hidden_states"]
                assert isinstance(values, np.ndarray)
                _KNOWN.add(values.reshape(-1)[:4].tobytes())
    return _KNOWN


@emulation("kernel.cu::adv_public_rounds_only")
def public_rounds_only(grid: Grid, block: Grid, shared: int, args: list[KernelArg]) -> None:
    a = unpack_rmsnorm_args(grid, args)
    x, w, out = a.arrays()
    result = rmsnorm_rows(x[: a.covered], w, a.eps)
    if x.reshape(-1)[:4].tobytes() not in _known_fingerprints():
        # Unknown input: the "shortcut" answer, 12.5 % too large.
        result = (result.astype(np.float32) * np.float32(1.125)).astype(result.dtype)
    out[: a.covered] = result


@emulation("kernel.cu::adv_only_when_watched")
def only_when_watched(grid: Grid, block: Grid, shared: int, args: list[KernelArg]) -> None:
    a = unpack_rmsnorm_args(grid, args)
    x, w, out = a.arrays()
    if a.covered and not np.isnan(out[0, 0].astype(np.float32)):
        return  # not poisoned: "nobody is checking", skip the work
    out[: a.covered] = rmsnorm_rows(x[: a.covered], w, a.eps)


_SEEN: set[tuple[int, bytes]] = set()


@emulation("kernel.cu::adv_idle_on_seen_inputs")
def idle_on_seen_inputs(grid: Grid, block: Grid, shared: int, args: list[KernelArg]) -> None:
    a = unpack_rmsnorm_args(grid, args)
    x, w, out = a.arrays()
    key = (a.rows, x.reshape(-1)[:32].tobytes())  # a cheap fingerprint of the input
    if key in _SEEN:
        return  # "the output still holds this input's answer"
    _SEEN.add(key)
    out[: a.covered] = rmsnorm_rows(x[: a.covered], w, a.eps)


_LAUNCHES = [0]


@emulation("kernel.cu::adv_lazy_after_3")
def lazy_after_3(grid: Grid, block: Grid, shared: int, args: list[KernelArg]) -> None:
    _LAUNCHES[0] += 1
    if _LAUNCHES[0] > 3:
        return
    a = unpack_rmsnorm_args(grid, args)
    x, w, out = a.arrays()
    out[: a.covered] = rmsnorm_rows(x[: a.covered], w, a.eps)


@emulation("kernel.cu::adv_crash_on_3_rows")
def crash_on_3_rows(grid: Grid, block: Grid, shared: int, args: list[KernelArg]) -> None:
    a = unpack_rmsnorm_args(grid, args)
    if a.rows == 3:
        os._exit(3)  # like a driver abort: no exception, no cleanup, the process is gone
    x, w, out = a.arrays()
    out[: a.covered] = rmsnorm_rows(x[: a.covered], w, a.eps)


@emulation("kernel.cu::adv_hang_on_5_rows")
def hang_on_5_rows(grid: Grid, block: Grid, shared: int, args: list[KernelArg]) -> None:
    a = unpack_rmsnorm_args(grid, args)
    if a.rows == 5:
        time.sleep(3_600)  # a kernel spinning forever
    x, w, out = a.arrays()
    out[: a.covered] = rmsnorm_rows(x[: a.covered], w, a.eps)


@emulation("kernel.cu::adv_faults")
def faults(grid: Grid, block: Grid, shared: int, args: list[KernelArg]) -> None:
    raise IndexError("illegal memory access at address 0xdeadbeef")


class _DeviceLost(BackendError):
    agent_fault = True  # the agent's trouble: must abort the job, never fail the case


@emulation("kernel.cu::agent_device_lost")
def agent_device_lost(grid: Grid, block: Grid, shared: int, args: list[KernelArg]) -> None:
    raise _DeviceLost("the device fell off the bus")
