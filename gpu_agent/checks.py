"""Correctness checks: SOL tolerance, output poisoning, input mutation.

All of them are pure numpy over host copies, so each one is tested on CPU.

* **Tolerance** (SOL-ExecBench semantics, docs/workload.md): an element matches when
  ``|out − ref| ≤ atol + rtol·|ref|``; the case passes when the matched fraction is at least
  ``required_matched_ratio`` and, with ``max_error_cap``, the largest absolute error is at
  most the cap. Stricter than SOL in one way, as docs/design.md §11 asks: a NaN or ±Inf in the
  output or the reference fails the case outright, whatever the ratio — also where both
  hold the same non-finite value (SOL counts such an element as unmatched: its
  ``|out − ref|`` is not finite). The one exception is SOL's ``allow_negative_inf``: with it,
  ``-inf`` in both at the same place is correct and excluded from the errors. The comparison
  runs in float64 (exact for every dtype up to 32 bits), in chunks of
  :data:`COMPARE_CHUNK` elements, so a 58 M-element bfloat16 output takes well under a
  second rather than the ~9 s of whole-array temporaries.
* **Poisoning**: before every correctness launch each output is filled with a per-dtype
  pattern (a NaN with a distinctive payload for floats, all-ones bytes otherwise). An
  element that is still bit-equal to the poison afterwards was never written — unless the
  correct answer is itself bit-equal to the poison there, which only the integer sentinel
  can be, and which is then not counted.
* **Mutation**: sha256 of every input's bytes before the launch and of a device read-back
  after it; any difference means the kernel wrote to an input.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import numpy.typing as npt

# SOL-ExecBench defaults (docs/workload.md, "tolerance"): used for whatever a workload
# (or definition) leaves out, so a rerun judges a kernel by the bounds its source used.
DEFAULT_ATOL = 1e-2
DEFAULT_RTOL = 1e-2
DEFAULT_MATCHED_RATIO = 0.99


@dataclass(frozen=True)
class Tolerance:
    atol: float = DEFAULT_ATOL
    rtol: float = DEFAULT_RTOL
    required_matched_ratio: float = DEFAULT_MATCHED_RATIO
    max_error_cap: float | None = None
    allow_negative_inf: bool = False

    def describe(self) -> str:
        cap = "" if self.max_error_cap is None else f", cap {self.max_error_cap:g}"
        return (
            f"atol {self.atol:g}, rtol {self.rtol:g}, ratio ≥ {self.required_matched_ratio:g}{cap}"
        )


@dataclass(frozen=True)
class ToleranceResult:
    ok: bool
    max_abs_error: float  # over elements where both sides are finite; 0.0 when none
    max_rel_error: float  # |out − ref| / |ref| over finite elements with ref ≠ 0
    matched_ratio: float
    reason: str | None  # why it failed; None when ok
    non_finite: int = 0  # NaN/±Inf elements in the output or the reference (each one fails)


# Elements per compare step: float64 temporaries of 8 MiB each stay near the caches.
COMPARE_CHUNK = 1 << 20


def _as_float64(array: npt.NDArray[np.generic]) -> npt.NDArray[np.float64]:
    # bfloat16/float8 (ml_dtypes) and ints all widen exactly to float64 (ints up to 2^53).
    return np.asarray(array).astype(np.float64)


@dataclass
class _Tally:
    """What :func:`compare` accumulates over the chunks of one tensor."""

    matched: int = 0
    bad_non_finite: int = 0
    first_bad: int = -1  # flat index of the first bad non-finite element
    max_abs: float = 0.0
    max_rel: float = 0.0

    def add(
        self,
        out: npt.NDArray[np.float64],
        ref: npt.NDArray[np.float64],
        offset: int,
        tolerance: Tolerance,
    ) -> None:
        both_finite = np.isfinite(out) & np.isfinite(ref)
        allowed = np.zeros_like(both_finite)
        if tolerance.allow_negative_inf:
            allowed = (out == -np.inf) & (ref == -np.inf)
        bad = ~both_finite & ~allowed
        count = int(np.count_nonzero(bad))
        if count and self.first_bad < 0:
            self.first_bad = offset + int(np.flatnonzero(bad)[0])
        self.bad_non_finite += count
        if not both_finite.all():
            out, ref = out[both_finite], ref[both_finite]
        diff = np.abs(out - ref)
        ref_abs = np.abs(ref)
        if diff.size:
            self.max_abs = max(self.max_abs, float(diff.max()))
            rel = np.divide(diff, ref_abs, out=np.zeros_like(diff), where=ref_abs > 0)
            self.max_rel = max(self.max_rel, float(rel.max()))
        within = diff <= tolerance.atol + tolerance.rtol * ref_abs
        self.matched += int(np.count_nonzero(within)) + int(np.count_nonzero(allowed))


def _tally(
    output: npt.NDArray[np.generic], reference: npt.NDArray[np.generic], tolerance: Tolerance
) -> _Tally:
    out_flat = np.ascontiguousarray(output).reshape(-1)
    ref_flat = np.ascontiguousarray(reference).reshape(-1)
    tally = _Tally()
    for start in range(0, out_flat.size, COMPARE_CHUNK):
        stop = start + COMPARE_CHUNK
        tally.add(
            _as_float64(out_flat[start:stop]), _as_float64(ref_flat[start:stop]), start, tolerance
        )
    return tally


def compare(
    output: npt.NDArray[np.generic],
    reference: npt.NDArray[np.generic],
    tolerance: Tolerance,
    *,
    name: str = "output",
) -> ToleranceResult:
    """Check one output tensor against its reference under SOL semantics (module docstring)."""
    if output.shape != reference.shape:
        return ToleranceResult(
            False, 0.0, 0.0, 0.0, f"{name}: shape {output.shape} ≠ reference {reference.shape}"
        )
    total = int(output.size)
    if total == 0:
        return ToleranceResult(True, 0.0, 0.0, 1.0, None)
    tally = _tally(output, reference, tolerance)
    ratio = tally.matched / total
    max_abs, max_rel = tally.max_abs, tally.max_rel
    if tally.bad_non_finite:
        first = tally.first_bad
        out_value = _as_float64(np.asarray(output).reshape(-1)[first : first + 1])[0]
        ref_value = _as_float64(np.asarray(reference).reshape(-1)[first : first + 1])[0]
        allowed = " (-inf in both is allowed here)" if tolerance.allow_negative_inf else ""
        return ToleranceResult(
            False,
            max_abs,
            max_rel,
            ratio,
            f"{name}: {tally.bad_non_finite} of {total} elements are NaN/Inf in the output or "
            f"the reference{allowed}; non-finite values fail even where both agree (first at "
            f"flat index {first}: output {out_value!r}, reference {ref_value!r})",
            tally.bad_non_finite,
        )
    if tolerance.max_error_cap is not None and max_abs > tolerance.max_error_cap:
        return ToleranceResult(
            False,
            max_abs,
            max_rel,
            ratio,
            f"{name}: max abs error {max_abs:.6g} exceeds the cap {tolerance.max_error_cap:g}",
        )
    if ratio < tolerance.required_matched_ratio:
        return ToleranceResult(
            False,
            max_abs,
            max_rel,
            ratio,
            f"{name}: only {tally.matched} of {total} elements ({ratio:.4%}) within tolerance "
            f"({tolerance.describe()}); max abs error {max_abs:.6g}, max rel error {max_rel:.6g}",
        )
    return ToleranceResult(True, max_abs, max_rel, ratio, None)


# --- poisoning -----------------------------------------------------------------------------

# Quiet NaNs with a payload no arithmetic produces (hardware NaNs are canonical), so a
# written NaN is never mistaken for "unwritten".
_FLOAT_POISON: dict[str, bytes] = {
    "float64": (0x7FFBADBADBADBADB).to_bytes(8, "little"),
    "float32": (0x7FFADBAD).to_bytes(4, "little"),
    "float16": (0x7EDB).to_bytes(2, "little"),
    "bfloat16": (0x7FDB).to_bytes(2, "little"),
    # float8: e4m3fn has a single NaN encoding (S.1111.111); e5m2 has a few (S.11111.xx).
    "float8_e4m3fn": bytes([0x7F]),
    "float8_e5m2": bytes([0x7E]),
}


def poison_pattern(dtype: np.dtype[np.generic]) -> bytes:
    """One element's worth of poison for ``dtype`` (the backend repeats it over a buffer)."""
    name = dtype_name(dtype)
    if name in _FLOAT_POISON:
        return _FLOAT_POISON[name]
    # Integers and bool: all-ones bytes (-1 / max unsigned / an invalid bool byte).
    return b"\xff" * dtype.itemsize


