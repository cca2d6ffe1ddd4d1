"""The trusted numpy references compute the right values (against float64 ground truth)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from gpu_agent.checks import Tolerance, compare
from gpu_agent.references import (
    UnknownReferenceError,
    known_definitions,
    reference_for,
)

BF16 = np.dtype(ml_dtypes.bfloat16)


def _bf16(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(BF16)


def test_rmsnorm_matches_float64() -> None:
    rng = np.random.default_rng(1)
    x, w = _bf16(rng, 9, 4096), _bf16(rng, 4096)
    out = reference_for("rmsnorm_h4096")(hidden_states=x, weight=w)["output"]
    assert out.dtype == BF16 and out.shape == (9, 4096)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    truth = x64 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + 1e-5) * w64
    # Only the final rounding to bfloat16 separates them: half an ulp (2^-8 relative).
    np.testing.assert_allclose(out.astype(np.float64), truth, rtol=2**-8, atol=1e-6)
    assert compare(out, truth.astype(BF16), Tolerance()).ok


def test_rmsnorm_uses_eps() -> None:
    zeros = np.zeros((2, 4096), dtype=BF16)
    out = reference_for("rmsnorm_h4096")(hidden_states=zeros, weight=np.ones(4096, BF16))
    assert np.all(out["output"].astype(np.float32) == 0)  # 0 · rsqrt(0 + eps), no NaN


def test_rmsnorm_refuses_wrong_shapes() -> None:
    rng = np.random.default_rng(2)
    with pytest.raises(ValueError, match="4096"):
        reference_for("rmsnorm_h4096")(hidden_states=_bf16(rng, 2, 2048), weight=_bf16(rng, 4096))


def test_silu_and_mul_matches_float64() -> None:
    rng = np.random.default_rng(3)
    x = _bf16(rng, 5, 2 * 14336)
    out = reference_for("silu_and_mul_i14336")(x=x)["out"]
    assert out.dtype == BF16 and out.shape == (5, 14336)
    x64 = x.astype(np.float64)
    gate, up = x64[:, :14336], x64[:, 14336:]
    truth = gate / (1 + np.exp(-gate)) * up
    np.testing.assert_allclose(out.astype(np.float64), truth, rtol=2**-8, atol=1e-6)


def test_silu_saturates_without_nan() -> None:
    x = np.zeros((1, 2 * 14336), dtype=np.float32)
    x[0, 0], x[0, 1], x[0, 14336:] = -200.0, 200.0, 1.0
    out = reference_for("silu_and_mul_i14336")(x=x.astype(BF16))["out"].astype(np.float32)
    assert np.isfinite(out).all()
    assert out[0, 0] == 0 and out[0, 1] == 200


def test_unknown_definitions_are_a_clear_lookup_error() -> None:
    with pytest.raises(UnknownReferenceError) as caught:
        reference_for("gemm_n4096_k4096")
    assert isinstance(caught.value, LookupError)  # what the harness catches
    message = str(caught.value)
    assert "gemm_n4096_k4096" in message and "rmsnorm_h4096" in message


def test_every_sample_definition_has_a_reference() -> None:
    from gpu_agent.samples import all_samples

    for sample in all_samples():
        assert sample.definition["name"] in known_definitions()
