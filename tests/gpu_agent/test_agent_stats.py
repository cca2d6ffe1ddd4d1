"""Latency statistics, the stop rule and the roofline floor (gpu_agent/stats.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpu_agent.stats import (
    StopPolicy,
    bootstrap_median_ci,
    collect,
    relative_standard_error,
    roofline_floor_ns,
    sub_floor,
    summarize,
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
    policy = StopPolicy(warmup=5, batch=25, min_samples=50, target_rse=0.005, max_samples=2000)
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
    policy = StopPolicy(warmup=0, batch=64, min_samples=50, target_rse=0.005, max_samples=300)
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
    policy = StopPolicy(warmup=0, batch=10, min_samples=50, max_samples=2000, time_budget_s=1)
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
        collect(lambda count: [1.0], StopPolicy(warmup=0, batch=5))


def test_roofline_floor_and_flagging() -> None:
    # 1 GB at a 1 TB/s copy (2 TB/s of DRAM traffic) takes at least 0.5 ms.
    floor = roofline_floor_ns(10**9, 1e12)
    assert floor == pytest.approx(500_000.0)
    assert sub_floor(0.89 * floor, floor)
    assert not sub_floor(0.9 * floor, floor)  # the factor's boundary is allowed
    assert not sub_floor(floor, floor)
    assert sub_floor(0.5 * floor, floor, factor=0.6)
    with pytest.raises(ValueError):
        roofline_floor_ns(1, 0.0)
    with pytest.raises(ValueError):
        roofline_floor_ns(1, math.inf)
