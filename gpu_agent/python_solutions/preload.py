"""Preloaded by the forkserver (``gpu_agent/child_process.py``): torch, when installed.

Why: a Python-solution case child spends ~2 s importing torch; a forkserver that imported it
once hands every child a process that already has it, and still never ran submitted code or
touched a device (importing torch initialises no CUDA context), so the isolation is the
same. Production uses ``spawn``; this only makes the ``forkserver`` start method fast.
Without torch (an agent for declarative kernels only) this imports nothing.
"""

from __future__ import annotations

import importlib
import importlib.util

if importlib.util.find_spec("torch") is not None:
    importlib.import_module("torch")
