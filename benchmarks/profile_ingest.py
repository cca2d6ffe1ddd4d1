"""Where an ingestion's time goes: ``Ledger.append_many`` in groups of 32 over fresh signed
ingestions on a new SQLite ledger, the manifest memo cold (as ``bench_ingest`` measures).

    python -m benchmarks.profile_ingest              # cProfile, 2,000 envelopes, top 40
    python -m benchmarks.profile_ingest --count 500
    python -m benchmarks.profile_ingest --stages     # thread-CPU µs per envelope, per stage

The profiler inflates Python-heavy code several times over; ``--stages`` shows what each named
stage of a write costs without it, from the ledger's own probes (``ledger.timing``; the stages
nest: group holds everything, commit holds save, sequence and proof, authorize holds verify).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import tempfile
import time
from pathlib import Path

from benchmarks.bench_ingest import signed_ingestions, warm_shared_manifests
from ledger import timing
from ledger.home import LedgerHome
from ledger.timing import Stage

GROUP = 32
WARM = 64


class _ThreadCpu:
    """A ``ledger.timing`` probe: thread-CPU seconds per stage."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def begin(self, stage: Stage) -> object:
        return time.thread_time()

    def end(self, stage: Stage, began: object, raised: bool) -> None:
        assert isinstance(began, float)
        spent = time.thread_time() - began
        self.seconds[stage.value] = self.seconds.get(stage.value, 0.0) + spent

    def note(self, name: str, value: float) -> None:
        return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2_000)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--stages", action="store_true", help="stage probes, no profiler")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="kernelindex-profile-"))
    probe = _ThreadCpu()
    profile = cProfile.Profile()
    try:
        home = LedgerHome.at(folder, f"sqlite:///{folder / 'ledger.db'}")
        ledger = home.initialise(origin="bench.kernelindex/profile")
        envelopes = signed_ingestions(home.key("ingester"), args.count + WARM)
        for envelope in envelopes[:WARM]:
            ledger.append(envelope)
        timed = envelopes[WARM:]
        # Signing here left every run manifest in the memo: a server never has them.
        warm_shared_manifests(len(envelopes))
        load = os.getloadavg()
        started, cpu = time.perf_counter(), time.thread_time()
        if args.stages:
            timing.install(probe)
        else:
            profile.enable()
        try:
            for first in range(0, len(timed), GROUP):
                ledger.append_many(timed[first : first + GROUP])
        finally:
            profile.disable()
            timing.install(None)
        seconds, cpu = time.perf_counter() - started, time.thread_time() - cpu
        ledger.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    how = "with stage probes" if args.stages else "under the profiler"
    print(
        f"{len(timed)} ingestions in {seconds:.2f} s wall, {cpu / len(timed) * 1e6:.0f} µs "
        f"thread-CPU each, {how}; load {load[0]:.1f} -> {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    if args.stages:
        for stage, spent in sorted(probe.seconds.items(), key=lambda item: -item[1]):
            print(f"{spent / len(timed) * 1e6:8.1f} µs  {stage}")
        return
    stats = pstats.Stats(profile)
    stats.sort_stats("cumulative").print_stats(r"ledger/|domain/|rfc8785|recorders\.py", args.top)


if __name__ == "__main__":
    main()
