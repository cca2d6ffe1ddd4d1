"""What every figure of the suite (``python -m benchmarks``) hands back, and shared helpers.

A figure module measures its value and its anchor in the same run and returns a
``FigureResult``: table rows (figure, value, anchor, ratio, target, pass) plus the details
for the JSON. ``Context`` carries the run's options and where to report progress.

Every anchor and stage is timed on two clocks (issue 36): wall time (``perf_counter``),
what a user waits for, and the calling thread's CPU time (``thread_time``), which other
work on a shared machine hardly moves: a figure whose two clocks disagree was measured on a
busy machine. ``load()`` is the load average, recorded before and after each figure.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from rich.console import Console


@dataclass
class Row:
    """One line of the suite's table.

    ``to_target`` says how the value stands against its target, as a factor where ≥ 1 means
    met: value / target for a "≥" target, target / value for a "≤" one. ``passed`` is None
    for a row that only informs (no target of its own), and for a row that was not judged:
    ``judged`` False where its anchor drifted beyond ``benchmarks.steadiness``'s bounds
    within the run (``drift``: each anchor's after ÷ before, where the figure measured it).
    """

    figure: str
    name: str
    value: str
    anchor: str = ""
    ratio: float | None = None
    target: str = ""
    passed: bool | None = None
    to_target: float | None = None
    note: str = ""
    judged: bool = True
    drift: dict[str, float | None] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class FigureResult:
    figure: str
    title: str
    rows: list[Row]
    detail: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    why: str = ""  # what explains a missed target, where the module knows
    load: dict[str, list[float]] = field(default_factory=dict)  # before / after, by the suite

    @property
    def passed(self) -> bool:
        return all(r.passed is not False for r in self.rows)


@dataclass
class Context:
    quick: bool
    large: bool
    console: Console
    step: Callable[[str], None] = lambda _text: None  # a sub-step's name, for the progress bar


def load() -> list[float]:
    """The 1-, 5- and 15-minute load averages, rounded."""
    return [round(x, 2) for x in os.getloadavg()]


def load_text(before: list[float], after: list[float]) -> str:
    """``3.1 → 4.2`` (1-minute load average before → after)."""
    return f"{before[0]:.2f} → {after[0]:.2f}"


class Clocks:
    """Wall and thread-CPU seconds of a block, and the load average around it.

    ``with Clocks() as c: ...`` then ``c.wall``, ``c.cpu``, ``c.json(count)``.
    """

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0
        self.process_cpu = 0.0  # every thread of this process: work handed to other threads
        self.load_before: list[float] = []
        self.load_after: list[float] = []

    def __enter__(self) -> Clocks:
        self.load_before = load()
        self._cpu0 = time.thread_time()
        self._process0 = time.process_time()
        self._wall0 = time.perf_counter()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.wall = time.perf_counter() - self._wall0
        self.cpu = time.thread_time() - self._cpu0
        self.process_cpu = time.process_time() - self._process0
        self.load_after = load()

    def json(self, count: int | None = None) -> dict[str, Any]:
        """Seconds on both clocks (and per second of each, given how many were done)."""
        found: dict[str, Any] = {
            "seconds": round(self.wall, 4),
            "threadCpuSeconds": round(self.cpu, 4),
            "processCpuSeconds": round(self.process_cpu, 4),
            "loadAverage": {"before": self.load_before, "after": self.load_after},
        }
        if count is not None:
            found["perSecond"] = round(count / self.wall, 1) if self.wall else math.nan
            found["perThreadCpuSecond"] = round(count / self.cpu, 1) if self.cpu else math.nan
        return found


def at_least(value: float, target: float) -> tuple[bool, float]:
    """(met, value / target) of a "≥ target" figure."""
    return value >= target, (value / target if target else math.inf)


def at_most(value: float, target: float) -> tuple[bool, float]:
    """(met, target / value) of a "≤ target" figure."""
    return value <= target, (target / value if value else math.inf)


def ratio(value: float, anchor: float) -> float | None:
    if not anchor or math.isnan(anchor) or math.isnan(value):
        return None
    return value / anchor


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def latency_ms(samples: list[float]) -> dict[str, float]:
    """p50 / p99 / mean / max in ms of latencies in seconds."""
    if not samples:
        return {}
    return {
        "p50": round(percentile(samples, 0.50) * 1000, 3),
        "p99": round(percentile(samples, 0.99) * 1000, 3),
        "mean": round(statistics.fmean(samples) * 1000, 3),
        "max": round(max(samples) * 1000, 3),
    }


def fmt(value: float, digits: int = 0) -> str:
    return "—" if value is None or math.isnan(value) else f"{value:,.{digits}f}"
