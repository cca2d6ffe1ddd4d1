"""Trusted numpy references for the definitions the agent can check without torch.

A reference takes the inputs as numpy arrays by name (SOL order: the definition's inputs, a
``shape: null`` scalar as a numpy or Python scalar) and returns every output by name, with
the dtype the definition declares. Like SOL-ExecBench's PyTorch references they upcast to
float32, compute there, and round once to the output dtype (bfloat16 through ``ml_dtypes``),
so a correct kernel differs from them only by accumulation order and the last rounding.

These run in the agent's trusted process; a submission never supplies its own reference.
"""

from __future__ import annotations

from collections.abc import Callable

import ml_dtypes
import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.generic]
Reference = Callable[..., dict[str, Array]]

BF16 = np.dtype(ml_dtypes.bfloat16)
RMSNORM_EPS = 1e-5


class UnknownReferenceError(KeyError):
    """No trusted numpy reference exists for this definition name."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown definition"


def _f32(array: Array) -> npt.NDArray[np.float32]:
    return np.asarray(array).astype(np.float32)


def rmsnorm_h4096(hidden_states: Array, weight: Array) -> dict[str, Array]:
    """``rmsnorm_h4096``: y = x · rsqrt(mean(x²) + 1e-5) · w, fp32 inside, output in x's dtype."""
    x = _f32(hidden_states)
    if x.ndim != 2 or x.shape[1] != 4096:
        raise ValueError(f"hidden_states must be [batch_size, 4096], got {x.shape}")
    if np.asarray(weight).shape != (4096,):
        raise ValueError(f"weight must be [4096], got {np.asarray(weight).shape}")
    mean_sq = np.mean(x * x, axis=-1, keepdims=True, dtype=np.float32)
    inv_rms = (np.float32(1.0) / np.sqrt(mean_sq + np.float32(RMSNORM_EPS))).astype(np.float32)
    y = (x * inv_rms) * _f32(weight)
    return {"output": y.astype(np.asarray(hidden_states).dtype)}


def silu_and_mul_i14336(x: Array) -> dict[str, Array]:
    """``silu_and_mul_i14336``: out = silu(x[:, :d]) · x[:, d:], d = 14336, fp32 inside."""
    xf = _f32(x)
    if xf.ndim != 2 or xf.shape[1] != 2 * 14336:
        raise ValueError(f"x must be [num_tokens, 28672], got {xf.shape}")
    d = xf.shape[1] // 2
    gate, up = xf[:, :d], xf[:, d:]
    with np.errstate(over="ignore"):  # exp(-g) → inf for very negative g: silu → -0, fine
        silu = gate / (np.float32(1.0) + np.exp(-gate))
    return {"out": (silu * up).astype(np.asarray(x).dtype)}


_REFERENCES: dict[str, Reference] = {
    "rmsnorm_h4096": rmsnorm_h4096,
    "silu_and_mul_i14336": silu_and_mul_i14336,
}


def known_definitions() -> tuple[str, ...]:
    """The definition names that have a trusted numpy reference, sorted."""
    return tuple(sorted(_REFERENCES))


def reference_for(definition_name: str) -> Reference:
    """The trusted numpy reference of ``definition_name``; UnknownReferenceError otherwise."""
    try:
        return _REFERENCES[definition_name]
    except KeyError:
        raise UnknownReferenceError(
            f"no trusted numpy reference for definition {definition_name!r} "
            f"(known: {', '.join(known_definitions())}); it needs torch to evaluate its "
            "own reference, or a numpy reference added to gpu_agent/references"
        ) from None
