"""Growth (docs/design.md §13): append latency and proof size as the ledger grows.

Target: both O(log n), i.e. flat from 10^3 to 10^6 events. One ledger home (SQLite file) is
filled to each size in turn, quickly: really signed ingestion envelopes of distinct runs saved
in bulk (``bench_projections.bulk_ingest``, no per-append admission), then sequenced into the
transparency log (``ledger.tlog.catch_up()``). At each size:

- **append latency**: ``--appends`` real, signed ``Ledger.append`` calls (attestations by a
  registered attester on runs picked at random over the whole store, signed before the clock
  starts; a few untimed first), p50 / p99;
- **proof size**: the inclusion proof in each of those receipts, in hashes and bytes, against
  ⌈log2 n⌉;
- **anchor**: a bare eventsourcing ``Application`` (same SQLAlchemy SQLite persistence and
  aggregate cache settings as the ledger) on its own SQLite file filled to the same number of
  events (one trivial aggregate per event), timed the same way: get a random aggregate,
  trigger one trivial event, save. The ratio ledger / bare is our overhead at that size.
  The two alternate, one ledger append then one bare append, after the fills are synced to
  disk: timed one after the other, each met the disk and load of its own moment, the ledger
  always first, right after the fills (2026-12-07, session 4).

Pass: at every size the ledger's append p50 ≤ 1.5 × the bare Application's; the ledger's
append p50 at the largest size ≤ 1.5 × p50 at the smallest (p50 rather than p99: on a shared
2-core machine the p99 of a few hundred appends is other work's noise); and every proof
≤ ⌈log2 n⌉ hashes.

    python -m benchmarks.bench_growth                       # 10^3, 10^4, 10^5
    python -m benchmarks.bench_growth --sizes 1000 10000    # quicker
    python -m benchmarks.bench_growth --large               # + 10^6 (20+ minutes more)
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event
from rich.console import Console

from benchmarks.bench_projections import bulk_ingest
from benchmarks.suite import Context, FigureResult, Row, at_most, fmt, latency_ms
from domain.statements import Role
from ledger.application import Ledger
from ledger.home import LedgerHome
from ledger.signing.authoring import attestation_envelope, key_registration_envelope
from ledger.signing.keys import SigningKey

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
FIGURE = "growth"
DEFAULT_SIZES = [1_000, 10_000, 100_000]
LARGE_SIZES = [*DEFAULT_SIZES, 1_000_000]
QUICK_SIZES = [100, 1_000]
MAX_LATENCY_GROWTH = 1.5
# A signed append's p50 against a bare eventsourcing Application's, same store, same size.
MAX_TO_BARE = 1.5
GROUPS = 1000  # comparison groups the filler's runs fall in


# ------------------------------------------------------------------------ bare anchor


class Tally(Aggregate):
    """The trivial aggregate of the anchor: created, then ticked."""

    @event("Created")
    def __init__(self) -> None:
        self.ticks = 0

    @event("Ticked")
    def tick(self) -> None:
        self.ticks += 1


class BareApp(Application[UUID]):
    name = "BenchBare"


def bare_app(db_url: str) -> BareApp:
    return BareApp(
        env={
            "PERSISTENCE_MODULE": "eventsourcing_sqlalchemy",
            "SQLALCHEMY_URL": db_url,
            "CREATE_TABLE": "y",  # its own table, not the ledger's schema
            "AGGREGATE_CACHE_MAXSIZE": "10000",
            "AGGREGATE_CACHE_FASTFORWARD": "y",
        }
    )


def fill_bare(app: BareApp, ids: list[UUID], count: int, batch: int = 1000) -> None:
    """``count`` more events: new aggregates of one event each (saved in batches)."""
    for first in range(0, count, batch):
        made = [Tally() for _ in range(min(batch, count - first))]
        app.save(*made)
        ids.extend(a.id for a in made)


def bare_append(app: BareApp, ids: list[UUID], rng: random.Random) -> float:
    """One anchor append: get a random aggregate, tick it, save; its latency."""
    aggregate_id = rng.choice(ids)
    t0 = time.perf_counter()
    tally: Tally = app.repository.get(aggregate_id)
    tally.tick()
    app.save(tally)
    return time.perf_counter() - t0


# ----------------------------------------------------------------------------- ledger


def run_digests(ledger: Ledger) -> list[tuple[str, str]]:
    return [(str(d), str(n)) for d, n in ledger.run_index()]


def time_both(
    ledger: Ledger,
    envelopes: list[dict[str, Any]],
    warm: int,
    bare: BareApp,
    bare_ids: list[UUID],
    rng: random.Random,
) -> tuple[list[float], list[int], list[int], list[float]]:
    """Latency of each ``Ledger.append`` after ``warm`` untimed ones, each followed by one
    anchor append: the two alternate, so both are timed under the same load and disk
    (timed one after the other, the ledger's appends ran while the disk was still writing
    back the fill's hundreds of MB, the anchor's a second later). Also the proofs' hash
    counts and the tree sizes they are against, and the anchor's latencies."""
    latencies: list[float] = []
    hashes: list[int] = []
    sizes: list[int] = []
    bare_latencies: list[float] = []
    for n, raw in enumerate(envelopes):
        t0 = time.perf_counter()
        receipt = ledger.append(raw)
        elapsed = time.perf_counter() - t0
        bare_elapsed = bare_append(bare, bare_ids, rng)
        if n < warm:
            continue
        latencies.append(elapsed)
        bare_latencies.append(bare_elapsed)
        assert receipt.inclusion is not None, "every receipt carries its inclusion proof"
        hashes.append(len(receipt.inclusion.hashes))
        sizes.append(receipt.inclusion.tree_size)
    return latencies, hashes, sizes, bare_latencies


