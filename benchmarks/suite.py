"""What every figure of the suite (``python -m benchmarks``) hands back, and shared helpers.

A figure module measures its value and its anchor in the same run and returns a
``FigureResult``: table rows (figure, value, anchor, ratio, target, pass) plus the details
for the JSON. ``Context`` carries the run's options and where to report progress.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from rich.console import Console


@dataclass
class Row:
    """One line of the suite's table.

    ``to_target`` says how the value stands against its target, as a factor where ≥ 1 means
    met: value / target for a "≥" target, target / value for a "≤" one. ``passed`` is None
    for a row that only informs (no target of its own).
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

    @property
    def passed(self) -> bool:
        return all(r.passed is not False for r in self.rows)


@dataclass
class Context:
    quick: bool
    large: bool
    console: Console
    step: Callable[[str], None] = lambda _text: None  # a sub-step's name, for the progress bar


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
