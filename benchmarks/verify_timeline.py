"""Where a verify run with workers spends its time: each process's and each thread's CPU, and a
timeline of the batches (one JSON line, and a table on stderr). Diagnostics only: it wraps the
pool's functions in this process before the workers fork, and changes no result.

    PYTHONHASHSEED=0 python -m benchmarks.verify_timeline BUNDLE [WORKERS]

- ``parent``: the verifying process's threads by name (the main thread reads, routes, merges;
  the pool's manager and queue-feeder threads pickle batches and unpickle results), and the
  main thread's CPU in each part (``route``: reading a line's type; ``warm``: batches verified
  here; ``submit``; ``merge``; ``start``: starting the pool);
- ``workers``: per worker process, its CPU in ``verify_batch`` and in all (the rest: reading
  the batch, pickling the result, the pool's loop);
- ``batches``: per batch, where and when (ms from the start) it was verified.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ledger.verify.bundle as vbundle
import ledger.verify.pool as vpool
from ledger.verify import VerificationPolicy, bundle_lines, open_bundle, verify_bundle_lines
from ledger.verify.batches import Batch, BatchResult

_LOG = Path(tempfile.gettempdir()) / f"verify-timeline-{os.getpid()}.jsonl"
_T0 = time.perf_counter()
_ORIGINAL: Callable[[Batch], BatchResult] = getattr(vpool, "verify_batch")  # noqa: B009
_MAIN_CPU: dict[str, float] = {}
_THREADS: dict[str, float] = {}
_MARK: dict[str, float] = {}


def _process_cpu() -> float:
    return time.process_time()


def timed_batch(batch: Batch) -> BatchResult:
    """``verify_batch``, with where and when it ran appended to the log (workers and here)."""
    started, cpu0 = time.perf_counter(), time.thread_time()
    result = _ORIGINAL(batch)
    record = {
        "pid": os.getpid(),
        "events": len(batch.lines),
        "start": round((started - _T0) * 1e3, 1),
        "end": round((time.perf_counter() - _T0) * 1e3, 1),
        "cpu": round((time.thread_time() - cpu0) * 1e3, 1),
        "processCpu": round(_process_cpu() * 1e3, 1),
    }
    with _LOG.open("a") as log:
        log.write(json.dumps(record) + "\n")
    return result


def _threads_cpu() -> dict[str, float]:
    """CPU ms of each live thread of this process, by name (``/proc``)."""
    found: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path("/proc/self/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ms = (int(fields[11]) + int(fields[12])) / tick * 1e3
        found[f"{name}:{task.name}"] = ms
    return found


def _accumulate(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        cpu0 = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            _MAIN_CPU[name] = _MAIN_CPU.get(name, 0.0) + time.thread_time() - cpu0

    return wrapper


def _instrument() -> None:
    # setattr: diagnostics replace the functions the pool and the verifier call, by name.
    setattr(vpool, "verify_batch", timed_batch)  # noqa: B010 - the workers fork after this
    wrap: list[tuple[object, str, str]] = [
        (vbundle, "worker_event", "route"),
        (vbundle.BundleVerifier, "_line", "otherLines"),
        (vbundle.BundleVerifier, "finish", "finish"),
        (vpool.BatchPool, "_merge_next", "merge"),
        (vpool.BatchPool, "close_batch", "close"),
    ]
    for owner, name, part in wrap:
        setattr(owner, name, _accumulate(part, getattr(owner, name)))
    pool_cls = vpool.BatchPool
    start = _accumulate("start", pool_cls._start_workers)

    def mark_then_start(self: vpool.BatchPool) -> None:
        start(self)
        _MARK["started"] = time.process_time()

    setattr(pool_cls, "_start_workers", mark_then_start)  # noqa: B010
    shutdown = pool_cls.shutdown

    def snapshot_then_shutdown(self: vpool.BatchPool) -> None:
        _THREADS.update(_threads_cpu())
        shutdown(self)

    setattr(pool_cls, "shutdown", snapshot_then_shutdown)  # noqa: B010


def main(bundle: Path, workers: int) -> dict[str, Any]:
    _instrument()
    _LOG.unlink(missing_ok=True)
    policy = VerificationPolicy(trust_root=None, allow_unanchored=True)
    cpu0, thread0 = time.process_time(), time.thread_time()
    children0 = os.times()
    started = time.perf_counter()
    with open_bundle(bundle) as handle:
        report = verify_bundle_lines(bundle_lines(handle), policy, workers=workers)
    wall = time.perf_counter() - started
    children = os.times()
    events = int(report.facts.get("events") or 0)
    batches = [json.loads(line) for line in _LOG.read_text().splitlines()] if _LOG.exists() else []
    _LOG.unlink(missing_ok=True)
    parent_pid = os.getpid()
    per_worker: dict[int, dict[str, float]] = {}
    for b in batches:
        if b["pid"] == parent_pid:
            continue
        w = per_worker.setdefault(b["pid"], {"batches": 0, "events": 0, "verifyCpu": 0.0})
        w["batches"] += 1
        w["events"] += b["events"]
        w["verifyCpu"] += b["cpu"]
        w["processCpuAtLastBatch"] = b["processCpu"]
    main_cpu = (time.thread_time() - thread0) * 1e3
    parent_cpu = (time.process_time() - cpu0) * 1e3
    # The wall time the run would take with a core to itself per process, up to ``cores``
    # (2): this process alone until the workers start, then every process's CPU shared
    # over the cores, but never less than the busiest worker's.
    cores = 2
    pre = (_MARK["started"] - cpu0) * 1e3 if "started" in _MARK else parent_cpu
    post = parent_cpu - pre
    worker_cpu = [w["processCpuAtLastBatch"] for w in per_worker.values()]
    modelled = pre + max(max(worker_cpu, default=0.0), (post + sum(worker_cpu)) / cores)
    out: dict[str, Any] = {
        "events": events,
        "verified": report.verified,
        "workers": workers,
        "wallMs": round(wall * 1e3, 1),
        "eventsPerSecond": round(events / wall),
        "load": os.getloadavg()[0],
        "modelledIdleWallMs": round(modelled, 1),
        "modelledEventsPerSecond": round(events / modelled * 1e3),
        "cpuMicrosPerEvent": round((parent_cpu + sum(worker_cpu)) / max(events, 1) * 1e3, 1),
        "serialBeforeWorkersMs": round(pre, 1),
        "parent": {
            "processCpuMs": round((time.process_time() - cpu0) * 1e3, 1),
            "mainThreadCpuMs": round(main_cpu, 1),
            "mainThreadParts": {k: round(v * 1e3, 1) for k, v in _MAIN_CPU.items()},
            "threadsAtShutdown": _THREADS,
        },
        "workersCpuMs": round(
            (children.children_user + children.children_system)
            - (children0.children_user + children0.children_system),
            4,
        )
        * 1e3,
        "perWorker": {str(k): v for k, v in per_worker.items()},
        "batches": batches,
    }
    return out


if __name__ == "__main__":
    result = main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 2)
    for b in result["batches"]:
        print(b, file=sys.stderr)
    print(json.dumps({k: v for k, v in result.items() if k != "batches"}))
