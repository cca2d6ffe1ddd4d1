"""Launch specs: grid, block and shared memory from integer expressions over workload axes.

A submitted launch spec says e.g. ``"grid": ["ceil_div(batch_size, 4)"]``. The agent must
evaluate it without running submitted code: ``domain.expressions`` (the one expression
language, which the importers use for SOL and FlashInfer axes too) parses it, never ``eval``.
Launch specs use its base grammar (``+ - * // %``, ``ceil_div``, ``min``, ``max``); SOL
``expr`` axes its extended one (also ``**`` and exact ``/``). The CUDA limits are here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from domain import expressions
from domain.expressions import ExpressionError

# CUDA launch limits (all current architectures): gridDim.x ≤ 2^31−1, gridDim.y/z ≤ 65535,
# blockDim.x/y ≤ 1024, blockDim.z ≤ 64 and at most 1024 threads per block.
MAX_GRID = (2**31 - 1, 65_535, 65_535)
MAX_BLOCK = (1_024, 1_024, 64)
MAX_THREADS_PER_BLOCK = 1_024
# The largest dynamic shared memory any current NVIDIA GPU allows per block (227 KiB,
# Hopper/Blackwell opt-in); the backend still rejects what its own device cannot give.
MAX_SHARED_MEM_BYTES = 227 * 1024


class LaunchSpecError(ValueError):
    """A launch expression is malformed, unknown, or evaluates out of range."""


def evaluate(expression: str | int, variables: Mapping[str, int], *, extended: bool = False) -> int:
    """The integer value of a launch expression (``extended``: a SOL ``expr`` axis) with
    ``variables`` bound: ``domain.expressions``, the importers' language too."""
    try:
        return expressions.evaluate(expression, variables, extended=extended)
    except ExpressionError as exc:
        raise LaunchSpecError(exc.message) from None


def _dims(
    what: str,
    expressions: Sequence[str | int],
    variables: Mapping[str, int],
    limits: tuple[int, int, int],
) -> tuple[int, int, int]:
    if not 1 <= len(expressions) <= 3:
        raise LaunchSpecError(f"{what} needs 1 to 3 dimensions, got {len(expressions)}")
    values = [evaluate(e, variables) for e in expressions]
    values += [1] * (3 - len(values))
    for axis, (value, limit) in enumerate(zip(values, limits, strict=True)):
        if not 1 <= value <= limit:
            raise LaunchSpecError(
                f"{what}[{axis}] = {value} is outside 1..{limit} "
                f"(from {expressions[axis] if axis < len(expressions) else 1!r})"
            )
    return values[0], values[1], values[2]


def grid_dims(
    expressions: Sequence[str | int], variables: Mapping[str, int]
) -> tuple[int, int, int]:
    """Grid (x, y, z) from 1–3 expressions; missing dimensions are 1."""
    return _dims("grid", expressions, variables, MAX_GRID)


def block_dims(
    expressions: Sequence[str | int], variables: Mapping[str, int]
) -> tuple[int, int, int]:
    """Block (x, y, z) from 1–3 expressions, at most 1024 threads in total."""
    x, y, z = _dims("block", expressions, variables, MAX_BLOCK)
    if x * y * z > MAX_THREADS_PER_BLOCK:
        raise LaunchSpecError(
            f"block {x}×{y}×{z} = {x * y * z} threads exceeds {MAX_THREADS_PER_BLOCK}"
        )
    return x, y, z


def shared_mem_bytes(expression: str | int, variables: Mapping[str, int]) -> int:
    value = evaluate(expression, variables)
    if not 0 <= value <= MAX_SHARED_MEM_BYTES:
        raise LaunchSpecError(f"sharedMemBytes = {value} is outside 0..{MAX_SHARED_MEM_BYTES}")
    return value
