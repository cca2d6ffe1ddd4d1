"""How far two honest timings of one kernel may differ (the self-check's 3 % test, and more).

A relative tolerance alone (3 %) is too tight for kernels of a few microseconds, because
every CUDA-event timing carries a fixed part that does not scale with the kernel:

* ``cuEventElapsedTime`` has a resolution of about 0.5 µs (CUDA driver API documentation):
  each median can be off by one step, in opposite directions for two timers;
* the events bracket the launch, so each sample includes the GPU-side launch latency —
  about 1–2 µs, which an empty kernel under the same loop measures
  (``PyCudaBackend.event_overhead_ns``) and a kernel-duration timer (CUPTI, as SOL-ExecBench
  times) does not include; two timers that launch differently (the backend's prepared call
  on its own stream, the independent timer's ``Function.__call__`` on the legacy default
  stream) differ in that latency.

So two timings agree when ``|a − b| ≤ max(ratio × b, absolute)``, where ``absolute`` is the
measured event overhead plus one resolution step, never under two resolution steps; without
a measurement, :data:`DEFAULT_ABSOLUTE_SLACK_NS` (2 µs: the top of the 1–2 µs overhead
range, which also covers the resolution of both timers). On a 100 µs kernel the 3 % term
dominates; on a 2 µs kernel the absolute term does.
"""

from __future__ import annotations

EVENT_RESOLUTION_NS = 500.0
DEFAULT_ABSOLUTE_SLACK_NS = 2_000.0


def absolute_slack_ns(event_overhead_ns: float | None) -> float:
    """The absolute part of the allowed gap, from the measured event overhead if any."""
    if event_overhead_ns is None or event_overhead_ns < 0:
        return DEFAULT_ABSOLUTE_SLACK_NS
    return max(2 * EVENT_RESOLUTION_NS, event_overhead_ns + EVENT_RESOLUTION_NS)


def allowed_gap_ns(
    reference_ns: float, ratio_tolerance: float, event_overhead_ns: float | None = None
) -> float:
    """How far a timing may lie from ``reference_ns`` and still agree with it."""
    return max(ratio_tolerance * reference_ns, absolute_slack_ns(event_overhead_ns))


def agree(
    measured_ns: float,
    reference_ns: float,
    ratio_tolerance: float,
    event_overhead_ns: float | None = None,
) -> bool:
    """Whether two honest timings of one kernel agree (see the module docstring)."""
    gap = abs(measured_ns - reference_ns)
    return gap <= allowed_gap_ns(reference_ns, ratio_tolerance, event_overhead_ns)
