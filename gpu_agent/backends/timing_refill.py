"""What every timed launch starts from, so a kernel cannot tell it from a checked one.

A correctness launch gets freshly poisoned outputs and fresh inputs, in the same buffers as
the rounds before it (the harness refills them with ``write``). If timed launches got
neither — outputs still holding the last result, inputs unchanged — a kernel could compute
only when its output is poisoned ("being checked") and return at once otherwise. A
:class:`TimingRefill` removes the difference: before *every* timed launch the backend copies,
device to device and outside the timed events, each output's poison image over the output
and the next of several input variants (fresh inputs, staged on the device once) into each
input buffer. The L2 flush comes after the refill, so the refilled bytes are cold too.

Pure data and planning only: the PyCUDA backend (and any other) executes the copies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpu_agent.backends.base import BackendError, Buffer


@dataclass(frozen=True)
class TimingRefill:
    """``outputs``: (output buffer, one element's poison pattern), e.g. from
    ``checks.poison_pattern``. ``inputs``: (input buffer, variants) — before timed launch
    ``i`` the backend copies ``variants[i % len(variants)]`` into the buffer; each variant is
    a buffer of the same size holding a fresh input (``Backend.upload``)."""

    outputs: tuple[tuple[Buffer, bytes], ...] = ()
    inputs: tuple[tuple[Buffer, tuple[Buffer, ...]], ...] = ()

    def __post_init__(self) -> None:
        for index, (_, pattern) in enumerate(self.outputs):
            if not pattern:
                raise BackendError(f"timing refill: output {index} has an empty poison pattern")
        for index, (target, variants) in enumerate(self.inputs):
            if not variants:
                raise BackendError(f"timing refill: input {index} has no variants")
            sizes = {variant.nbytes for variant in variants}
            if sizes != {target.nbytes}:
                raise BackendError(
                    f"timing refill: input {index} is {target.nbytes} bytes but its variants "
                    f"are {sorted(sizes)}"
                )


# (target, source) device-to-device copies, each of target.nbytes bytes.
Copies = list[tuple[Buffer, Buffer]]


def refill_copies(
    refill: TimingRefill | None, launch_index: int, poison_image: Callable[[Buffer, bytes], Buffer]
) -> Copies:
    """The copies to enqueue before the timed launch numbered ``launch_index`` (counted over
    the backend's life, so variants keep rotating across batches). ``poison_image(buffer,
    pattern)``: a device buffer of the buffer's size filled with the pattern (the backend
    stages it once)."""
    if refill is None:
        return []
    copies: Copies = [(buffer, poison_image(buffer, pattern)) for buffer, pattern in refill.outputs]
    copies.extend(
        (buffer, variants[launch_index % len(variants)]) for buffer, variants in refill.inputs
    )
    return copies
