"""Latency statistics, the sampling stop rule, and the roofline floor.

Definitions (all in nanoseconds, over the kept samples, warm-up excluded):

* median, p05, p95: numpy's default (linear interpolation between order statistics);
* mean, minimum, maximum;
* MAD: the median absolute deviation from the median, *unscaled* (no 1.4826 factor);
* ci95: a percentile bootstrap of the median — ``resamples`` (default 2000) resamples with
  replacement from a ``Generator(PCG64(seed))``, the 2.5th and 97.5th percentiles of their
  medians — so anyone with the samples and the seed gets the same interval;
* RSE: relative standard error of the mean, ``stdev(ddof=1) / sqrt(n) / mean``.

Stop rule: discard ``warmup`` launches, then take batches of ``batch`` samples; stop as soon
as there are at least ``min_samples`` and the RSE is at most ``target_rse`` ("rse"), or at
``max_samples`` ("max-samples"), or — once ``min_samples`` are in — when ``time_budget_s``
has passed ("time-budget"). The reason is reported with the case.

Roofline floor: a kernel must at least read its inputs and write its outputs once, so it
cannot beat ``bytes_moved / bandwidth``. The calibration measures a device-to-device copy,
in which every byte copied is read once and written once, i.e. DRAM traffic runs at
``2 × copy bandwidth``; the floor uses that (the lower, conservative floor). A median under
``floor_factor × floor`` (default 0.9: measurement noise and a kernel a little better than
the copy are not flagged) is an impossible time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_RESAMPLES = 2_000
DEFAULT_FLOOR_FACTOR = 0.9


@dataclass(frozen=True)
class LatencySummary:
    median: float
    mean: float
    p05: float
    p95: float
    minimum: float
    maximum: float
    mad: float
    ci95: tuple[float, float]
    samples: int

    def to_json(self) -> dict[str, object]:
        """The ``LatencyStats`` shape of the rerun/v1 predicate (sample count goes apart)."""
        return {
            "median": self.median,
            "mean": self.mean,
            "p05": self.p05,
            "p95": self.p95,
            "minimum": self.minimum,
            "maximum": self.maximum,
            "mad": self.mad,
            "ci95": [self.ci95[0], self.ci95[1]],
        }


def _checked_samples(samples: Sequence[float]) -> np.ndarray:
    array = np.asarray(samples, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise ValueError("need at least one sample")
    if not np.isfinite(array).all() or (array < 0).any():
        raise ValueError("samples must be finite and non-negative")
    return array


def bootstrap_median_ci(
    samples: Sequence[float], *, seed: int = 0, resamples: int = DEFAULT_RESAMPLES
) -> tuple[float, float]:
    array = _checked_samples(samples)
    rng = np.random.default_rng(seed)
    # In chunks, so 2000 × 2000 indices never sit in memory at once.
    medians = np.empty(resamples, dtype=np.float64)
    chunk = max(1, 1_000_000 // array.size)
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        picks = rng.integers(0, array.size, size=(stop - start, array.size))
        medians[start:stop] = np.median(array[picks], axis=1)
    low, high = np.percentile(medians, [2.5, 97.5])
    return float(low), float(high)


def relative_standard_error(samples: Sequence[float]) -> float:
    """stdev/sqrt(n)/mean; infinite when it cannot be told (n < 2 or a zero mean)."""
    array = np.asarray(samples, dtype=np.float64)
    if array.size < 2:
        return math.inf
    mean = float(array.mean())
    if mean <= 0:
        return math.inf
    return float(array.std(ddof=1)) / math.sqrt(array.size) / mean


def summarize(
    samples: Sequence[float], *, seed: int = 0, resamples: int = DEFAULT_RESAMPLES
) -> LatencySummary:
    array = _checked_samples(samples)
    median = float(np.median(array))
    p05, p95 = (float(v) for v in np.percentile(array, [5, 95]))
    low, high = bootstrap_median_ci(array.tolist(), seed=seed, resamples=resamples)
    return LatencySummary(
        median=median,
        mean=float(array.mean()),
        p05=p05,
        p95=p95,
        minimum=float(array.min()),
        maximum=float(array.max()),
        mad=float(np.median(np.abs(array - median))),
        ci95=(low, high),
        samples=int(array.size),
    )


@dataclass(frozen=True)
class StopPolicy:
    warmup: int = 10
    batch: int = 50
    min_samples: int = 50
    target_rse: float = 0.005
    max_samples: int = 2_000
    time_budget_s: float = 30.0

    def __post_init__(self) -> None:
        if self.warmup < 0 or self.batch < 1 or self.min_samples < 1:
            raise ValueError("warmup ≥ 0, batch ≥ 1 and min_samples ≥ 1 are required")
        if self.max_samples < self.min_samples:
            raise ValueError("max_samples must be at least min_samples")


@dataclass(frozen=True)
class Collected:
    samples: list[float]
    warmup: int
    stop_reason: str  # "rse", "max-samples" or "time-budget"
    rse: float

    def describe(self, policy: StopPolicy) -> str:
        rse = "n/a" if math.isinf(self.rse) else f"{self.rse:.3%}"
        why = {
            "rse": f"RSE {rse} ≤ {policy.target_rse:.2%}",
            "max-samples": f"cap of {policy.max_samples} samples reached (RSE {rse})",
            "time-budget": f"time budget {policy.time_budget_s:g} s spent (RSE {rse})",
        }[self.stop_reason]
        return f"{len(self.samples)} samples after {self.warmup} warm-up launches; stopped: {why}"


def collect(
    measure: Callable[[int], list[float]],
    policy: StopPolicy,
    *,
    clock: Callable[[], float] = time.monotonic,
) -> Collected:
    """Run the stop rule over ``measure(count) -> count latencies (ns)``."""
    if policy.warmup:
        measure(policy.warmup)  # discarded: first launches pay for caches, clocks, JIT
    started = clock()
    samples: list[float] = []
    while True:
        count = min(policy.batch, policy.max_samples - len(samples))
        batch = measure(count)
        if len(batch) != count:
            raise ValueError(f"asked for {count} timed launches, got {len(batch)}")
        samples.extend(float(v) for v in batch)
        rse = relative_standard_error(samples)
        enough = len(samples) >= policy.min_samples
        if enough and rse <= policy.target_rse:
            return Collected(samples, policy.warmup, "rse", rse)
        if len(samples) >= policy.max_samples:
            return Collected(samples, policy.warmup, "max-samples", rse)
        if enough and clock() - started >= policy.time_budget_s:
            return Collected(samples, policy.warmup, "time-budget", rse)


def roofline_floor_ns(bytes_moved: int, copy_bandwidth_bytes_per_s: float) -> float:
    """The least time to move ``bytes_moved`` bytes at the calibrated DRAM rate."""
    if copy_bandwidth_bytes_per_s <= 0 or not math.isfinite(copy_bandwidth_bytes_per_s):
        raise ValueError("copy bandwidth must be positive and finite")
    return bytes_moved / (2.0 * copy_bandwidth_bytes_per_s) * 1e9


def sub_floor(median_ns: float, floor_ns: float, factor: float = DEFAULT_FLOOR_FACTOR) -> bool:
    """True when the median is an impossible time: under ``factor ×`` the floor."""
    return median_ns < factor * floor_ns
