"""Reads that do not grow with anyone's writes (docs/design.md §13, issue 13 §7).

Anyone may self-register an attester key and attest to any run, so a run's events are not
bounded by anything its owner controls. The figure: a run with 2,000 attestations (from 40
self-registered attesters) against a run of the same group with 2, both served by the API
(in-process Litestar test client, warm): the p99 of the run record (JSON), its HTML page and
its history (first page) for the flooded run, as a ratio to the quiet one's. Target ≤ 2×.

    python -m benchmarks --only flood
    python -m benchmarks.bench_flood [--attestations N] [--reads N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from litestar.testing import TestClient
from rich.console import Console

from api.demo import build_demo
from api.server.app import create_app
from api.server.config import ServerConfig
from benchmarks.suite import Context, FigureResult, Row, at_most, percentile
from domain.statements import Role
from ledger.application import Ledger
from ledger.home import LedgerHome
from ledger.signing.authoring import attestation_envelope, key_registration_envelope
from ledger.signing.keys import SigningKey

TARGET_RATIO = 2.0
ATTESTERS = 40
QUIET_ATTESTATIONS = 2
FLOOD_RUN = "sha256:7d1516c14ea952d53ea9d4646926919b9449e6029ea769059b6ce32c0ab9889b"
FLOOD_NAME = "sol-submission-21613"
QUIET_RUN = "sha256:b2f0e91856873b1733ce301704de66e75276b2a348a3d71f37cbac9e11198681"
QUIET_NAME = "sol-submission-36818"


def flood(ledger: Ledger, run: str, name: str, count: int, keys: list[SigningKey]) -> None:
    """``count`` notes on ``run``, signed round-robin by ``keys``, appended in groups."""
    batch: list[Any] = []
    for i in range(count):
        batch.append(
            attestation_envelope(run, name, keys[i % len(keys)], type_="note", body=f"note {i}")
        )
        if len(batch) == 256:
            ledger.append_many(batch)
            batch = []
    if batch:
        ledger.append_many(batch)


def build(folder: Path) -> tuple[Ledger, list[SigningKey]]:
    """The demo ledger, the quiet run's notes, and the attester keys the flood signs with."""
    ledger, _ = build_demo(LedgerHome.at(folder / "home"))
    keys = [SigningKey.generate() for _ in range(ATTESTERS)]
    ledger.append_many(
        [key_registration_envelope(k.public, [Role.ATTESTER], k, label="flood") for k in keys]
    )
    flood(ledger, QUIET_RUN, QUIET_NAME, QUIET_ATTESTATIONS, keys)
    return ledger, keys


def _timed(client: TestClient[Any], path: str, reads: int) -> list[float]:
    for _ in range(5):  # warm: caches, the views' catch-up
        assert client.get(path).status_code == 200, path
    samples = []
    for _ in range(reads):
        started = time.perf_counter()
        reply = client.get(path)
        samples.append((time.perf_counter() - started) * 1000)
        assert reply.status_code == 200
    return samples


READS = (
    ("record", "/v1/runs/{run}"),
    ("page", "/runs/{run}"),
    ("history", "/v1/runs/{run}/history"),
)


def measure(attestations: int, reads: int, console: Console) -> dict[str, Any]:
    """p99 of each read of the flooded run and of the quiet one; and of the quiet one before
    the flood: the flooded run is its group's #1, which the quiet run's record and page
    compare it with, so a read that replays #1 slows every run of the group alike (the
    flooded-to-quiet ratio alone cannot see that)."""
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        ledger, keys = build(Path(tmp))
        config = ServerConfig(key_rate=0, address_rate=0, json_logs=False)
        out: dict[str, Any] = {"attestations": attestations, "reads": reads}
        with TestClient(create_app(ledger, config)) as client:
            before = {
                label: percentile(_timed(client, template.format(run=QUIET_RUN), reads), 0.99)
                for label, template in READS
            }
            flood(ledger, FLOOD_RUN, FLOOD_NAME, attestations, keys)
            out["buildSeconds"] = time.perf_counter() - started
            for label, template in READS:
                row: dict[str, Any] = {}
                for which, run in (("flooded", FLOOD_RUN), ("quiet", QUIET_RUN)):
                    samples = _timed(client, template.format(run=run), reads)
                    row[which] = {
                        "p50": percentile(samples, 0.5),
                        "p99": percentile(samples, 0.99),
                    }
                row["ratio"] = row["flooded"]["p99"] / row["quiet"]["p99"]
                row["quietBeforeFloodP99"] = before[label]
                row["quietGrowth"] = row["quiet"]["p99"] / before[label]
                out[label] = row
                console.print(
                    f"{label}: flooded p99 {row['flooded']['p99']:.1f} ms, quiet "
                    f"{row['quiet']['p99']:.1f} ms (before the flood {before[label]:.1f}), "
                    f"ratio {row['ratio']:.2f}"
                )
        ledger.close()
    return out


def figure(ctx: Context) -> FigureResult:
    attestations, reads = (200, 20) if ctx.quick else (2_000, 100)
    ctx.step(f"a run with {attestations:,} attestations against one with {QUIET_ATTESTATIONS}")
    m = measure(attestations, reads, ctx.console)
    names = {
        "record": "run record (JSON)",
        "page": "run page (HTML)",
        "history": "history, first page",
    }
    judged = [
        (
            f"{name} p99 ms, {attestations:,} attestations vs {QUIET_ATTESTATIONS}",
            m[label]["flooded"]["p99"],
            f"quiet run {m[label]['quiet']['p99']:.1f}",
            m[label]["ratio"],
        )
        for label, name in names.items()
    ] + [
        (
            f"  quiet run of the flooded #1's group: {names[label]} p99 ms",
            m[label]["quiet"]["p99"],
            f"before the flood {m[label]['quietBeforeFloodP99']:.1f}",
            m[label]["quietGrowth"],
        )
        for label in ("record", "page")
    ]
    rows = [
        Row(
            "flood",
            what,
            f"{value:.1f}",
            anchor,
            float(ratio),
            f"≤ {TARGET_RATIO:g}×",
            *at_most(float(ratio), TARGET_RATIO),
        )
        for what, value, anchor, ratio in judged
    ]
    why = (
        "a read touches the run's state events, its newest attestations and one history "
        "page, and of its group's #1 only the manifests; what grows with attestations is "
        "the index lookups' depth"
    )
    return FigureResult("flood", "reads of a flooded run", rows, m, why=why)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attestations", type=int, default=2_000)
    parser.add_argument("--reads", type=int, default=100)
    args = parser.parse_args(argv)
    measure(args.attestations, args.reads, Console())


if __name__ == "__main__":
    main()
