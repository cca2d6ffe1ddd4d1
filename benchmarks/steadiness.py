"""A figure is judged only on a steady machine: the one rule, for every figure that has it.

A ratio measured in one run (HTTP ÷ echo, verify ÷ Ed25519, writer-bound ÷ Ed25519) is only
as good as the machine's speed is steady within that run. Session 4 saw the host slow ~1.6×
unevenly within single runs, so the same code's ratios passed or failed by luck. A figure
that measures its anchor again after its timed phase knows how far the machine moved: the
anchor's drift, after ÷ before (1.0: it kept its speed). A judged row whose anchor drifted
more than ``LIMIT`` either way (below ``LOW`` or above ``HIGH``) keeps its verdict only where
that drift could not have flipped it: with ``w`` the largest factor any anchor moved by
(``max(d, 1/d)``), a fail stands if it would still fall short with an anchor ``w`` times
kinder (``to_target · w < 1``), a pass if it would still hold with one ``w`` times harsher
(``to_target / w ≥ 1``). Otherwise the row is reported "unsteady — not judged": neither pass
nor fail, its value and ratio still shown. ``to_target`` is oriented so that ≥ 1 means met
for "≥" and "≤" targets alike (``benchmarks.suite.at_least``/``at_most``), so the one test
serves both. A drift that could not be measured (``None``) leaves the row judged as it was
before anchors were re-measured.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from benchmarks.suite import Row

LIMIT = 0.10
# Bounds, not ``abs(drift - 1) > LIMIT``: 1.1 - 1 is 0.10000000000000009 in binary floating
# point, which would call a drift of exactly 1.1 unsteady.
LOW = 1 - LIMIT
HIGH = 1 + LIMIT
UNSTEADY = "unsteady — not judged"


def drift(before: float | None, after: float | None) -> float | None:
    """``after / before`` of an anchor's rate to 3 decimals (what is shown is what is judged),
    or None where either is missing or not a positive finite number (an anchor that was not
    measured says nothing)."""
    if before is None or after is None:
        return None
    if not (math.isfinite(before) and math.isfinite(after)) or before <= 0 or after <= 0:
        return None
    return round(after / before, 3)


def steady(value: float | None) -> bool:
    """Whether an anchor kept its speed within ``LIMIT`` (a missing drift is no evidence
    against the run; ``drift`` never returns NaN)."""
    return value is None or LOW <= value <= HIGH


def all_steady(drifts: Mapping[str, float | None]) -> bool:
    return all(steady(d) for d in drifts.values())


def widest(drifts: Mapping[str, float | None]) -> float:
    """The largest factor any anchor moved by, either way: ``max(d, 1/d)`` (1.0: none
    moved, or none was measured)."""
    return max((max(d, 1 / d) for d in drifts.values() if d is not None), default=1.0)


def stands(passed: bool, to_target: float | None, drifts: Mapping[str, float | None]) -> bool:
    """Whether a verdict stands on a run whose anchors moved by ``drifts``: yes where every
    drift is steady; else only where no anchor speed within the measured drift could flip it
    (a fail still short with an anchor ``w`` times kinder, a pass still met with one ``w``
    times harsher). Without a ``to_target`` nothing says how far the verdict is from
    flipping, so an unsteady drift takes it away."""
    if all_steady(drifts):
        return True
    if to_target is None:  # a NaN one fails both comparisons below: not judged either
        return False
    w = widest(drifts)
    return to_target / w >= 1 if passed else to_target * w < 1


def judge(row: Row, drifts: Mapping[str, float | None]) -> Row:
    """Record ``drifts`` (name → after ÷ before) on ``row``; if the row has a verdict that
    does not ``stands`` on them, take it away (``passed`` None, ``judged`` False) and say why
    in its note. Every anchor counts: each is a way the run's speed could have moved."""
    row.drift = dict(drifts)
    shown = ", ".join(f"{name} ×{d:.3f}" for name, d in drifts.items() if d is not None)
    if row.passed is None or all_steady(drifts):
        if shown:
            row.note = _join(f"anchor drift {shown} (after ÷ before)", row.note)
        return row
    bounds = f"outside {LOW:.2f}-{HIGH:.2f}"
    if stands(row.passed, row.to_target, drifts):
        row.note = _join(
            f"anchor drift {shown} (after ÷ before; {bounds}, but the verdict holds "
            f"within ×{widest(drifts):.3f})",
            row.note,
        )
        return row
    row.passed, row.judged = None, False
    row.note = _join(f"{UNSTEADY}: anchor drift {shown} (after ÷ before; {bounds})", row.note)
    return row


def _join(first: str, rest: str) -> str:
    return f"{first}; {rest}" if rest else first
