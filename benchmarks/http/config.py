"""Settings the HTTP benchmark's processes share: paths, targets, the environment the serve-child
reads, the timed-request header.
"""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console

HERE = Path(__file__).resolve().parents[1]  # benchmarks/
REPO = HERE.parent
CACHE = HERE / ".cache" / "http"
RESULTS = HERE / "results"
DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
HOST = "127.0.0.1"
TARGET_ECHO_RATIO = 0.5  # appends/s over HTTP, as a fraction of the echo anchor's
TARGET_P99_MS = 50.0
# The serve-child's uvicorn factory reads its ledger from these (uvicorn workers are spawned
# processes: the environment is the one channel every worker inherits).
HOME_VAR = "BENCH_HTTP_HOME"
DB_VAR = "BENCH_HTTP_DB"
TIMINGS_VAR = "BENCH_HTTP_TIMINGS"
SWITCH_VAR = "BENCH_HTTP_SWITCH_INTERVAL"
THREADS_VAR = "BENCH_HTTP_THREADS"
PROFILE_VAR = "BENCH_HTTP_PROFILE"  # a folder: cProfile stats of the worker and writer
THREAD_CPU_ONLY_VAR = "BENCH_HTTP_THREAD_CPU_ONLY"  # with it: only thread CPU, no cProfile
# Timed requests carry this header. A serve-child worker starts counting at the first one it
# sees: the phases are sequential (/health polls, then every warm-up answered, then the timed
# load), so nothing before the timed phase is counted, in any worker or thread (the group
# commit writer thread included, which no per-request context reaches).
TIMED_HEADER = b"x-bench-timed"
# Per timed request: when the handler entered and left service.append. The handler runs in a
# worker thread that gets a copy of the request's context, and the copy shares this dict.
STAMPS: contextvars.ContextVar[dict[str, float] | None] = contextvars.ContextVar(
    "bench_stamps", default=None
)

# Wide enough for the tables when the output is a file or a pipe.
console = Console(width=None if sys.stdout.isatty() else 150)
F = TypeVar("F", bound=Callable[..., Any])
