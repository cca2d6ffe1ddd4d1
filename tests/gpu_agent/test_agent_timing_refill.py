"""Timed launches that cannot be told from checked ones, the floor, and what a result records.

Before every timed launch the backend refills the outputs with their poison and the inputs
with the next fresh variant (gpu_agent/backends/timing_refill.py); the cpu-test backend does
so on the host, so CI sees what a GPU run does to a kernel that works only when watched: it
is timed working (neutralised), and one that skips inputs it has seen leaves the last timed
launch's output unwritten (tests/gpu_agent/test_agent_harness.py). The roofline floor counts
the bytes written less the L2; the result records the build, the calibration and the clocks.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from test_agent_harness import solution

from gpu_agent import checks, inputs, stats
from gpu_agent.backends import base
from gpu_agent.backends.base import KernelArg
from gpu_agent.backends.cpu_adversaries import RMSNORM_DEFINITION
from gpu_agent.backends.cpu_emulations import HIDDEN
from gpu_agent.backends.cpu_test import CpuTestBackend, HostBuffer, emulation
from gpu_agent.backends.nvml_clocks import ClockReading
from gpu_agent.backends.timing_refill import TimingRefill
from gpu_agent.case_child import clocks_by_name
from gpu_agent.correctness_round import TIMING_VARIANTS, timing_variant_seed
from gpu_agent.definition import parse_definition
from gpu_agent.harness import HarnessConfig, JobSpec, run_job
from gpu_agent.result_assembly import environment
from gpu_agent.workload import parse_workload

BF16 = np.dtype(ml_dtypes.bfloat16)
BF16_POISON = checks.poison_pattern(BF16)
JOB_ID = "0b0b0b0b-1111-4222-8333-444455556666"
NONCE = "7a" * 32
FAST = HarnessConfig(
    stop=stats.StopPolicy(warmup=2, batch=25, min_samples=50, max_samples=100, time_budget_s=0.5),
    bootstrap_resamples=200,
    case_timeout_s=60,
    start_method="forkserver",
)


def workload(rows: int) -> dict[str, Any]:
    return {
        "uuid": f"rows-{rows}",
        "axes": {"batch_size": rows},
        "inputs": {"hidden_states": {"type": "random"}, "weight": {"type": "random"}},
    }


def job(kernel: str, rows: list[int]) -> JobSpec:
    """An RMSNorm job for an emulated kernel, launched as the sample is (one block per row)."""
    return JobSpec(JOB_ID, NONCE, solution(kernel), RMSNORM_DEFINITION, [workload(r) for r in rows])


# What each launch of the recording emulation saw: (output poisoned?, first input word).
_SEEN: list[tuple[bool, int]] = []


@emulation("kernel.cu::test_records_what_it_sees")
def _records(grid: Any, block: Any, shared: int, args: list[KernelArg]) -> None:
    x, out = args
    assert isinstance(x, HostBuffer) and isinstance(out, HostBuffer)
    poisoned = bytes(out.data[: len(BF16_POISON)]) == BF16_POISON
    _SEEN.append((poisoned, int(x.view(np.uint32)[0])))
    out.data[:] = 0


def test_the_cpu_backend_refills_outputs_and_rotates_variants_before_every_timed_launch() -> None:
    backend = CpuTestBackend()
    source = {"kernel.cu": "test_records_what_it_sees"}
    kernel = backend.compile(source, "kernel.cu::test_records_what_it_sees")
    x = backend.upload(np.array([7, 7], dtype=np.uint32))
    out = backend.empty((4,), BF16)
    variants = tuple(backend.upload(np.array([v, v], dtype=np.uint32)) for v in (10, 11, 12))
    refill = TimingRefill(outputs=((out, BF16_POISON),), inputs=((x, variants),))
    _SEEN.clear()
    backend.time_launches(kernel, (1, 1, 1), (1, 1, 1), 0, [x, out], 4, refill=refill)
    backend.time_launches(kernel, (1, 1, 1), (1, 1, 1), 0, [x, out], 3, refill=refill)
    # Every launch saw poison (the emulation zeroes it), the variants rotate across batches.
    assert [(True, 10 + i % 3) for i in range(7)] == _SEEN
    _SEEN.clear()
    backend.time_launches(kernel, (1, 1, 1), (1, 1, 1), 0, [x, out], 2)
    assert _SEEN == [(False, 10), (False, 10)]  # no refill: the zeros, the last variant kept


def test_timing_variants_are_fresh_and_derive_from_the_nonce() -> None:
    seeds = {timing_variant_seed(NONCE, "rows-4", i) for i in range(TIMING_VARIANTS)}
    assert len(seeds) == TIMING_VARIANTS
    assert timing_variant_seed("ab" * 32, "rows-4", 0) not in seeds
    public = {inputs.public_seed("any", "rows-4", i) for i in range(inputs.PUBLIC_ROUNDS)}
    assert not seeds & (public | {inputs.post_timing_seed(NONCE, "rows-4")})


ROWS = 1024


def _floor_ns(bandwidth: float, rows: int = ROWS) -> float:
    return stats.roofline_floor_ns(rows * HIDDEN * 2, bandwidth)  # bf16 output, no L2 on CPU


def _idle_when_unwatched_median(backend: CpuTestBackend, refill: bool) -> float:
    """Median of timed launches of ``adv_only_when_watched`` on its first correctness-like
    launch's buffers, with or without the refill."""
    definition = parse_definition(RMSNORM_DEFINITION)
    parsed = parse_workload(workload(ROWS), definition)
    values = inputs.generate(definition, parsed, 1)
    x, w = (backend.upload(np.asarray(values[n])) for n in ("hidden_states", "weight"))
    out = backend.empty((ROWS, HIDDEN), BF16)
    backend.fill(out, BF16_POISON)
    kernel = backend.compile(
        {"kernel.cu": "adv_only_when_watched"}, "kernel.cu::adv_only_when_watched"
    )
    args: list[KernelArg] = [x, w, out, np.int32(ROWS), np.float32(1e-5)]
    backend.launch(kernel, (ROWS, 1, 1), (512, 1, 1), 0, args)  # checked: it computes
    plan = TimingRefill(outputs=((out, BF16_POISON),)) if refill else None
    times = backend.time_launches(kernel, (ROWS, 1, 1), (512, 1, 1), 0, args, 15, refill=plan)
    return statistics.median(times)


