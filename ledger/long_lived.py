"""A process's start-up heap, kept out of the garbage collector's walks, and its young
collections made rarer: one rule for every long-running process of the ledger (an API
worker, the writer process, a ``kernelindex`` command).

What a process loads before it works (modules, the app, the ledger and its caches) lives as
long as the process. CPython's oldest generation holds it, and every full collection walks
all of it, with the interpreter lock held: measured under 32 clients (``python -m
benchmarks.bench_http``), those pauses made the API's p99 latency 71–77 ms where it is
33–41 ms with the heap frozen. Collecting once and freezing moves it to the permanent
generation, which collections skip; what requests allocate is collected as before.

CPython collects its young generation every 700 net allocations. A group's decode,
admission and commit allocate many short-lived containers (parsed statements, rows, leaves,
receipts): collecting every 700 walked those of the group in flight and promoted them, for
older collections to walk again. At 10,000 a young collection walks at most that many
objects, and most of a group's are gone by then (benchmarks/README.md, "http3" and
"writer5": −18 k instructions an envelope in the writer). Cycles are still freed, at the
next young collection.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_GC_THRESHOLD", "freeze_long_lived", "settle_heap", "settled_thresholds"]

YOUNG_GC_THRESHOLD = 10_000


def freeze_long_lived() -> None:
    """Collect what start-up left as garbage, then freeze everything still alive. Call it
    once a server process is ready to serve (an API worker, the writer process)."""
    gc.collect()
    gc.freeze()


def settled_thresholds() -> tuple[int, int, int]:
    """The collector's thresholds once settled: the young generation's raised, the older
    generations' as they are."""
    _, older, oldest = gc.get_threshold()
    return YOUNG_GC_THRESHOLD, older, oldest


def settle_heap() -> None:
    """A long-running process ready to work: what it loaded lives as long as it does
    (frozen out of the collector's walks), and its young collections come less often."""
    freeze_long_lived()
    gc.set_threshold(*settled_thresholds())
