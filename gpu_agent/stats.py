"""Latency statistics, the sampling stop rule, and the roofline floor.

Definitions (all in nanoseconds, over the kept samples, warm-up excluded):

* median, p05, p95: numpy's default (linear interpolation between order statistics);
* mean, minimum, maximum;
* MAD: the median absolute deviation from the median, *unscaled* (no 1.4826 factor);
* ci95: a percentile bootstrap of the median — ``resamples`` (default 2000) resamples with
  replacement from a ``Generator(PCG64(seed))``, the 2.5th and 97.5th percentiles of their
  medians — so anyone with the samples and the seed gets the same interval;
* RSE: relative standard error of the mean, ``stdev(ddof=1) / sqrt(n) / mean``.

Stop rule (:func:`collect`): first a warm-up, discarded — at least ``warmup`` launches *and*
at least ``warmup_s`` seconds of them (default 100 ms, like ``triton.testing.do_bench``'s
25 ms warm-up plus its 100 ms of repetitions: long enough for an idle GPU's clocks to ramp
to boost, which ten launches of a µs kernel are not). Then batches of ``batch`` samples; stop
as soon as there are at least ``min_samples``, the RSE is at most ``target_rse`` *and* the
timing is steady ("rse"), or at ``max_samples`` ("max-samples"), or — once ``min_samples``
are in — when ``time_budget_s`` has passed ("time-budget"). Steady: at least two
batches measured in one regime. When the medians of the last two batches drift apart (by
more than ``drift_tolerance`` *and* more than their noise) or, where the backend reads the SM
clock during the timed batches (``sm_clock``), the last two readings differ by more than
``clock_tolerance``, everything measured before the newest batch is set aside as warm-up (at
most ``max_resets`` times: a ramp shifts the times a few times; past that the shifts are
noise, and the samples are kept, but the RSE stop still waits for two batches alike) — so
a plateau of the clock ramp cannot end the sampling however quiet it looked, and the samples
kept describe the steady state. The reason is reported with the case, and the
clock readings are kept (:attr:`Collected.clocks_mhz`).

Roofline floor: :func:`roofline_floor_ns`, a lower bound no honest kernel can beat (the
argument is in its docstring); a median under ``floor_factor × floor`` (default 0.9) is an
impossible time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

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
    warmup_s: float = 0.1  # at least this long warming up, whatever ``warmup`` says
    drift_tolerance: float = 0.01  # last two batch medians, relative
    clock_tolerance: float = 0.02  # last two SM clock readings, relative
    max_warmup: int = 100_000  # launches: a bound for a clock that never advances
    # A clock ramp shifts the times a few times, then holds; past this many resets a drift is
    # noise (a busy host, a bimodal kernel) and the samples are kept.
    max_resets: int = 3

    def __post_init__(self) -> None:
        if self.warmup < 0 or self.batch < 1 or self.min_samples < 1:
            raise ValueError("warmup ≥ 0, batch ≥ 1 and min_samples ≥ 1 are required")
        if self.max_samples < self.min_samples:
            raise ValueError("max_samples must be at least min_samples")
        if self.warmup_s < 0 or self.drift_tolerance < 0 or self.clock_tolerance < 0:
            raise ValueError("warmup_s and the tolerances must be non-negative")


@dataclass(frozen=True)
class Collected:
    samples: list[float]
    warmup: int
    stop_reason: str  # "rse", "max-samples" or "time-budget"
    rse: float
    warmup_s: float = 0.0  # how long the warm-up took
    clocks_mhz: list[float] = field(default_factory=list)  # SM clock during timed batches

    def describe(self, policy: StopPolicy) -> str:
        rse = "n/a" if math.isinf(self.rse) else f"{self.rse:.3%}"
        why = {
            "rse": f"RSE {rse} ≤ {policy.target_rse:.2%}, steady",
            "max-samples": f"cap of {policy.max_samples} samples reached (RSE {rse})",
            "time-budget": f"time budget {policy.time_budget_s:g} s spent (RSE {rse})",
        }[self.stop_reason]
        clocks = ""
        if self.clocks_mhz:
            clocks = f"; SM clock {min(self.clocks_mhz):g}–{max(self.clocks_mhz):g} MHz"
        return (
            f"{len(self.samples)} samples after {self.warmup} warm-up launches "
            f"({self.warmup_s * 1e3:.0f} ms); stopped: {why}{clocks}"
        )


Measure = Callable[[int], list[float]]


def warm_up(measure: Measure, policy: StopPolicy, clock: Callable[[], float]) -> int:
    """Discarded launches until both ``policy.warmup`` of them and ``policy.warmup_s`` have
    passed (first launches pay for caches, clock ramp, lazy loading); how many ran."""
    started = clock()
    done = 0
    while done < policy.max_warmup and (
        done < policy.warmup or clock() - started < policy.warmup_s
    ):
        count = min(policy.batch, policy.warmup - done) if done < policy.warmup else policy.batch
        measure(count)
        done += count
    return done


def _relative_gap(a: float, b: float) -> float:
    scale = (abs(a) + abs(b)) / 2
    return abs(a - b) / scale if scale > 0 else 0.0


def _median_standard_error(batch: Sequence[float]) -> float:
    # σ ≈ 1.4826 · MAD (robust to the odd slow launch); SE(median) ≈ 1.2533 · σ / √n.
    array = np.asarray(batch, dtype=np.float64)
    mad = float(np.median(np.abs(array - np.median(array))))
    return 1.2533 * 1.4826 * mad / math.sqrt(array.size)


def medians_drift(last: Sequence[float], previous: Sequence[float], tolerance: float) -> bool:
    """Whether two batches' medians differ both materially (by more than ``tolerance``,
    relative) and significantly (by more than 3 standard errors): a shift, not noise."""
    a, b = float(np.median(last)), float(np.median(previous))
    noise = 3.0 * math.hypot(_median_standard_error(last), _median_standard_error(previous))
    return _relative_gap(a, b) > tolerance and abs(a - b) > noise


@dataclass
class _Sampling:
    """The stop rule's state: kept batches, the SM clock read with each, launches set aside."""

    policy: StopPolicy
    batches: list[list[float]] = field(default_factory=list)
    clocks: list[float] = field(default_factory=list)
    set_aside: int = 0  # timed launches before a drift: warm-up after all
    resets: int = 0

    @property
    def samples(self) -> list[float]:
        return [v for batch in self.batches for v in batch]

    def add(self, batch: list[float], reading: float | None) -> None:
        self.batches.append(batch)
        if reading is not None:
            self.clocks.append(float(reading))
        if len(self.batches) >= 2 and not self._same_regime():
            self._reset()

    def _reset(self) -> None:
        # What ran before the shift ran at other clocks (or other conditions): keep only the
        # newest batch, so the result describes the steady state.
        if self.resets < self.policy.max_resets:
            self.resets += 1
            self.set_aside += sum(len(b) for b in self.batches[:-1])
            self.batches = self.batches[-1:]
            self.clocks = self.clocks[-1:]

    def _same_regime(self) -> bool:
        drift = medians_drift(self.batches[-1], self.batches[-2], self.policy.drift_tolerance)
        clocks = self.clocks
        moved = len(clocks) >= 2 and _relative_gap(clocks[-1], clocks[-2]) > (
            self.policy.clock_tolerance
        )
        return not drift and not moved

    def stop_reason(self, elapsed_s: float) -> str | None:
        policy = self.policy
        count = sum(len(b) for b in self.batches)
        rse = relative_standard_error(self.samples)
        steady = len(self.batches) >= 2 and self._same_regime()
        if count >= policy.min_samples and rse <= policy.target_rse and steady:
            return "rse"
        if count >= policy.max_samples:
            return "max-samples"
        if elapsed_s >= policy.time_budget_s and count >= policy.min_samples:
            return "time-budget"
        return None


