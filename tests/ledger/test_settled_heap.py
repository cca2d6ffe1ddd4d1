"""Every long-running process of the ledger settles its heap by one rule
(``ledger.long_lived.settle_heap``): start-up frozen, young collections every
``YOUNG_GC_THRESHOLD`` allocations, the older generations' thresholds as they were. The
writer process does so before it says it is ready; a ``kernelindex`` command before it runs."""

from __future__ import annotations

import gc
import inspect
import subprocess
import sys

import ledger.writer_process as writer_process
from ledger.long_lived import YOUNG_GC_THRESHOLD, settle_heap, settled_thresholds


def test_settling_freezes_the_heap_and_raises_only_the_young_threshold() -> None:
    before = gc.get_threshold()
    gc.unfreeze()
    try:
        gc.set_threshold(700, 11, 12)
        assert gc.get_freeze_count() == 0
        settle_heap()
        assert gc.get_threshold() == (YOUNG_GC_THRESHOLD, 11, 12)
        assert gc.get_freeze_count() > 0
        assert settled_thresholds() == (YOUNG_GC_THRESHOLD, 11, 12)
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_the_writer_process_settles_its_heap_before_it_says_ready() -> None:
    lines = [line.strip() for line in inspect.getsource(writer_process._serve_writer).splitlines()]
    assert lines.index("settle_heap()") < lines.index('parent.send("ready")')


def test_a_kernelindex_command_runs_with_its_heap_settled() -> None:
    # The command (here a stand-in for Typer's root) sees the heap as main() left it.
    probe = (
        "import gc\n"
        "import api.cli.main as m\n"
        "def command():\n"
        "    print(gc.get_threshold()[0], gc.get_freeze_count() > 0, gc.isenabled())\n"
        "m.root = lambda: command\n"
        "import types\n"
        "m.preload = lambda args: types.ModuleType('a_command')  # a command was loaded\n"
        "import sys\n"
        "sys.argv = ['kernelindex', '--help']\n"
        "m.main()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    assert out == [str(YOUNG_GC_THRESHOLD), "True", "True"]