def test_a_kernel_that_works_only_when_watched_is_timed_working() -> None:
    """The refill neutralises it: without the refill its timed launches are empty and under
    the floor; with it every timed launch computes, the case passes, and no sub-floor time
    is reported (it gained nothing by cheating)."""
    backend = CpuTestBackend()
    floor = _floor_ns(backend.copy_bandwidth())
    assert _idle_when_unwatched_median(backend, refill=False) < 0.9 * floor
    assert _idle_when_unwatched_median(backend, refill=True) >= floor

    result = run_job(job("adv_only_when_watched", [ROWS]), "cpu-test", FAST)
    (case,) = result["cases"]
    assert case["status"] == "passed", case
    bandwidth = result["calibration"]["copyBandwidthBytesPerS"]
    assert case["latencyNs"]["median"] >= _floor_ns(bandwidth)


def test_the_floor_counts_bytes_written_less_the_l2() -> None:
    # Any honest time is "impossible" under a floor factor of 10^9: the check is wired, and
    # the floor it states is made of the outputs only (4 rows × 4096 bf16 = 32768 bytes, no
    # L2 on the CPU double), as a number the agent computed, beside a reason code.
    config = dataclasses.replace(FAST, floor_factor=1e9)
    result = run_job(job("rmsnorm_h4096_bf16", [4]), "cpu-test", config)
    (case,) = result["cases"]
    assert case["status"] == "impossible_time"
    assert case["reason"] == "below-roofline-floor"
    bandwidth = result["calibration"]["copyBandwidthBytesPerS"]
    assert case["floorNs"] == pytest.approx(stats.roofline_floor_ns(4 * HIDDEN * 2, bandwidth))


@pytest.fixture(scope="module")
def recorded() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    told: list[dict[str, Any]] = []
    result = run_job(job("rmsnorm_h4096_bf16", [2, 3]), "cpu-test", FAST, on_case=told.append)
    return result, told


def test_each_case_is_told_as_it_is_measured(
    recorded: tuple[dict[str, Any], list[dict[str, Any]]],
) -> None:
    result, told = recorded
    assert told == result["cases"] and [c["case"] for c in told] == ["rows-2", "rows-3"]


def test_the_result_records_how_the_kernel_was_built(
    recorded: tuple[dict[str, Any], list[dict[str, Any]]],
) -> None:
    result, _ = recorded
    assert result["build"] == {
        "solutionKind": "pycuda",
        "language": 'CUDA C++ (extern "C" kernel, declarative launch)',
        "runtime": {"backend": "cpu-test", "target": "cpu"},  # no nvcc on the CPU double
        "flags": ["cpu-test-emulation"],
    }
    # The CPU double measures no event overhead and reads no clocks: nothing is invented.
    assert set(result["calibration"]) == {"copyBandwidthBytesPerS", "floorFactor"}
    assert "clocks" not in result["environment"]


class _GpuLike:
    """The optional capabilities a GPU backend has, as the harness reads them."""

    def sm_clock_mhz(self) -> float:
        return 1980.0

    def timing_clocks(self) -> list[ClockReading]:
        return [ClockReading(1755.0, 3201.0), ClockReading(1980.0, None)]

    def event_overhead_ns(self) -> float:
        return 1500.0


def test_optional_capabilities_are_read_where_a_backend_has_them() -> None:
    gpu, cpu = _GpuLike(), CpuTestBackend()
    reader = base.sm_clock_reader(gpu)
    assert reader is not None and reader() == 1980.0
    assert base.event_overhead_ns(gpu) == 1500.0
    assert clocks_by_name(gpu) == {"sm": [1755.0, 1980.0], "memory": [3201.0]}  # type: ignore[arg-type]
    assert base.sm_clock_reader(cpu) is None and base.event_overhead_ns(cpu) is None
    assert clocks_by_name(cpu) == {}
    device = {"product": "p", "architecture": "sm_90", "gpu_uuid_hash": "0" * 64}
    start = {**device, "backend": "pycuda", "clocks_mhz": {"sm": 345.0}}
    env = environment(start, start, {"sm": [1755.0, 1980.0]})
    assert env["clocks"] == {
        "sm.start": 345.0,
        "sm.end": 345.0,
        "sm.timed.min": 1755.0,
        "sm.timed.max": 1980.0,
    }
