"""How the PyCUDA backend hands data to the device: host arrays as raw bytes, and kernel
arguments packed for PyCUDA's prepared calls (buffers as pointers, numpy scalars by value
under their struct characters). Nothing here imports PyCUDA.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from gpu_agent.backends.base import BackendError, KernelArg

# The struct characters PyCUDA can pack: it packs kernel parameters with its own copy of an
# old ``struct`` module (``pycuda._pvt_struct``), which has no ``e`` (half) — float16 goes by
# its bits, as ``H``, like every other 2-byte type without a character of its own.
PVT_STRUCT_CHARS = frozenset("xbBchHiIlLnNqQ?fdFDPs")

# Struct characters (native alignment, as the CUDA ABI lays out kernel parameters) for
# the scalar argument types a launch spec can declare, plus the small ones for completeness.
SCALAR_FORMATS: dict[str, str] = {
    "int8": "b",
    "uint8": "B",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "uint64": "Q",
    "float32": "f",
    "float64": "d",
}
_UNSIGNED_BY_SIZE: dict[int, type[np.unsignedinteger[Any]]] = {
    1: np.uint8,
    2: np.uint16,
    4: np.uint32,
    8: np.uint64,
}


def as_bytes(host: npt.NDArray[np.generic]) -> npt.NDArray[np.uint8]:
    """The array's bytes in C order as uint8 (custom dtypes such as bfloat16 included)."""
    array = np.ascontiguousarray(host)
    return array.reshape(-1).view(np.uint8)


def scalar_format(arg: np.generic, index: int) -> tuple[str, Any]:
    """``(struct character, value)`` passing the scalar ``arg`` (argument ``index``) by value."""
    dtype = arg.dtype
    fmt = SCALAR_FORMATS.get(dtype.name)
    if fmt is not None:
        return fmt, arg
    unsigned = _UNSIGNED_BY_SIZE.get(dtype.itemsize)
    if unsigned is None:
        raise BackendError(f"argument {index}: scalar type {dtype} cannot be passed by value")
    # Other dtypes of 1/2/4/8 bytes (float16, bfloat16, float8...): pass the bits unchanged.
    bits = np.asarray(arg).reshape(1).view(unsigned)[0]
    return SCALAR_FORMATS[np.dtype(unsigned).name], int(bits)


def call_value(arg: np.generic, index: int) -> np.generic:
    """``arg`` as PyCUDA's plain ``Function.__call__`` can pack it (by ``dtype.char``): itself,
    or its bits as an unsigned numpy scalar where PyCUDA has no character for its type."""
    fmt, value = scalar_format(arg, index)
    if fmt == SCALAR_FORMATS.get(arg.dtype.name):
        return arg
    unsigned = _UNSIGNED_BY_SIZE[arg.dtype.itemsize]
    return unsigned(value)


def pack_arguments(
    args: Sequence[KernelArg], buffer_pointer: Callable[[object], int | None]
) -> tuple[str, list[Any]]:
    """``(format string, values)`` for a prepared call with ``args``.

    ``buffer_pointer(arg)``: the pointer of a device buffer of the backend (raising for one
    of another backend), None for anything that is not a device buffer."""
    formats: list[str] = []
    values: list[Any] = []
    for index, arg in enumerate(args):
        pointer = buffer_pointer(arg)
        if pointer is not None:
            formats.append("P")
            values.append(pointer)
        elif isinstance(arg, np.generic):
            fmt, value = scalar_format(arg, index)
            formats.append(fmt)
            values.append(value)
        else:
            raise BackendError(
                f"argument {index} is neither a buffer of this backend nor a numpy scalar "
                f"({type(arg).__name__})"
            )
    return "".join(formats), values


def memset_plan(pattern: bytes, size: int) -> tuple[int, int, int] | None:
    """``(width, value, count)`` for a ``cuMemsetD8/16/32`` that repeats ``pattern`` over
    ``size`` bytes, or None when no memset can (an 8-byte pattern, a size it does not tile):
    then the backend copies a host image of the whole buffer."""
    width = len(pattern)
    if width == 0:
        raise BackendError("fill needs a non-empty pattern")
    if pattern == pattern[:1] * width:  # one repeated byte (covers 1-byte patterns)
        return 1, pattern[0], size
    if width in (2, 4) and size % width == 0:
        return width, int.from_bytes(pattern, "little"), size // width
    return None
