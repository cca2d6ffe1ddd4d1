"""Where an ingestion's time goes: cProfile of ``Ledger.append_many`` in groups of 32 over
fresh signed ingestions on a new SQLite ledger (the issue-16 breakdown per event).

    python -m benchmarks.profile_ingest              # 2,000 envelopes, top 40 by cumulative time
    python -m benchmarks.profile_ingest --count 500
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
import tempfile
import time
from pathlib import Path

from benchmarks.bench_ingest import signed_ingestions
from ledger.home import LedgerHome

GROUP = 32
WARM = 64


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2_000)
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="kernelindex-profile-"))
    try:
        home = LedgerHome.at(folder, f"sqlite:///{folder / 'ledger.db'}")
        ledger = home.initialise(origin="bench.kernelindex/profile")
        envelopes = signed_ingestions(home.key("ingester"), args.count + WARM)
        for envelope in envelopes[:WARM]:
            ledger.append(envelope)
        timed = envelopes[WARM:]
        profile = cProfile.Profile()
        started = time.perf_counter()
        profile.enable()
        for first in range(0, len(timed), GROUP):
            ledger.append_many(timed[first : first + GROUP])
        profile.disable()
        seconds = time.perf_counter() - started
        ledger.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"{len(timed)} ingestions in {seconds:.2f} s under the profiler", flush=True)
    stats = pstats.Stats(profile)
    stats.sort_stats("cumulative").print_stats(r"ledger/|domain/|rfc8785|recorders\.py", args.top)


if __name__ == "__main__":
    main()
