"""Timed calls of a Python solution, and the cross-check of the timer against a second clock.

Why: a solution's time is only worth recording if (a) every timed call got fresh inputs (a
memoised answer then buys nothing), (b) the time covers all the work (none left on another
stream or thread to finish after the timer stopped), and (c) the calls being timed still
compute (a solution that stops working once timing starts). So, per timed call:

1. ``prepare()`` — fresh inputs, freshly poisoned outputs — outside the timed region;
2. host wall clock (``CLOCK_MONOTONIC_RAW``) starts; the timer starts; the call; the device
   is synchronised (all streams); the timer stops; the wall clock stops;
3. ``after()`` — the per-call defences (harness identity, threads, processes, modules,
   libraries) — outside the timed region.

Once, at an index drawn from ``secrets`` (nobody can predict it, not even from the nonce),
an extra untimed ``audit()`` call between two timed ones checks a call the solution cannot
tell apart from a timed one against a reference computed before the solution was imported.

The cross-check (:func:`cross_check`): summed wall time may exceed the summed timed time
only by a slack; the timer may never exceed the wall clock; and CPU time burnt by *other*
threads of the process over the whole loop (``process_time − thread_time``, with torch's
intra-op pool at one thread) must stay small. On the CPU backend the timer is
``perf_counter_ns`` held by the harness (a patched ``time.perf_counter_ns`` cannot reach it),
so timer and wall agree by construction and the other-threads CPU is the telling part; on a
GPU the timer would be CUDA events on the call's stream, and work on a side stream shows up
as wall ≫ timed — that check needs the GPU and is owed there.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_TIMER = time.perf_counter_ns
_PROCESS_CPU = time.process_time_ns
_THREAD_CPU = time.thread_time_ns
_RAW = time.CLOCK_MONOTONIC_RAW
_CLOCK = time.clock_gettime_ns

TIMER_NAME = "perf_counter_ns"
REFERENCE_NAME = "CLOCK_MONOTONIC_RAW around the synchronised call"
PER_CALL_SLACK_NS = 20_000.0  # host overhead of the synchronise and two clock reads
# The process and thread CPU clocks may disagree by up to a scheduler tick or two (4 ms at
# HZ=250) even with a single thread; deferred work costs about as much as the work itself.
OTHER_THREADS_SLACK_NS = 20_000_000.0
OTHER_THREADS_FRACTION = 0.25


def _wall_ns() -> int:
    return _CLOCK(_RAW)


@dataclass
class TimedLoop:
    """The callables one timed call is made of (see the module doc)."""

    call: Callable[[], None]
    prepare: Callable[[], None]
    after: Callable[[], None]
    sync: Callable[[], None]
    audit: Callable[[], None]
    audit_after: int  # timed calls before the audit call
    timed_ns: float = 0.0
    wall_ns: float = 0.0
    calls: int = 0
    audited: bool = False
    # (process CPU, this thread's CPU, wall) when the first timed call began, and now.
    started: tuple[int, int, int] | None = None
    latest: tuple[int, int, int] | None = None

    @property
    def other_threads_cpu_ns(self) -> float:
        """CPU time other threads of the process burnt from the first call to the last."""
        if self.started is None or self.latest is None:
            return 0.0
        process = self.latest[0] - self.started[0]
        thread = self.latest[1] - self.started[1]
        return float(max(0, process - thread))

    @property
    def loop_wall_ns(self) -> float:
        if self.started is None or self.latest is None:
            return 0.0
        return float(self.latest[2] - self.started[2])

    def measure(self, count: int) -> list[float]:
        """``count`` timed calls, in ns each (the stop rule's ``measure``)."""
        if self.started is None:
            self.started = (_PROCESS_CPU(), _THREAD_CPU(), _wall_ns())
        samples = [self._one() for _ in range(count)]
        # Read once per batch but measured over the whole loop: the two CPU clocks' tick-sized
        # disagreement is paid once, not once per batch.
        self.latest = (_PROCESS_CPU(), _THREAD_CPU(), _wall_ns())
        return samples

    def _one(self) -> float:
        self.prepare()
        wall_start = _wall_ns()
        start = _TIMER()
        self.call()
        self.sync()
        elapsed = float(_TIMER() - start)
        wall = float(_wall_ns() - wall_start)
        self.after()
        self.timed_ns += elapsed
        self.wall_ns += wall
        self.calls += 1
        if not self.audited and self.calls > self.audit_after:
            self.audited = True
            self.audit()
        return elapsed


def audit_index(min_samples: int, warmup: int) -> int:
    """After how many timed calls (warm-up included) the audit call comes: unpredictable."""
    return warmup + secrets.randbelow(max(1, min_samples))


def cross_check(
    timed_ns: float,
    wall_ns: float,
    calls: int,
    other_threads_cpu_ns: float,
    loop_wall_ns: float,
    slack: float,
) -> tuple[dict[str, Any], list[str]]:
    """The ``timerCrossCheck`` record and the problems it found (none: passed)."""
    problems: list[str] = []
    allowed = (1.0 + slack) * timed_ns + calls * PER_CALL_SLACK_NS
    if wall_ns > allowed:
        problems.append(
            f"the synchronised wall time {wall_ns:.0f} ns exceeds the timed {timed_ns:.0f} ns "
            f"by more than {slack:.0%} + {PER_CALL_SLACK_NS:.0f} ns per call: work escaped the "
            "timer (another stream or thread)"
        )
    if timed_ns > 1.05 * wall_ns + calls * 1_000.0:
        problems.append(
            f"the timer ({timed_ns:.0f} ns) ran ahead of the wall clock ({wall_ns:.0f} ns)"
        )
    budget = OTHER_THREADS_FRACTION * loop_wall_ns + OTHER_THREADS_SLACK_NS
    if other_threads_cpu_ns > budget:
        problems.append(
            f"other threads burnt {other_threads_cpu_ns / 1e6:.1f} ms of CPU during the timed "
            f"loop ({loop_wall_ns / 1e6:.1f} ms): work deferred to another thread"
        )
    record = {
        "timer": TIMER_NAME,
        "reference": REFERENCE_NAME,
        "calls": calls,
        "timedNs": timed_ns,
        "wallNs": wall_ns,
        "ratio": wall_ns / timed_ns if timed_ns > 0 else 0.0,
        "otherThreadsCpuNs": other_threads_cpu_ns,
        "outcome": "failed" if problems else "passed",
    }
    return record, problems
