"""Tolerance, poisoning and mutation checks (gpu_agent/checks.py)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from gpu_agent import checks
from gpu_agent.checks import (
    DTYPES,
    Tolerance,
    check_written,
    compare,
    digest,
    mutated_inputs,
    poison_pattern,
    poisoned,
)

STRICT = Tolerance(atol=0.1, rtol=0.1, required_matched_ratio=1.0)


def test_boundary_is_inclusive() -> None:
    ref = np.array([1.0, 0.0, -2.0])
    # atol + rtol·|ref| = 0.2, 0.1, 0.3 exactly (dyadic-friendly values avoid rounding doubt).
    tolerance = Tolerance(atol=0.125, rtol=0.125, required_matched_ratio=1.0)
    at_bound = ref + np.array([0.25, 0.125, -0.375])
    result = compare(at_bound, ref, tolerance)
    assert result.ok and result.matched_ratio == 1.0
    assert result.max_abs_error == 0.375
    assert result.max_rel_error == 0.25  # 0.25/1 and 0.375/2; ref = 0 excluded from rel
    over = ref + np.array([0.25, 0.125 + 2**-20, -0.375])
    failed = compare(over, ref, tolerance)
    assert not failed.ok
    assert "only 2 of 3 elements" in (failed.reason or "")


def test_matched_ratio() -> None:
    ref = np.zeros(100)
    out = ref.copy()
    out[:1] = 1.0  # one element way off: 99 % match
    assert compare(out, ref, Tolerance(atol=0.01, rtol=0, required_matched_ratio=0.99)).ok
    out[:2] = 1.0  # 98 %
    result = compare(out, ref, Tolerance(atol=0.01, rtol=0, required_matched_ratio=0.99))
    assert not result.ok and result.matched_ratio == pytest.approx(0.98)
    assert result.max_abs_error == 1.0


def test_error_cap_fails_regardless_of_ratio() -> None:
    ref = np.zeros(1000)
    out = ref.copy()
    out[0] = 0.5
    lenient = Tolerance(atol=0.01, rtol=0, required_matched_ratio=0.99)
    assert compare(out, ref, lenient).ok
    capped = Tolerance(atol=0.01, rtol=0, required_matched_ratio=0.99, max_error_cap=0.25)
    result = compare(out, ref, capped)
    assert not result.ok and "exceeds the cap" in (result.reason or "")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_output_fails_whatever_the_ratio(bad: float) -> None:
    ref = np.ones(1000)
    out = ref.copy()
    out[5] = bad
    lenient = Tolerance(atol=1.0, rtol=1.0, required_matched_ratio=0.5)
    result = compare(out, ref, lenient)
    assert not result.ok
    assert "1 of 1000 elements are NaN/Inf in the output or the reference" in (result.reason or "")
    assert result.max_abs_error == 0.0  # finite elements only: JSON-safe


def test_matching_nan_and_inf_are_rejected_as_sol_does() -> None:
    ref = np.array([np.nan, np.inf, -np.inf, 1.0])
    for index in range(3):  # the same non-finite value in both still fails
        out = np.array([0.0, 0.0, 0.0, 1.0])
        ref_one = np.array([0.0, 0.0, 0.0, 1.0])
        out[index] = ref_one[index] = ref[index]
        result = compare(out, ref_one, STRICT)
        assert not result.ok, index
        assert "fail even where both agree" in (result.reason or "")
    for index, replacement in [(0, 0.0), (1, -np.inf), (2, np.nan), (1, 1e300)]:
        out = ref.copy()
        out[index] = replacement
        assert not compare(out, ref, STRICT).ok, (index, replacement)


def test_allow_negative_inf_accepts_only_matching_negative_infinity() -> None:
    allow = Tolerance(atol=0.1, rtol=0.1, required_matched_ratio=1.0, allow_negative_inf=True)
    ref = np.array([-np.inf, 1.0, 2.0])
    result = compare(ref.copy(), ref, allow)
    assert result.ok and result.matched_ratio == 1.0 and result.max_abs_error == 0.0
    assert not compare(ref.copy(), ref, STRICT).ok  # without the flag: rejected
    for out in ([np.inf, 1.0, 2.0], [-np.inf, np.nan, 2.0], [0.0, 1.0, 2.0]):
        assert not compare(np.array(out), ref, allow).ok, out
    plus = np.array([np.inf, 1.0, 2.0])
    assert not compare(plus, plus, allow).ok  # +inf is unaffected by the flag


def test_chunked_comparison_agrees_with_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    ref = rng.standard_normal(10_000)
    out = ref + rng.normal(0, 0.02, size=ref.size)
    out[7_777] = np.nan
    whole = compare(out, ref, Tolerance())
    monkeypatch.setattr(checks, "COMPARE_CHUNK", 1_000)  # ten chunks, the NaN in the eighth
    chunked = compare(out, ref, Tolerance())
    assert chunked == whole and not chunked.ok
    assert "first at flat index 7777" in (chunked.reason or "")
    out[7_777] = ref[7_777]
    assert compare(out, ref, Tolerance()).max_abs_error == pytest.approx(
        float(np.abs(out - ref).max())
    )


def test_a_bfloat16_output_of_several_chunks_is_compared_as_a_whole() -> None:
    # compare walks COMPARE_CHUNK elements at a time (so a 58 M-element output needs no
    # whole-array float64 temporaries; its speed is in benchmarks/bench_agent.py): what it
    # finds over the chunks is what one pass over the whole array would find.
    bf16 = np.dtype(ml_dtypes.bfloat16)
    size = 2 * checks.COMPARE_CHUNK + 5
    ref = np.random.default_rng(0).standard_normal(size, dtype=np.float32).astype(bf16)
    assert compare(ref, ref.copy(), Tolerance()).ok
    out = ref.copy()
    out[-1] = np.float32(ref[-1]) + 64.0  # in the last, partial chunk
    out[3] = np.float32(ref[3]) - 32.0  # and one in the first
    result = compare(out, ref, Tolerance(atol=1.0, rtol=0.0, required_matched_ratio=1.0))
    assert not result.ok
    assert result.max_abs_error == pytest.approx(64.0, abs=1.0)
    assert result.matched_ratio == (size - 2) / size


def test_bfloat16_outputs_and_shape_mismatch() -> None:
    ref = np.array([1.0, 2.0, 3.0], dtype=ml_dtypes.bfloat16)
    out = np.array([1.0, 2.0, 3.015625], dtype=ml_dtypes.bfloat16)  # one bf16 ulp at 3
    result = compare(out, ref, Tolerance())
    assert result.ok and result.max_abs_error == 0.015625
    mismatch = compare(out.reshape(3, 1), ref, Tolerance())
    assert not mismatch.ok and "shape" in (mismatch.reason or "")
    assert compare(np.zeros(0), np.zeros(0), STRICT).ok


def test_poison_patterns_are_nans_for_floats_and_ones_for_ints() -> None:
    for name in ("float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"):
        dtype = DTYPES[name]
        assert len(poison_pattern(dtype)) == dtype.itemsize
        values = poisoned((4,), dtype).astype(np.float64)
        assert np.isnan(values).all(), name
    for name in ("int32", "int64", "int8", "uint8", "bool"):
        dtype = DTYPES[name]
        assert poison_pattern(dtype) == b"\xff" * dtype.itemsize
    # A distinctive payload, not the canonical NaN arithmetic produces.
    canonical = np.array([np.nan], dtype=np.float32).tobytes()
    assert poison_pattern(DTYPES["float32"]) != canonical


def test_unwritten_elements_are_detected() -> None:
    dtype = DTYPES["bfloat16"]
    out = poisoned((4, 8), dtype).copy()
    assert not check_written(out).ok
    out[:] = 1.0
    assert check_written(out).ok
    out[3, -2:] = poisoned((2,), dtype)
    result = check_written(out, name="output")
    assert not result.ok and result.unwritten == 2 and result.total == 32
    assert "2 of 32 elements were never written" in (result.reason or "")
    assert "flat index 30" in (result.reason or "")


def test_a_written_canonical_nan_is_not_unwritten() -> None:
    out = np.full(4, np.nan, dtype=np.float32)  # a kernel really wrote NaNs
    assert check_written(out).ok


def test_integer_poison_is_excused_where_the_answer_is_the_poison() -> None:
    out = np.array([-1, 5, -1], dtype=np.int32)
    assert not check_written(out).ok
    # The reference says -1 at 0 (legitimately written) but 7 at 2 (never written).
    result = check_written(out, np.array([-1, 5, 7], dtype=np.int32))
    assert not result.ok and result.unwritten == 1
    assert check_written(out, np.array([-1, 5, -1], dtype=np.int32)).ok


def test_mutation_detection() -> None:
    x = np.arange(16, dtype=np.float32)
    w = np.ones(4, dtype=ml_dtypes.bfloat16)
    before = {"x": digest(x), "w": digest(w)}
    assert mutated_inputs(before, {"x": digest(x.copy()), "w": digest(w.copy())}) == []
    changed = x.copy()
    changed[7] = np.nextafter(changed[7], np.float32(100))  # one ulp
    assert mutated_inputs(before, {"x": digest(changed), "w": digest(w)}) == ["x"]
    assert mutated_inputs(before, {"x": digest(x)}) == ["w"]
