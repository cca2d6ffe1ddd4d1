"""Deterministic inputs for each correctness round.

Round seeds (protocol ``kernelindex-rerun-v1``), each the first 8 bytes (big-endian) of a
SHA-256 seeding a numpy ``Generator(PCG64)``:

* public round ``r`` (r = 0, 1): ``sha256("kernelindex-rerun-v1|public|{job_id}|{case}|{r}")``
* secret round:                  ``sha256("kernelindex-rerun-v1|secret|{nonce}|{case}")``
* post-timing round:             ``sha256("kernelindex-rerun-v1|post|{nonce}|{case}")``
* round order: the three pre-timing rounds are run in the order given by a permutation
  drawn from ``sha256("kernelindex-rerun-v1|order|{nonce}|{case}")``, so a kernel cannot
  learn which launch is the secret one by counting launches.

``case`` is the workload uuid. Anyone holding the job (its id and nonce, both in the signed
rerun request) can regenerate every input; nobody could before the job existed, since the
admin draws the nonce then. The timed launches' input variants
(``correctness_round.timing_variant_seed``) and the Python path's audit and hidden rounds
below are seeded the same way. Only the agent derives seeds from the nonce: a case child, which
holds submitted code, is sent the seeds, never the nonce (``correctness_round.case_seeds``,
``python_solutions.job.case_rounds``).

Generation per dtype (mirroring SOL's ``torch.randn`` "or appropriate random for the dtype"):
float types: standard normal in float64, rounded to the dtype; integers: uniform in
``[0, 128)`` (non-negative, so index-like inputs stay small); bool: fair coin. Inputs come
in the definition's order, each drawn from the same generator, so one seed fixes all.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from gpu_agent.definition import Definition, scalar_input
from gpu_agent.sol_parsing import SolutionError
from gpu_agent.workload import Workload

PROTOCOL = "kernelindex-rerun-v1"
PUBLIC_ROUNDS = 2
INT_HIGH = 128

RoundKind = Literal["public", "secret", "post"]


@dataclass(frozen=True)
class Round:
    label: str  # "public-0", "public-1", "secret", "post-timing"
    kind: RoundKind
    seed: int


def _seed(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def public_seed(job_id: str, case: str, index: int) -> int:
    return _seed(f"{PROTOCOL}|public|{job_id}|{case}|{index}")


def secret_seed(nonce: str, case: str) -> int:
    return _seed(f"{PROTOCOL}|secret|{nonce}|{case}")


def post_timing_seed(nonce: str, case: str) -> int:
    return _seed(f"{PROTOCOL}|post|{nonce}|{case}")


def correctness_rounds(job_id: str, nonce: str, case: str) -> list[Round]:
    """The pre-timing rounds (two public, one secret) in their nonce-shuffled order."""
    rounds = [Round(f"public-{i}", "public", public_seed(job_id, case, i)) for i in range(2)]
    rounds.append(Round("secret", "secret", secret_seed(nonce, case)))
    order = np.random.default_rng(_seed(f"{PROTOCOL}|order|{nonce}|{case}")).permutation(3)
    return [rounds[int(i)] for i in order]


def post_timing_round(nonce: str, case: str) -> Round:
    return Round("post-timing", "post", post_timing_seed(nonce, case))


def audit_round(nonce: str, case: str) -> Round:
    """The inputs of the one untimed call made among the timed ones (Python solutions)."""
    return Round("timing-audit", "secret", _seed(f"{PROTOCOL}|audit|{nonce}|{case}"))


def hidden_round(nonce: str, case: str) -> Round:
    """The round on the hidden workload (see :func:`hidden_axes`), seeded from the nonce."""
    return Round("hidden-workload", "secret", _seed(f"{PROTOCOL}|hidden|{nonce}|{case}"))


HIDDEN_DRAWS = 32


def hidden_axes(
    definition: Definition, workloads: Sequence[Workload], nonce: str
) -> dict[str, int] | None:
    """A workload the submitter has not seen: var-axis values drawn from the nonce.

    Each var axis is drawn uniformly within the range the job's workloads span (when they all
    agree on one value v, within [max(1, v // 2), v + v // 2 + 1]), so the hidden case is no
    larger than what the job already asks; a draw must satisfy the definition's constraints
    and differ from every given workload. ``None`` when the definition has no var axis, or
    no draw in :data:`HIDDEN_DRAWS` qualifies."""
    names = [name for name, axis in definition.axes.items() if axis.kind == "var"]
    if not names or not workloads:
        return None
    seen = {tuple(w.axes[n] for n in names) for w in workloads}
    bounds = {n: _axis_bounds([w.axes[n] for w in workloads]) for n in names}
    rng = np.random.default_rng(_seed(f"{PROTOCOL}|hidden-axes|{nonce}"))
    for _ in range(HIDDEN_DRAWS):
        drawn = {n: int(rng.integers(low, high + 1)) for n, (low, high) in bounds.items()}
        if tuple(drawn[n] for n in names) in seen:
            continue
        try:
            definition.resolve_axes(drawn)
        except SolutionError:
            continue
        return drawn
    return None


def _axis_bounds(values: Sequence[int]) -> tuple[int, int]:
    low, high = min(values), max(values)
    if low == high:
        return max(1, low // 2), low + low // 2 + 1
    return low, high


def _random_array(
    rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype[np.generic]
) -> npt.NDArray[np.generic]:
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape, dtype=np.uint8).astype(np.bool_)
    if dtype.kind in "iu":
        return rng.integers(0, INT_HIGH, size=shape, dtype=np.int64).astype(dtype)
    # Floats, including the ml_dtypes ones (bfloat16, float8): rounded from float64.
    return rng.standard_normal(size=shape, dtype=np.float64).astype(dtype)


def generate(
    definition: Definition, workload: Workload, seed: int, *, skip_custom: bool = False
) -> dict[str, npt.NDArray[np.generic] | np.generic]:
    """All inputs of ``workload`` for one round: arrays for tensors, numpy scalars for
    ``shape: null`` inputs, keyed and ordered as the definition's inputs. ``custom`` inputs
    (made by the definition's reference code, in a case child) are left out with
    ``skip_custom`` and refused otherwise."""
    axes = definition.resolve_axes(workload.axes)
    rng = np.random.default_rng(seed)
    values: dict[str, npt.NDArray[np.generic] | np.generic] = {}
    for spec in definition.inputs:
        source = workload.inputs[spec.name]
        shape = definition.shape(spec, axes)
        if source.kind == "custom" and skip_custom:
            continue
        if source.kind == "scalar":
            assert source.value is not None
            scalar = scalar_input(spec, source.value)
            values[spec.name] = (
                scalar if spec.shape is None else np.full(shape, scalar, dtype=spec.numpy_dtype)
            )
        elif source.kind == "random":
            values[spec.name] = _random_array(rng, shape, spec.numpy_dtype)
        else:  # parse_workload refuses every other kind; keep the guard explicit
            raise SolutionError(f"input {spec.name!r}: unsupported source {source.kind!r}")
    return values


def output_shapes(
    definition: Definition, workload: Workload
) -> dict[str, tuple[tuple[int, ...], np.dtype[np.generic]]]:
    axes = definition.resolve_axes(workload.axes)
    return {s.name: (definition.shape(s, axes), s.numpy_dtype) for s in definition.outputs}


def describe_inputs(values: Mapping[str, Any]) -> str:
    return ", ".join(
        f"{k}{tuple(v.shape)}:{v.dtype}" if isinstance(v, np.ndarray) else f"{k}={v!r}"
        for k, v in values.items()
    )
