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
    "float16": "e",
    "float32": "f",
    "float64": "d",
}
_UNSIGNED_BY_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


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
    # Other dtypes of 1/2/4/8 bytes (bfloat16, float8...): pass the bits unchanged.
    bits = np.asarray(arg).reshape(1).view(unsigned)[0]
    return SCALAR_FORMATS[np.dtype(unsigned).name], bits


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