def collect(
    measure: Measure,
    policy: StopPolicy,
    *,
    clock: Callable[[], float] = time.monotonic,
    sm_clock: Callable[[], float | None] | None = None,
) -> Collected:
    """Run the stop rule over ``measure(count) -> count latencies (ns)``.

    ``sm_clock``: the SM clock (MHz) the backend read during the batch just measured, or None
    when it cannot read one. Batches measured before a drift (:func:`medians_drift`, or the
    clock moving by more than ``clock_tolerance``) are set aside and counted as warm-up."""
    warm_started = clock()
    warmup = warm_up(measure, policy, clock)
    warmup_s = clock() - warm_started
    started = clock()
    state = _Sampling(policy)
    while True:
        kept = sum(len(b) for b in state.batches)
        count = min(policy.batch, policy.max_samples - kept)
        batch = [float(v) for v in measure(count)]
        if len(batch) != count:
            raise ValueError(f"asked for {count} timed launches, got {len(batch)}")
        state.add(batch, sm_clock() if sm_clock is not None else None)
        reason = state.stop_reason(clock() - started)
        if reason is not None:
            samples = state.samples
            return Collected(
                samples,
                warmup + state.set_aside,
                reason,
                relative_standard_error(samples),
                warmup_s,
                state.clocks,
            )