def random_leaf_proofs(ledger: Ledger, rng: random.Random, count: int) -> dict[str, Any]:
    """Hash counts of inclusion proofs of ``count`` random leaves against the current tree,
    and how long each took to build (the log's read path)."""
    counts: list[int] = []
    times: list[float] = []
    with ledger.store.transaction(commit=False) as session:
        size = ledger.tlog.tree_size(session)
        for _ in range(count):
            leaf = rng.randrange(size)
            t0 = time.perf_counter()
            counts.append(len(ledger.tlog.proof_hashes(session, leaf, size)))
            times.append(time.perf_counter() - t0)
    return {
        "treeSize": size,
        "min": min(counts),
        "max": max(counts),
        "mean": round(sum(counts) / len(counts), 2),
        "buildMs": latency_ms(times),
    }


def _proof_max(point: dict[str, Any]) -> int:
    return max(int(point["proofHashes"]["max"]), int(point["randomLeafProofHashes"]["max"]))


def measure(
    sizes: list[int],
    appends: int,
    console: Console,
    step: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    say = step or (lambda _text: None)
    rng = random.Random(13)  # noqa: S311 - reproducible sampling, not secrecy
    folder = CACHE / f"growth-{uuid.uuid4().hex[:8]}"
    warm = max(5, appends // 10)
    points: list[dict[str, Any]] = []
    try:
        home = LedgerHome.at(folder, f"sqlite:///{folder / 'ledger.db'}")
        ledger = home.initialise(origin="bench.kernelindex/growth")
        ingester = home.key("ingester")
        attester = SigningKey.generate()
        ledger.append(
            key_registration_envelope(attester.public, [Role.ATTESTER], attester, label="growth")
        )
        bare = bare_app(f"sqlite:///{folder / 'bare.db'}")
        bare_ids: list[UUID] = []
        bare_events = 0
        next_run = 0
        for size in sorted(sizes):
            have = int(ledger.store.last_position())
            missing = max(0, size - have)
            say(f"filling to {size:,} events")
            started = time.perf_counter()

            def report(done: int, size: int = size, missing: int = missing) -> None:
                say(f"filling to {size:,} events: {done:,}/{missing:,}")

            if missing:
                bulk_ingest(ledger, ingester, next_run, missing, GROUPS, progress=report)
                next_run += missing
            fill_s = time.perf_counter() - started
            events = int(ledger.store.last_position())
            started = time.perf_counter()
            fill_bare(bare, bare_ids, max(0, events - bare_events))
            bare_events = max(bare_events, events)
            bare_fill_s = time.perf_counter() - started

            say(f"{size:,} events: signing {appends + warm} attestations")
            runs = run_digests(ledger)
            envelopes = []
            for n in range(appends + warm):
                digest, name = rng.choice(runs)
                envelopes.append(
                    attestation_envelope(
                        digest, name, attester, type_="note", body=f"growth {size} append {n}"
                    )
                )
            # The fills' writes reach the disk before either is timed (not during one).
            os.sync()
            say(f"{size:,} events: {appends} x Ledger.append, each beside a bare append")
            latencies, hashes, tree_sizes, bare_latencies = time_both(
                ledger, envelopes, warm, bare, bare_ids, rng
            )
            bare_events += appends + warm
            say(f"{size:,} events: inclusion proofs of random leaves")
            sampled = random_leaf_proofs(ledger, rng, appends)
            log2n = math.ceil(math.log2(max(tree_sizes)))
            point = {
                "size": size,
                "eventsBefore": events,
                "fillSeconds": round(fill_s, 1),
                "bareFillSeconds": round(bare_fill_s, 1),
                "appendMs": latency_ms(latencies),
                "bareAppendMs": latency_ms(bare_latencies),
                # Receipts prove the newest leaves (short paths at the right edge); random
                # leaves over the whole tree show the full O(log n) path.
                "proofHashes": {"min": min(hashes), "max": max(hashes)},
                "randomLeafProofHashes": sampled,
                "proofBytesMax": 32 * max([*hashes, sampled["max"]]),
                "treeSize": max(tree_sizes),
                "ceilLog2TreeSize": log2n,
            }
            points.append(point)
            console.print(
                f"  growth at {events:,} events: append p50 {point['appendMs']['p50']:.2f} ms "
                f"(bare {point['bareAppendMs']['p50']:.2f}), proofs ≤ {max(hashes)} hashes "
                f"(receipts), ≤ {sampled['max']} (random leaves)"
            )
        ledger.close()
        bare.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    first, last = points[0], points[-1]
    growth = last["appendMs"]["p50"] / first["appendMs"]["p50"]
    bare_growth = last["bareAppendMs"]["p50"] / first["bareAppendMs"]["p50"]
    return {
        "sizes": sorted(sizes),
        "appendsPerSize": appends,
        "warmupPerSize": warm,
        "points": points,
        "p50GrowthLargestToSmallest": round(growth, 3),
        "p99GrowthLargestToSmallest": round(last["appendMs"]["p99"] / first["appendMs"]["p99"], 3),
        "bareP50GrowthLargestToSmallest": round(bare_growth, 3),
        "maxLatencyGrowth": MAX_LATENCY_GROWTH,
        "proofsWithinLog2": all(_proof_max(p) <= p["ceilLog2TreeSize"] for p in points),
    }


def figure(ctx: Context) -> FigureResult:
    sizes = QUICK_SIZES if ctx.quick else (LARGE_SIZES if ctx.large else DEFAULT_SIZES)
    appends = 30 if ctx.quick else 300
    m = measure(sizes, appends, ctx.console, ctx.step)
    rows: list[Row] = []
    for p in m["points"]:
        lat, bare = p["appendMs"], p["bareAppendMs"]
        rows.append(
            Row(
                FIGURE,
                f"Ledger.append p50 (p99) ms at {p['size']:,} events",
                f"{lat['p50']:.2f} ({lat['p99']:.2f})",
                f"bare es {bare['p50']:.2f} ({bare['p99']:.2f})",
                lat["p50"] / bare["p50"],
                f"ratio ≤ {MAX_TO_BARE}",
                *at_most(lat["p50"] / bare["p50"], MAX_TO_BARE),
            )
        )
    for p in m["points"]:
        hashes = _proof_max(p)
        ok, to_target = at_most(hashes, p["ceilLog2TreeSize"])
        rows.append(
            Row(
                FIGURE,
                f"inclusion proof at {p['size']:,} events, hashes (bytes)",
                f"{hashes} ({p['proofBytesMax']} B)",
                f"⌈log2 {p['treeSize']:,}⌉ = {p['ceilLog2TreeSize']}",
                hashes / p["ceilLog2TreeSize"],
                "≤ ⌈log2 n⌉",
                ok,
                to_target,
            )
        )
    for p in m["points"]:
        build = p["randomLeafProofHashes"]["buildMs"]
        rows.append(
            Row(
                FIGURE,
                f"  inclusion proof read p50 (p99) ms at {p['size']:,} events",
                f"{build['p50']:.2f} ({build['p99']:.2f})",
                f"append p50 {p['appendMs']['p50']:.2f}",
                build["p50"] / p["appendMs"]["p50"],
                "flat",
            )
        )
    first, last = m["points"][0], m["points"][-1]
    growth = m["p50GrowthLargestToSmallest"]
    ok, to_target = at_most(growth, MAX_LATENCY_GROWTH)
    rows.append(
        Row(
            FIGURE,
            f"append p50 growth {first['size']:,} → {last['size']:,} events",
            f"{growth:.2f}×",
            f"bare es {m['bareP50GrowthLargestToSmallest']:.2f}×",
            growth / m["bareP50GrowthLargestToSmallest"],
            f"≤ {MAX_LATENCY_GROWTH:g}×",
            ok,
            to_target,
        )
    )
    span = f"10^{round(math.log10(first['size']))}..10^{round(math.log10(last['size']))}"
    return FigureResult(
        FIGURE,
        f"growth {span} events ({appends} appends per size)",
        rows,
        m,
        why=(
            "reading one inclusion proof (the log's node lookup) takes "
            + ", ".join(
                f"{p['randomLeafProofHashes']['buildMs']['p50']:.2f} ms at {p['size']:,}"
                for p in m["points"]
            )
            + " events (p50): where it grows with n, the node query is not using the "
            "(level, idx) key; fill times "
            + ", ".join(fmt(p["fillSeconds"], 1) + " s" for p in m["points"])
        ),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="append latency and proof size vs ledger size")
    parser.add_argument("--sizes", type=int, nargs="+", default=DEFAULT_SIZES)
    parser.add_argument("--large", action="store_true", help="sizes 10^3 .. 10^6")
    parser.add_argument("--appends", type=int, default=300, help="timed appends per size")
    args = parser.parse_args(argv)
    console = Console()
    m = measure(LARGE_SIZES if args.large else args.sizes, args.appends, console, console.print)
    console.print_json(data=m)


if __name__ == "__main__":
    main()
