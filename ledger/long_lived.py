"""A server process's start-up heap, kept out of the garbage collector's walks.

What a server loads before it serves (modules, the app, the ledger and its caches) lives as
long as the process. CPython's oldest generation holds it, and every full collection walks
all of it, with the interpreter lock held: measured under 32 clients (``python -m
benchmarks.bench_http``), those pauses made the API's p99 latency 71–77 ms where it is
33–41 ms with the heap frozen. Collecting once and freezing moves it to the permanent
generation, which collections skip; what requests allocate is collected as before.
"""

from __future__ import annotations

import gc

__all__ = ["freeze_long_lived"]


def freeze_long_lived() -> None:
    """Collect what start-up left as garbage, then freeze everything still alive. Call it
    once a server process is ready to serve (an API worker, the writer process)."""
    gc.collect()
    gc.freeze()