# How far above the calibrated copy's DRAM traffic rate the device's peak may lie (see
# roofline_floor_ns): a large device-to-device copy reaches at least two thirds of the peak
# on every NVIDIA GPU (about 90 % on an H200: ~4.3 of 4.8 TB/s).
DRAM_HEADROOM = 1.5


def written_bytes(outputs: Mapping[str, tuple[tuple[int, ...], np.dtype[np.generic]]]) -> int:
    """Bytes of every output tensor (``inputs.output_shapes``' shape): what the kernel must
    write, each element checked written."""
    return sum(math.prod(shape) * np.dtype(dtype).itemsize for shape, dtype in outputs.values())


def roofline_floor_ns(
    written: int,
    copy_bandwidth_bytes_per_s: float,
    *,
    l2_bytes: int = 0,
    headroom: float = DRAM_HEADROOM,
) -> float:
    """A time no honest kernel can beat: ``max(0, written − l2_bytes) / (headroom × 2 × copy)``.

    Why it is a lower bound. (1) Only bytes the kernel provably *writes* are counted: every
    output element is checked to be written (the poison check), so an honest kernel stores
    ``written`` bytes. Inputs are not counted: a kernel may read only part of them (gathers,
    paged KV caches, MoE routing), or find them in L2, so no input byte is provably read from
    DRAM. (2) Stores land in L2, which holds at most ``l2_bytes``; so at least
    ``written − l2_bytes`` bytes must be written back to DRAM before the kernel can finish
    (the L2 starts full of the flush's dirty lines, whose write-back only adds time, which a
    lower bound may ignore). (3) DRAM cannot move bytes faster than its peak. The calibration
    copies ``copy`` bytes per second, i.e. ``2 × copy`` of DRAM traffic (each byte is read
    and written once); a read-only or write-only stream can beat a copy, but not by more than
    the peak's margin over the copy, which :data:`DRAM_HEADROOM` (1.5) bounds. Every honest
    time ``t`` therefore satisfies ``t ≥ (written − L2) / peak ≥ floor``. The agent allocates
    plain device memory (never compressible memory), so no write is cheaper than a byte.

    Called with ``l2_bytes = 0`` and inputs included in ``written``, it is the old, too
    strict floor; pass :func:`written_bytes` and the device's L2 size.
    """
    if copy_bandwidth_bytes_per_s <= 0 or not math.isfinite(copy_bandwidth_bytes_per_s):
        raise ValueError("copy bandwidth must be positive and finite")
    if headroom < 1 or l2_bytes < 0 or written < 0:
        raise ValueError("headroom ≥ 1, l2_bytes ≥ 0 and written ≥ 0 are required")
    dram_bytes = max(0, written - l2_bytes)
    return dram_bytes / (headroom * 2.0 * copy_bandwidth_bytes_per_s) * 1e9


def roofline_floor(
    written: int, copy_bandwidth_bytes_per_s: float, l2_bytes: int
) -> tuple[float, str]:
    """The floor (ns) of :func:`roofline_floor_ns` and what it was computed from, in words:
    the one floor for every kind of solution, declarative or Python."""
    floor_ns = roofline_floor_ns(written, copy_bandwidth_bytes_per_s, l2_bytes=l2_bytes)
    basis = (
        f"{written} bytes written less {l2_bytes} bytes of L2, at "
        f"{DRAM_HEADROOM:g} × 2 × {copy_bandwidth_bytes_per_s:.4g} B/s copy bandwidth"
    )
    return floor_ns, basis


def sub_floor(median_ns: float, floor_ns: float, factor: float = DEFAULT_FLOOR_FACTOR) -> bool:
    """True when the median is an impossible time: under ``factor ×`` the floor."""
    return median_ns < factor * floor_ns
