"""How a number reads for people: durations in the unit a person reads best, other values to
6 significant digits, published numbers without a float's binary tail. Pure, so the ledger's
event descriptions (``ledger.history.describe``) and the CLI and pages (``api.display``) all
say a value the same way."""

from __future__ import annotations

import math
from typing import Any

# Units of time a source may state a value in, as a factor to ns.
NS_PER_UNIT: dict[str, int] = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 10**6, "s": 10**9}
TIME_UNITS: dict[str, float] = {unit: float(factor) for unit, factor in NS_PER_UNIT.items()}


def finite(value: Any) -> bool:
    """A real number, not a bool, NaN or infinity."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def format_fixed(value: float, places: int) -> str:
    """``places`` decimals, as people read a ratio or a time, until that would spell a huge
    number in full: 1e308 (finite, admitted) had 300 digits and burst the pages' tables."""
    return f"{value:.{places}f}" if abs(value) < 1e6 else f"{value:.4g}"


def format_ns(value: float | None) -> str:
    """A duration in ns in the unit a person reads best: 1750693 → "1.751 ms"."""
    if value is None or not finite(value):
        return "—"
    size = abs(value)
    if size >= 1e9:
        return f"{format_fixed(value / 1e9, 3)} s"
    if size >= 1e6:
        return f"{value / 1e6:.3f} ms"
    if size >= 1e3:
        return f"{value / 1e3:.2f} µs"
    return f"{value:.0f} ns"


def format_value(value: float | None, unit: str | None) -> str:
    """A value in its unit: durations (ns, µs, ms, s) readably, others to 6 digits."""
    if value is None or not finite(value):
        return "—"
    if unit is None or unit in TIME_UNITS:
        return format_ns(value * TIME_UNITS.get(unit or "ns", 1.0))
    return f"{value:.6g} {unit}"


def format_number(value: Any) -> str:
    """Integers with thousands separators, floats to 12 significant digits (as published,
    without a binary tail such as ``...000004``), others as text."""
    if isinstance(value, bool) or value is None:
        return "—" if value is None else ("yes" if value else "no")
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.12g}"
    return str(value)
