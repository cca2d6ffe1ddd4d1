"""Latency statistics, the stop rule and the roofline floor (gpu_agent/stats.py)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from gpu_agent.stats import (
    StopPolicy,
    bootstrap_median_ci,
    collect,
    medians_drift,
    relative_standard_error,
    roofline_floor_ns,
    sub_floor,
    summarize,
    written_bytes,
)


def test_exact_statistics_on_a_small_sample() -> None:
    summary = summarize([4.0, 1.0, 100.0, 3.0, 2.0], resamples=200)
    assert summary.median == 3.0
    assert summary.mean == 22.0
    assert summary.minimum == 1.0 and summary.maximum == 100.0
    # Linear interpolation between order statistics (numpy's default, documented).
    assert summary.p05 == pytest.approx(1.2)
    assert summary.p95 == pytest.approx(80.8)
    assert summary.mad == 1.0  # |x - 3| = 1, 2, 97, 0, 1 → median 1 (unscaled)
    assert summary.samples == 5
    low, high = summary.ci95
    assert 1.0 <= low <= 3.0 <= high <= 100.0
    as_json = summary.to_json()
    assert set(as_json) == {"median", "mean", "p05", "p95", "minimum", "maximum", "mad", "ci95"}


def test_even_count_median_and_mad() -> None:
    summary = summarize([1.0, 2.0, 3.0, 10.0], resamples=100)
    assert summary.median == 2.5
    assert summary.mad == 1.0  # deviations 1.5, 0.5, 0.5, 7.5 → median 1.0


def test_bootstrap_ci_contains_the_true_median_and_is_reproducible() -> None:
    rng = np.random.default_rng(1234)
    scale = 1000.0
    samples = rng.exponential(scale, size=800).tolist()
    true_median = scale * math.log(2)
    low, high = bootstrap_median_ci(samples, seed=7)
    assert low < true_median < high
    assert (low, high) == bootstrap_median_ci(samples, seed=7)
    assert (high - low) < 0.25 * true_median
    # Coverage over many independent samples is close to 95 %.
    hits = 0
    for trial in range(40):
        draw = np.random.default_rng(trial).exponential(scale, size=200).tolist()
        lo, hi = bootstrap_median_ci(draw, seed=trial, resamples=400)
        hits += lo <= true_median <= hi
    assert hits >= 34


def test_relative_standard_error() -> None:
    values = [9.0, 11.0, 10.0, 10.0]
    expected = float(np.std(values, ddof=1)) / 2.0 / 10.0
    assert relative_standard_error(values) == pytest.approx(expected)
    assert math.isinf(relative_standard_error([5.0]))
    assert math.isinf(relative_standard_error([0.0, 0.0]))


def test_invalid_samples_are_refused() -> None:
    for bad in ([], [1.0, math.nan], [1.0, -1.0], [math.inf]):
        with pytest.raises(ValueError):
            summarize(bad)


class _Measure:
    """A fake device: returns latencies from ``draw``, remembers every request."""

    def __init__(self, draw: np.ndarray) -> None:
        self.draw = iter(draw.tolist())
        self.requests: list[int] = []

    def __call__(self, count: int) -> list[float]:
        self.requests.append(count)
        return [next(self.draw) for _ in range(count)]


def test_stop_rule_stops_at_min_samples_when_quiet() -> None:
    rng = np.random.default_rng(0)
    warmup = np.full(5, 1e9)  # absurd warm-up values: they must be discarded
    quiet = 1000.0 + rng.normal(0, 1.0, size=10_000)
    measure = _Measure(np.concatenate([warmup, quiet]))
    policy = StopPolicy(
        warmup=5, batch=25, min_samples=50, target_rse=0.005, max_samples=2000, warmup_s=0
    )
    collected = collect(measure, policy)
    assert collected.stop_reason == "rse"
    assert len(collected.samples) == 50
    assert measure.requests == [5, 25, 25]
    assert max(collected.samples) < 1e6
    assert collected.rse <= 0.005
    assert "stopped: RSE" in collected.describe(policy)


def test_stop_rule_runs_to_the_cap_when_noisy() -> None:
    rng = np.random.default_rng(1)
    noisy = rng.lognormal(mean=7.0, sigma=1.5, size=10_000)
    measure = _Measure(noisy)
    policy = StopPolicy(
        warmup=0, batch=64, min_samples=50, target_rse=0.005, max_samples=300, warmup_s=0
    )
    collected = collect(measure, policy)
    assert collected.stop_reason == "max-samples"
    assert len(collected.samples) == 300
    assert measure.requests == [64, 64, 64, 64, 44]  # the last batch is cut to the cap
    assert collected.rse > 0.005
    assert "cap of 300 samples" in collected.describe(policy)


def test_stop_rule_time_budget_only_after_min_samples() -> None:
    rng = np.random.default_rng(2)
    measure = _Measure(rng.lognormal(7.0, 1.5, size=10_000))
    ticks = iter(range(0, 10_000, 100))  # every clock read is 100 s later
    policy = StopPolicy(
        warmup=0, batch=10, min_samples=50, max_samples=2000, time_budget_s=1, warmup_s=0
    )
    collected = collect(measure, policy, clock=lambda: float(next(ticks)))
    assert collected.stop_reason == "time-budget"
    assert len(collected.samples) == 50


def test_stop_policy_validation() -> None:
    with pytest.raises(ValueError):
        StopPolicy(batch=0)
    with pytest.raises(ValueError):
        StopPolicy(min_samples=100, max_samples=50)


def test_short_batches_are_an_error() -> None:
    with pytest.raises(ValueError, match="got 1"):
        collect(lambda count: [1.0], StopPolicy(warmup=0, batch=5, warmup_s=0))


class _Device:
    """A fake device whose launches advance a fake clock by their own latency."""

    def __init__(self, latency: Callable[[int], float], clock_mhz: Callable[[int], float]) -> None:
        self.latency, self.clock_mhz = latency, clock_mhz
        self.launches = 0
        self.now = 0.0
        self.rng = np.random.default_rng(3)

    def measure(self, count: int) -> list[float]:
        out = []
        for _ in range(count):
            value = self.latency(self.launches) + float(self.rng.normal(0, 0.5))
            self.launches += 1
            self.now += value * 1e-9
            out.append(value)
        return out

    def sm_clock(self) -> float:
        return self.clock_mhz(self.launches)


def test_warm_up_lasts_its_time_budget_not_ten_launches() -> None:
    device = _Device(lambda i: 10_000.0, lambda i: 1980.0)  # a 10 µs kernel
    policy = StopPolicy(warmup=10, batch=50, min_samples=50, warmup_s=0.1)
    collected = collect(device.measure, policy, clock=lambda: device.now)
    assert collected.warmup * 10_000e-9 >= 0.1  # ≥ 10,000 launches, not 10
    assert collected.warmup_s >= 0.1
    assert "warm-up launches (10" in collected.describe(policy)
    bounded = StopPolicy(warmup=10, batch=50, min_samples=50, warmup_s=10.0, max_warmup=500)
    assert 500 <= collect(lambda n: [1.0] * n, bounded, clock=lambda: 0.0).warmup < 550


def test_the_stop_rule_does_not_end_on_a_clock_plateau() -> None:
    # The first timed batch runs at an intermediate clock (1410 MHz, 40 % slower), quiet
    # enough for the RSE target; the clock then reaches 1980 MHz for good.
    def latency(i: int) -> float:
        return 1400.0 if i < 50 else 1000.0

    def mhz(i: int) -> float:
        return 1410.0 if i <= 50 else 1980.0

    device = _Device(latency, mhz)
    policy = StopPolicy(warmup=0, batch=50, min_samples=50, warmup_s=0, max_samples=2000)
    collected = collect(device.measure, policy, clock=lambda: device.now, sm_clock=device.sm_clock)
    assert collected.stop_reason == "rse"
    # One quiet batch alone was not enough; the plateau's batch was set aside as warm-up.
    assert len(collected.samples) == 100 and collected.warmup == 50
    assert max(collected.samples) < 1010.0
    assert collected.clocks_mhz == [1980.0, 1980.0]
    assert "SM clock 1980–1980 MHz" in collected.describe(policy)


def test_a_moving_clock_blocks_the_rse_stop_even_when_times_look_flat() -> None:
    device = _Device(lambda i: 1000.0, lambda i: 1000.0 + min(i, 400))  # ramps, then holds
    policy = StopPolicy(warmup=0, batch=50, min_samples=50, warmup_s=0, clock_tolerance=0.02)
    collected = collect(device.measure, policy, clock=lambda: device.now, sm_clock=device.sm_clock)
    assert collected.stop_reason == "rse"
    # It waited until the clock settled (the ramp's first batches set aside as warm-up).
    assert collected.clocks_mhz[-2:] == [1400.0, 1400.0] and collected.warmup == 150
    assert len(collected.samples) + collected.warmup >= 400


def test_noise_is_not_drift() -> None:
    rng = np.random.default_rng(11)
    noisy = rng.normal(2000.0, 200.0, size=(2, 50))  # 10 % jitter, same distribution
    assert not medians_drift(noisy[0].tolist(), noisy[1].tolist(), 0.01)
    shifted = (noisy[1] * 0.8).tolist()
    assert medians_drift(noisy[0].tolist(), shifted, 0.01)
    quiet = [1000.0 + 0.01 * i for i in range(50)]
    assert not medians_drift(quiet, [v * 1.005 for v in quiet], 0.01)  # significant, not material


def test_roofline_floor_counts_written_bytes_beyond_l2_with_headroom() -> None:
    # 1 GB written at a 1 TB/s copy (2 TB/s of DRAM traffic, peak ≤ 1.5 × that).
    floor = roofline_floor_ns(10**9, 1e12)
    assert floor == pytest.approx(10**9 / 3e12 * 1e9)
    assert roofline_floor_ns(10**9, 1e12, l2_bytes=50 * 10**6) == pytest.approx(0.95e9 / 3e12 * 1e9)
    assert roofline_floor_ns(40 * 10**6, 1e12, l2_bytes=50 * 10**6) == 0.0  # fits in L2
    assert sub_floor(0.89 * floor, floor)
    assert not sub_floor(0.9 * floor, floor)  # the factor's boundary is allowed
    assert not sub_floor(floor, floor)
    assert sub_floor(0.5 * floor, floor, factor=0.6)
    for bad in (0.0, math.inf):
        with pytest.raises(ValueError):
            roofline_floor_ns(1, bad)
    with pytest.raises(ValueError):
        roofline_floor_ns(1, 1e12, headroom=0.5)


def test_an_honest_gather_is_not_flagged() -> None:
    # An embedding gather on an H200-like device: a 2 GiB table (input), 32768 indices,
    # 32768 × 4096 bf16 rows out. An honest kernel reads only the rows it gathers: ~512 MiB of
    # traffic, ~125 µs at the copy's 4.3 TB/s. Counting every input byte (the old floor) says
    # it cannot take under ~0.56 ms.
    copy = 2.15e12  # bytes copied per second: 4.3 TB/s of DRAM traffic
    l2 = 50 * 2**20
    outputs = {"out": ((32768, 4096), np.dtype(np.uint16))}
    table, indices = 2 * 2**30, 32768 * 8
    out_bytes = written_bytes(outputs)
    assert out_bytes == 32768 * 4096 * 2
    honest_ns = 2 * out_bytes / (2 * copy) * 1e9
    old_floor = (table + indices + out_bytes) / (2 * copy) * 1e9
    assert sub_floor(honest_ns, old_floor)  # what the old floor did to it
    floor = roofline_floor_ns(out_bytes, copy, l2_bytes=l2)
    assert not sub_floor(honest_ns, floor)
    # Even writing at the device's peak (4.8 TB/s, above the copy's rate) is not flagged...
    assert not sub_floor((out_bytes - l2) / 4.8e12 * 1e9, floor)
    # ...while a kernel that writes nothing in a few µs still is.
    assert sub_floor(3_000.0, floor)


def test_a_device_that_keeps_drifting_still_stops() -> None:
    batches = iter(range(10_000))

    def measure(count: int) -> list[float]:
        level = 1000.0 if next(batches) % 2 else 2000.0  # a shift between every two batches
        return [level] * count

    policy = StopPolicy(warmup=0, batch=50, min_samples=50, max_samples=500, warmup_s=0)
    collected = collect(measure, policy, clock=lambda: 0.0)
    # Three shifts are set aside (a clock ramp's worth), then the drift is taken for noise:
    # the samples are kept, and never stop on "rse" since the times never settle.
    assert collected.stop_reason == "max-samples"
    assert len(collected.samples) == 500 and collected.warmup == 150
