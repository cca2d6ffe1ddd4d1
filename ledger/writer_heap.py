"""The writer process's heap once it is ready to serve (``ledger.writer_process``)."""

from __future__ import annotations

import gc

from ledger.long_lived import freeze_long_lived

__all__ = ["WRITER_GC_THRESHOLD", "settle_writer_heap", "writer_gc_thresholds"]

# The writer process's youngest-generation threshold (CPython's default: 700 allocations).
# A group's decode, admission and commit allocate many short-lived containers (the parsed
# statements, rows, leaves, receipts): collecting every 700 walked those of the group in
# flight and promoted them, for older collections to walk again. At 10,000 (as a served
# worker's, ``api.server.app``) a young collection walks at most that many objects, and
# most of a group's are gone by then (benchmarks/README.md, "writer5").
WRITER_GC_THRESHOLD = 10_000


def settle_writer_heap() -> None:
    """The writer process ready to serve: what it loaded lives as long as it does (frozen
    out of the collector's walks), and its young collections come less often. The
    benchmarks that stand in for the writer process (``benchmarks.writer_instructions``,
    ``bench_ingest``'s writer-bound figure) settle their heap with this too."""
    freeze_long_lived()
    gc.set_threshold(*writer_gc_thresholds())


def writer_gc_thresholds() -> tuple[int, int, int]:
    """The collector's thresholds as the writer process sets them (the older generations'
    as they are)."""
    _, older, oldest = gc.get_threshold()
    return WRITER_GC_THRESHOLD, older, oldest
