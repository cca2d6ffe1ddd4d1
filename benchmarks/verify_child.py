"""One measured ``verify_bundle_lines`` run, in a fresh process (used by bench_verify).

Imports only the verifier, so the peak RSS it reports is the verifier's: the process's own
(``VmHWM``: ``ru_maxrss`` would carry over the RSS of the process that started this one)
and its largest worker's (``ru_maxrss`` of RUSAGE_CHILDREN, once the workers have been
joined at the end of the call).

    python -m benchmarks.verify_child BUNDLE WORKERS   # prints one JSON line
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

from ledger.verify import VerificationPolicy, bundle_lines, open_bundle, verify_bundle_lines


def peak_rss_kib() -> int:
    """This process's peak RSS since it started (exec), in KiB."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:  # not Linux
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(bundle: Path, workers: int) -> dict[str, Any]:
    baseline_kib = peak_rss_kib()
    load_before = [round(x, 2) for x in os.getloadavg()]
    cpu_started = time.process_time(), _children_cpu_s()
    thread_started = time.thread_time()
    started = time.perf_counter()
    with open_bundle(bundle) as handle:
        # The benchmark's own bundle: its trust root is the one it was made with; the cost
        # measured is the same as with that root pinned.
        policy = VerificationPolicy(trust_root=None, allow_unanchored=True)
        # Read as `kernelindex verify` reads a bundle: each line within the format's bound.
        report = verify_bundle_lines(bundle_lines(handle), policy, workers=workers)
    seconds = time.perf_counter() - started
    thread_s = time.thread_time() - thread_started
    # CPU of every process of the run: this one and its workers (joined by now).
    cpu_s = time.process_time() - cpu_started[0] + _children_cpu_s() - cpu_started[1]
    events = int(report.facts.get("events") or 0)
    return {
        "events": events,
        "verified": report.verified,
        "workers": workers,
        "seconds": seconds,
        "eventsPerSecond": events / seconds,
        "cpuMicrosPerEvent": cpu_s / max(events, 1) * 1e6,
        # The calling thread's CPU alone: all of it at one worker, the routing at more.
        "threadCpuMicrosPerEvent": thread_s / max(events, 1) * 1e6,
        "loadAverage": {
            "before": load_before,
            "after": [round(x, 2) for x in os.getloadavg()],
        },
        "baselineRssKiB": baseline_kib,
        "peakRssKiB": peak_rss_kib(),
        "peakWorkerRssKiB": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    }


if __name__ == "__main__":
    print(json.dumps(measure(Path(sys.argv[1]), int(sys.argv[2]))))
