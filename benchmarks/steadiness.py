"""A figure is judged only on a steady machine: the one rule, for every figure that has it.

A ratio measured in one run (HTTP ÷ echo, verify ÷ Ed25519, writer-bound ÷ Ed25519) is only
as good as the machine's speed is steady within that run. Session 4 saw the host slow ~1.6×
unevenly within single runs, so the same code's ratios passed or failed by luck. A figure
that measures its anchor again after its timed phase knows how far the machine moved: the
anchor's drift, after ÷ before (1.0: it kept its speed). A judged row whose anchor drifted
more than ``LIMIT`` either way (below ``LOW`` or above ``HIGH``) is reported "unsteady —
not judged": neither pass nor fail, its value and ratio still shown. A drift that could not
be measured (``None``) leaves the row judged as it was before anchors were re-measured.
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
    against the run)."""
    return value is None or math.isnan(value) or LOW <= value <= HIGH


def judge(row: Row, drifts: Mapping[str, float | None]) -> Row:
    """Record ``drifts`` (name → after ÷ before) on ``row``; if the row has a verdict and any
    of them is out of bounds, take the verdict away (``passed`` None, ``judged`` False) and
    say why in its note. Every drift must be steady: each anchor is a way the run's speed
    could have moved."""
    row.drift = dict(drifts)
    shown = ", ".join(f"{name} ×{d:.3f}" for name, d in drifts.items() if d is not None)
    moved = {name: d for name, d in drifts.items() if not steady(d)}
    if row.passed is None or not moved:
        if shown:
            row.note = _join(f"anchor drift {shown} (after ÷ before)", row.note)
        return row
    row.passed, row.judged = None, False
    row.note = _join(
        f"{UNSTEADY}: anchor drift {shown} (after ÷ before; outside {LOW:.2f}-{HIGH:.2f})",
        row.note,
    )
    return row


def _join(first: str, rest: str) -> str:
    return f"{first}; {rest}" if rest else first
