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
  at the bundle's size, and the run's proofs), after ``--writes`` + ``--sequential`` runs;
- **whole-log verify, µs of thread-CPU per event** (heads on): the ledger's whole-log bundle
  verified in one process (``workers=1``), each heads leaf recomputed from the events before
  it; and the CPU of that recomputation alone (the in-order map fold and the group-joining
  rule of each run event), replayed over exactly what a verify fed it.

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
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from benchmarks.bench_ingest import signed_ingestions
from ledger.bundle import export_bundle
from ledger.event_verification import EventVerification
from ledger.group_commit import GroupCommitWriter
from ledger.home import LedgerHome
from ledger.verification_report import Check, Report
from ledger.verify import (
    Outcome,
    VerificationPolicy,
    batches,
    completeness,
    outcome_of,
    verify_bundle_lines,
)
from ledger.verify.heads_map import GroupEvent, WholeLogHeads, group_event_of


class _Recording(WholeLogHeads):
    """The whole-log heads check, keeping what it was fed (to replay it on a clock)."""

    fed: ClassVar[list[tuple[str, Any]]] = []

    def event(self, leaf: int, aggregate: str, version: int) -> None:
        self.fed.append(("event", (leaf, aggregate, version)))
        super().event(leaf, aggregate, version)

    def group_events(self, events: Iterable[GroupEvent]) -> None:
        events = list(events)
        self.fed.append(("group_events", events))
        super().group_events(events)

    def heads_leaf(self, index: int, report: Report) -> None:
        self.fed.append(("heads_leaf", (index, self.roots[index])))
        super().heads_leaf(index, report)


def whole_log_verify_cpu(
    lines: list[str], policy: VerificationPolicy, repeats: int
) -> dict[str, float]:
    """Thread-CPU µs per event: verifying a whole-log bundle in this process (``workers=1``;
    median of ``repeats``), and of that, the heads check's own code (the in-order map fold
    and the group-joining rule of each run event), timed by replaying exactly what one
    verify fed it (median of ``repeats``): what the check adds to an event."""
    events = sum('"type":"event"' in line for line in lines)
    whole = []
    for _ in range(repeats):
        start = time.thread_time()
        report = verify_bundle_lines(lines, policy, workers=1)
        whole.append((time.thread_time() - start) / events * 1e6)
        assert outcome_of(report) is Outcome.VERIFIED, report.findings
    verified: list[EventVerification] = []
    # What the verifier's modules call, swapped for recorders for one verify.
    real = (getattr(completeness, "WholeLogHeads"), getattr(batches, "group_event_of"))  # noqa: B009

    def recorded(result: EventVerification) -> GroupEvent | None:
        verified.append(result)
        return group_event_of(result)

    _Recording.fed = []
    try:
        setattr(completeness, "WholeLogHeads", _Recording)  # noqa: B010
        setattr(batches, "group_event_of", recorded)  # noqa: B010
        report = verify_bundle_lines(lines, policy, workers=1)
    finally:
        setattr(completeness, "WholeLogHeads", real[0])  # noqa: B010
        setattr(batches, "group_event_of", real[1])  # noqa: B010
    assert report.passed[Check.HEADS_MAP] > 0 and not report.failed[Check.HEADS_MAP]
    check = []
    for _ in range(repeats):
        replay, scratch = WholeLogHeads(), Report(subject="replay")
        start = time.thread_time()
        for result in verified:
            group_event_of(result)
        for kind, args in _Recording.fed:
            if kind == "event":
                replay.event(*args)
            elif kind == "group_events":
                replay.group_events(args)
            else:
                replay.roots[args[0]] = args[1]
                replay.heads_leaf(args[0], scratch)
        check.append((time.thread_time() - start) / events * 1e6)
        assert not scratch.failed[Check.HEADS_MAP]
    return {
        "wholeLogVerifyUsPerEvent": round(statistics.median(whole), 1),
        "headsCheckUsPerEvent": round(statistics.median(check), 1),
    }


def _home(folder: Path) -> LedgerHome:
    home = LedgerHome.at(folder / "home", f"sqlite:///{folder / 'ledger.db'}")
    home.initialise().close()
    return home


def one_mode(
    folder: Path, heads: bool, sequential: int, writes: int, clients: int, verify_repeats: int = 0
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
        whole = io.StringIO()
        if heads and verify_repeats:
            export_bundle(ledger, whole)
    finally:
        ledger.close()
    assert has_map == heads
    found: dict[str, Any] = {
        "sequentialPerS": round(sequential / sequential_s, 1),
        "groupCommitPerS": round(writes / grouped_s, 1),
        "scopedExportMs": round(export_ms, 1),
        "treeSize": size,
    }
    if heads and verify_repeats:
        lines = whole.getvalue().splitlines()
        found["headsLeaves"] = sum('"type":"headsLeaf"' in line for line in lines)
        policy = VerificationPolicy(trust_root=home.trust_root())
        found |= whole_log_verify_cpu(lines, policy, verify_repeats)
    return found


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequential", type=int, default=300, help="writes, one a commit")
    parser.add_argument("--writes", type=int, default=2000, help="writes through group commit")
    parser.add_argument("--clients", type=int, default=16, help="threads writing at once")
    parser.add_argument("--repeats", type=int, default=3, help="runs per mode")
    parser.add_argument(
        "--verify-repeats", type=int, default=3, help="whole-log verifies per mode (0: none)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    runs: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory(prefix="bench-heads-") as tmp:
        for turn in range(args.repeats):
            for mode in ("off", "on") if turn % 2 == 0 else ("on", "off"):
                folder = Path(tmp) / f"{mode}-{turn}"
                verify = args.verify_repeats if turn == 0 else 0  # once is enough: one ledger
                runs[mode].append(
                    one_mode(
                        folder, mode == "on", args.sequential, args.writes, args.clients, verify
                    )
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
    verified = [m for m in runs["on"] if "headsCheckUsPerEvent" in m]
    if verified:
        results["on"] |= {k: v for k, v in verified[0].items() if k not in results["on"]}
    print(json.dumps({k: results[k] for k in ("off", "on")}, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
