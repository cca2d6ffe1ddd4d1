"""Releasing the PyCUDA backend's primary context so that no context is left current.

PyCUDA's ``Context.detach()`` on a retained *primary* context (``retain_primary_context``)
pushes it onto the driver's context stack when it is not current and then calls
``cuDevicePrimaryCtxRelease``, which — unlike ``cuCtxDetach`` for an ordinary context — does
not pop it (pycuda ``src/cpp/cuda.hpp``: ``context::detach`` says "pop is implicit in
detach", true only of ``cuCtxDetach``). The released context then stays current on the
thread, and the next CUDA user in the process (torch in the self-check, a second backend)
runs in a context whose reference it no longer holds. :func:`release_primary` pops
PyCUDA's stack, detaches, then pops the driver's stack through ``cuCtxPopCurrent`` for as
long as the released context is still current there.

Nothing here imports PyCUDA; the driver's stack is read through ctypes (:class:`LibcudaStack`)
or, in tests, through any :class:`DriverStack`.
"""

from __future__ import annotations

import contextlib
import ctypes
from typing import Any, Protocol

# More than any backend pushes: a bound, so a confused driver cannot loop us forever.
MAX_POPS = 8


class DriverStack(Protocol):
    """The calling thread's context stack, as the CUDA driver keeps it."""

    def current(self) -> int | None:
        """The handle of the current context; None when none is current (or unknown)."""
        ...

    def pop(self) -> None:
        """Pop the current context (``cuCtxPopCurrent``)."""
        ...


class LibcudaStack:
    """:class:`DriverStack` over ``libcuda.so.1`` (the driver PyCUDA itself uses)."""

    def __init__(self, library: Any) -> None:
        self._lib = library

    @classmethod
    def load(cls) -> LibcudaStack | None:
        try:
            return cls(ctypes.CDLL("libcuda.so.1"))
        except OSError:
            return None

    def current(self) -> int | None:
        handle = ctypes.c_void_p()
        if self._lib.cuCtxGetCurrent(ctypes.byref(handle)) != 0:
            return None
        return handle.value or None

    def pop(self) -> None:
        popped = ctypes.c_void_p()
        pop = getattr(self._lib, "cuCtxPopCurrent_v2", None) or self._lib.cuCtxPopCurrent
        pop(ctypes.byref(popped))


def release_primary(context: Any, stack: DriverStack | None) -> int:
    """Pop and detach PyCUDA's ``context`` (a retained primary context, pushed once), then
    leave it current nowhere; returns how many driver pops that took (0 where PyCUDA did)."""
    handle = int(context.handle)
    try:
        context.pop()
    finally:
        context.detach()
    if stack is None:
        return 0
    pops = 0
    while pops < MAX_POPS and stack.current() == handle:
        with contextlib.suppress(Exception):  # a failing pop ends the loop at the bound
            stack.pop()
        pops += 1
    return pops
