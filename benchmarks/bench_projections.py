"""Projection benchmark: rebuild throughput and read latency at scale (DESIGN.md §13).

Builds (once, cached under benchmarks/.cache) a ledger of N signed runs in G comparison
groups plus attestations, then measures in one run:

- rebuild: ``ProjectionRunner.rebuild()`` over every event → events/s (target ≥ 20,000);
- leaderboard read: ``queries.leaderboard`` of random groups → p50/p99 (target p99 ≤ 10 ms);
- run record read: the projected row and standings of random runs → p50/p99 (target ≤ 10 ms);
- full run record (events re-verified, as `kernelindex show` does) → p50/p99, for reference.

The runs are generated in bulk: real Ed25519-signed ingestion envelopes saved straight into
the event store and then sequenced, without the per-append admission checks (this benchmark
measures reading, not admission; signed ingestion has its own benchmark).

    python -m benchmarks.bench_projections --runs 100000 --groups 1000
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from domain.manifests.canonical_form import manifest_digest
from domain.ranking import View
from domain.timestamps import format_time, utc_now
from ledger.aggregates import Run, Signed
from ledger.authoring import ingestion_envelope
from ledger.dsse import parse_envelope
from ledger.home import LedgerHome
from projections import queries
from projections.run_record import run_record
from projections.runner import ProjectionRunner

REPO = Path(__file__).resolve().parents[1]
SEED = REPO / "api" / "demo_data" / "run-38823.manifest.json"
CACHE = REPO / "benchmarks" / ".cache"
RESULTS = REPO / "benchmarks" / "results"

# A small WorkloadCase in the catalog's shape; each group varies its batch size.
WORKLOAD: dict[str, Any] = {
    "apiVersion": "kernelindex.dev/v1alpha1",
    "kind": "WorkloadCase",
    "metadata": {"name": "bench-rmsnorm"},
    "spec": {
        "operationSpecDigest": "sha256:" + "ab" * 32,
        "axes": {"batch_size": 1, "hidden_size": 4096},
        "tensors": {
            "x": {"dtype": "bf16", "shape": [1, 4096]},
            "weight": {"dtype": "bf16", "shape": [4096]},
        },
        "correctness": {"comparator": "sol_execbench_eval"},
    },
}


def _manifests(seed: dict[str, Any], i: int, group: int) -> dict[str, Any]:
    workload = copy.deepcopy(WORKLOAD)
    workload["metadata"]["name"] = f"bench-rmsnorm-{group}"
    workload["spec"]["axes"]["batch_size"] = group + 1
    workload["spec"]["tensors"]["x"]["shape"] = [group + 1, 4096]
    manifests = copy.deepcopy(seed)
    spec = manifests["run"]["spec"]
    spec["workloadDigest"] = manifest_digest(workload)
    spec["timing"]["latencyNs"]["mean"] = 1_000_000 + (i * 7919) % 900_000
    spec["sourceNative"]["externalId"] = f"bench-{i}"
    manifests["run"]["metadata"]["name"] = f"bench-run-{i:07d}"
    manifests["workload"] = workload
    return manifests


def build(path: Path, runs: int, groups: int, console: Console) -> LedgerHome:
    home = LedgerHome.at(path, f"sqlite:///{path / 'ledger.db'}")
    if home.exists:
        return home
    path.mkdir(parents=True, exist_ok=True)
    ledger = home.initialise(origin="bench.kernelindex/projections")
    ingester = home.key("ingester")
    seed = json.loads(SEED.read_text("utf-8"))
    started = time.perf_counter()
    batch: list[Run] = []
    for i in range(runs):
        envelope = ingestion_envelope(_manifests(seed, i, i % groups), ingester)
        parsed = parse_envelope(envelope)
        statement = parsed.statement()
        batch.append(
            Run.ingest(
                Signed(envelope, parsed.digest, format_time(utc_now()), ingester.key_id),
                run_digest=statement.subject_digest,
                run_name=statement.subject_name,
            )
        )
        if len(batch) == 1000:
            ledger.save(*batch)
            batch = []
            ledger.tlog.catch_up()
            console.print(f"  built {i + 1} runs ({time.perf_counter() - started:.0f} s)")
    if batch:
        ledger.save(*batch)
        ledger.tlog.catch_up()
    return home


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return p50 * 1000, p99 * 1000


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="projection rebuild and read benchmark")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--groups", type=int, default=1_000)
    parser.add_argument("--reads", type=int, default=2_000)
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    home = build(CACHE / f"projections-{args.runs}-{args.groups}", args.runs, args.groups, console)
    ledger = home.open()
    runner = ProjectionRunner(ledger)
    events = int(ledger.recorder.max_notification_id() or 0)

    started = time.perf_counter()
    rebuilt = runner.rebuild()
    rebuild_s = time.perf_counter() - started

    rng = random.Random(7)  # noqa: S311 - reproducible sampling, not secrecy
    with ledger.recorder.transaction(commit=False) as session:  # type: ignore[attr-defined]
        keys = [str(g["comparison_key"]) for g in queries.groups(session)]
        digests = [str(d) for d, _ in ledger.run_index()]
    board_times: list[float] = []
    row_times: list[float] = []
    for _ in range(args.reads):
        key = rng.choice(keys)
        digest = rng.choice(digests)
        t0 = time.perf_counter()
        with ledger.recorder.transaction(commit=False) as session:  # type: ignore[attr-defined]
            queries.leaderboard(session, key, View.SOURCE_NATIVE)
        t1 = time.perf_counter()
        with ledger.recorder.transaction(commit=False) as session:  # type: ignore[attr-defined]
            queries.run_row(session, digest)
            queries.standings(session, digest)
        t2 = time.perf_counter()
        board_times.append(t1 - t0)
        row_times.append(t2 - t1)
    record_times: list[float] = []
    for _ in range(min(200, args.reads)):
        digest = rng.choice(digests)
        t0 = time.perf_counter()
        run_record(ledger, digest)
        record_times.append(time.perf_counter() - t0)

    board = _percentiles(board_times)
    row = _percentiles(row_times)
    record = _percentiles(record_times)
    result = {
        "runs": args.runs,
        "groups": args.groups,
        "events": events,
        "rebuild": {
            "events": rebuilt.events,
            "seconds": round(rebuild_s, 2),
            "eventsPerSecond": round(rebuilt.events / rebuild_s),
            "target": 20_000,
        },
        "leaderboardMs": {"p50": round(board[0], 3), "p99": round(board[1], 3), "targetP99": 10},
        "runRowMs": {"p50": round(row[0], 3), "p99": round(row[1], 3), "targetP99": 10},
        "fullRunRecordMs": {"p50": round(record[0], 2), "p99": round(record[1], 2)},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "projections.json").write_text(json.dumps(result, indent=2) + "\n")
    table = Table(title=f"projections at {args.runs:,} runs in {args.groups:,} groups")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("target", justify="right")
    table.add_row("rebuild events/s", f"{result['rebuild']['eventsPerSecond']:,}", "≥ 20,000")
    table.add_row("leaderboard p50 / p99 ms", f"{board[0]:.2f} / {board[1]:.2f}", "p99 ≤ 10")
    table.add_row("run row p50 / p99 ms", f"{row[0]:.2f} / {row[1]:.2f}", "p99 ≤ 10")
    table.add_row("full run record p50 / p99 ms", f"{record[0]:.1f} / {record[1]:.1f}", "—")
    Console().print(table)


if __name__ == "__main__":
    main()