def poisoned(shape: tuple[int, ...], dtype: np.dtype[np.generic]) -> npt.NDArray[np.generic]:
    """A host array filled with the poison (what a fully poisoned buffer reads back as)."""
    count = int(np.prod(shape, dtype=np.int64))
    raw = np.frombuffer(poison_pattern(dtype) * count, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


def _bits(array: npt.NDArray[np.generic]) -> npt.NDArray[np.generic]:
    # Compare bit patterns, not values: NaN ≠ NaN numerically.
    contiguous = np.ascontiguousarray(array)
    width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[contiguous.dtype.itemsize]
    return contiguous.view(width).ravel()


@dataclass(frozen=True)
class WrittenResult:
    ok: bool
    unwritten: int
    total: int
    reason: str | None


def check_written(
    output: npt.NDArray[np.generic],
    reference: npt.NDArray[np.generic] | None = None,
    *,
    name: str = "output",
) -> WrittenResult:
    """Every element of ``output`` must differ from the poison pattern (bitwise).

    ``reference`` (cast to the output dtype) excuses elements whose correct value is the
    poison itself, so an integer kernel that legitimately writes -1 is not flagged.
    """
    poison = _bits(poisoned((1,), output.dtype))[0]
    still = _bits(output) == poison
    if reference is not None and reference.shape == output.shape:
        expected = np.asarray(reference).astype(output.dtype)
        still &= _bits(expected) != poison
    count = int(still.sum())
    total = int(output.size)
    if count == 0:
        return WrittenResult(True, 0, total, None)
    first = int(np.flatnonzero(still)[0])
    return WrittenResult(
        False,
        count,
        total,
        f"{name}: {count} of {total} elements were never written (still the poison "
        f"pattern; first at flat index {first})",
    )


# --- mutation -------------------------------------------------------------------------------


def digest(array: npt.NDArray[np.generic]) -> str:
    """sha256 hex of the array's bytes in C order (shape and dtype are fixed by the spec)."""
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def mutated_inputs(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Names of inputs whose digest changed (or vanished), in ``before``'s order."""
    return [name for name, value in before.items() if after.get(name) != value]


# --- dtypes ---------------------------------------------------------------------------------

# SOL dtype names → numpy dtypes. float4 types are deliberately absent: they are packed
# two to a byte and have no host representation we could check element by element.
DTYPES: dict[str, np.dtype[np.generic]] = {
    "float64": np.dtype(np.float64),
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "int64": np.dtype(np.int64),
    "int32": np.dtype(np.int32),
    "int16": np.dtype(np.int16),
    "int8": np.dtype(np.int8),
    "uint8": np.dtype(np.uint8),
    "uint32": np.dtype(np.uint32),
    "uint64": np.dtype(np.uint64),
    "bool": np.dtype(np.bool_),
}


def dtype_name(dtype: np.dtype[np.generic]) -> str:
    for name, known in DTYPES.items():
        if known == dtype:
            return name
    return str(dtype)


def is_float(dtype: np.dtype[np.generic]) -> bool:
    return dtype_name(dtype) in _FLOAT_POISON
