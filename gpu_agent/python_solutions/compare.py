"""Output against reference for Python-solution cases, under SOL tolerance semantics.

Why not ``gpu_agent/checks.compare``: this path compares host copies of torch tensors and
must hold one rule regardless of how that module evolves — **a NaN or ±Inf in an output
fails the case, even where the reference has the very same value** (SOL-ExecBench counts
such an element as mismatched; we fail outright, as DESIGN.md §11 asks). The one exception
is SOL's ``allow_negative_inf``: with it, −Inf where the reference is −Inf is accepted.
Otherwise an element matches when ``|out − ref| ≤ atol + rtol·|ref|``; the output passes
when the matched fraction is at least ``required_matched_ratio`` and, with
``max_error_cap``, the largest absolute error is at most the cap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpu_agent.checks import Tolerance


@dataclass(frozen=True)
class Comparison:
    ok: bool
    max_abs_error: float
    max_rel_error: float
    reason: str | None
    non_finite: int = 0  # NaN/Inf output elements (each one fails the output)


def _non_finite(
    out: npt.NDArray[np.float64], ref: npt.NDArray[np.float64], tolerance: Tolerance
) -> npt.NDArray[np.bool_]:
    bad = ~np.isfinite(out)
    if tolerance.allow_negative_inf:
        bad &= ~((out == -np.inf) & (ref == -np.inf))
    return bad


def compare(
    output: npt.NDArray[np.generic],
    reference: npt.NDArray[np.generic],
    tolerance: Tolerance,
    *,
    name: str = "output",
) -> Comparison:
    """Check one output (a host array) against its reference."""
    if output.shape != reference.shape:
        return Comparison(False, 0.0, 0.0, f"{name}: shape {output.shape} ≠ {reference.shape}")
    out = np.asarray(output).astype(np.float64).ravel()
    ref = np.asarray(reference).astype(np.float64).ravel()
    if out.size == 0:
        return Comparison(True, 0.0, 0.0, None)
    bad = _non_finite(out, ref, tolerance)
    both = np.isfinite(out) & np.isfinite(ref)
    error = np.abs(out[both] - ref[both])
    max_abs = float(error.max()) if error.size else 0.0
    scale = np.abs(ref[both])
    nonzero = scale > 0
    max_rel = float((error[nonzero] / scale[nonzero]).max()) if nonzero.any() else 0.0
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        reason = (
            f"{name}: {int(bad.sum())} of {out.size} elements are NaN/Inf (first at flat index "
            f"{first}: {out[first]!r}, reference {ref[first]!r}); non-finite outputs fail even "
            "where the reference is non-finite too"
        )
        return Comparison(False, max_abs, max_rel, reason, int(bad.sum()))
    matched = np.zeros(out.size, dtype=bool)
    matched[both] = error <= tolerance.atol + tolerance.rtol * scale
    if tolerance.allow_negative_inf:
        matched |= (out == -np.inf) & (ref == -np.inf)
    # An element with a non-finite reference and a finite output never matches.
    ratio = float(matched.mean())
    if ratio < tolerance.required_matched_ratio:
        reason = (
            f"{name}: {ratio:.4%} of elements within tolerance ({tolerance.describe()}); "
            f"max abs error {max_abs:.4g}, max rel error {max_rel:.4g}"
        )
        return Comparison(False, max_abs, max_rel, reason)
    if tolerance.max_error_cap is not None and max_abs > tolerance.max_error_cap:
        reason = f"{name}: max abs error {max_abs:.4g} exceeds the cap {tolerance.max_error_cap:g}"
        return Comparison(False, max_abs, max_rel, reason)
    return Comparison(True, max_abs, max_rel, None)
