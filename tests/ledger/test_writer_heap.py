"""The writer process's heap once ready: start-up frozen, young collections every
``WRITER_GC_THRESHOLD`` allocations, the older generations' thresholds as they were."""

from __future__ import annotations

import gc
import inspect

import ledger.writer_process as writer_process
from ledger.writer_heap import WRITER_GC_THRESHOLD, settle_writer_heap, writer_gc_thresholds


def test_settling_freezes_the_heap_and_raises_only_the_young_threshold() -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 11, 12)
        settle_writer_heap()
        assert gc.get_threshold() == (WRITER_GC_THRESHOLD, 11, 12)
        assert gc.get_freeze_count() > 0
        assert writer_gc_thresholds() == (WRITER_GC_THRESHOLD, 11, 12)
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_the_writer_process_settles_its_heap_before_it_says_ready() -> None:
    source = inspect.getsource(writer_process._serve_writer)
    assert source.index("settle_writer_heap()") < source.index('parent.send("ready")')
