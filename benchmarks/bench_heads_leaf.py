"""Heads leaves (docs/witnesses.md#heads-under-witnesses): what they cost a write and an export.

Each commit, with heads leaves on, appends one more leaf: the root of the heads map of the
tree before it (an update of the in-memory map, one leaf and its nodes, one query of the group
index when the commit ingests). Measured, heads leaves off and on, each mode on a fresh SQLite
ledger of its own, the modes taking turns (medians of ``--repeats``):

- **sequential appends/s**: one ingestion a commit (``Ledger.append``): the heads leaf's
  worst case, one per event;
- **group-commit appends/s**: ``--writes`` ingestions from ``--clients`` threads through the
  group commit writer (many events a commit);
- **scoped export ms**: a bundle of one run (with heads on: the map rebuilt from the tables
  at the bundle's size, and the run's proofs), after ``--writes`` + ``--sequential`` runs.

    python -m benchmarks.bench_heads_leaf                  # 300 sequential, 2,000 at once
    python -m benchmarks.bench_heads_leaf --json out.json

Envelopes are signed before any clock starts. On a shared 2-core machine, figures move with
what else runs: compare the modes of one run, not runs of different days.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_ingest import signed_ingestions
from ledger.bundle import export_bundle
from ledger.group_commit import GroupCommitWriter
from ledger.home import LedgerHome


def _home(folder: Path) -> LedgerHome:
    home = LedgerHome.at(folder / "home", f"sqlite:///{folder / 'ledger.db'}")
    home.initialise().close()
    return home


def one_mode(
    folder: Path, heads: bool, sequential: int, writes: int, clients: int
) -> dict[str, Any]:
    home = _home(folder)
    one_by_one = signed_ingestions(home.key("ingester"), sequential)
    grouped = signed_ingestions(home.key("ingester"), writes, first=sequential)
    ledger = home.open()
    try:
        if heads:
            ledger.tlog.enable_heads_leaf()
        start = time.perf_counter()
        receipts = [ledger.append(envelope) for envelope in one_by_one]
        sequential_s = time.perf_counter() - start

        writer = GroupCommitWriter(ledger)
        pending = list(reversed(grouped))
        lock = threading.Lock()

        def client() -> None:
            while True:
                with lock:
                    if not pending:
                        return
                    envelope = pending.pop()
                writer.append(envelope)

        threads = [threading.Thread(target=client) for _ in range(clients)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        grouped_s = time.perf_counter() - start
        writer.close()
        size = ledger.tlog.checkpoint().size
        start = time.perf_counter()
        out = io.StringIO()
        export_bundle(ledger, out, runs=[receipts[0].subject_digest])
        export_ms = (time.perf_counter() - start) * 1000
        has_map = '"type":"headsMap"' in out.getvalue()
    finally:
        ledger.close()
    assert has_map == heads
    return {
        "sequentialPerS": round(sequential / sequential_s, 1),
        "groupCommitPerS": round(writes / grouped_s, 1),
        "scopedExportMs": round(export_ms, 1),
        "treeSize": size,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequential", type=int, default=300, help="writes, one a commit")
    parser.add_argument("--writes", type=int, default=2000, help="writes through group commit")
    parser.add_argument("--clients", type=int, default=16, help="threads writing at once")
    parser.add_argument("--repeats", type=int, default=3, help="runs per mode")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    runs: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory(prefix="bench-heads-") as tmp:
        for turn in range(args.repeats):
            for mode in ("off", "on") if turn % 2 == 0 else ("on", "off"):
                folder = Path(tmp) / f"{mode}-{turn}"
                runs[mode].append(
                    one_mode(folder, mode == "on", args.sequential, args.writes, args.clients)
                )
    results: dict[str, Any] = {
        "machine": {"python": sys.version.split()[0], "cpus": os.cpu_count()},
        "runs": runs,
    }
    for mode, measured in runs.items():
        results[mode] = {
            k: statistics.median(m[k] for m in measured)
            for k in ("sequentialPerS", "groupCommitPerS", "scopedExportMs")
        }
    print(json.dumps({k: results[k] for k in ("off", "on")}, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
