"""The ledger under load and what is sent to it: runs, one attester key per client, every envelope
signed before the clock starts; and the in-process anchors.
"""

from __future__ import annotations

import cProfile
import json
import math
import pstats
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.generate import load_seed, synthetic_manifests
from domain.statements import Role
from ledger.application import Ledger
from ledger.home import LedgerHome
from ledger.signing.authoring import (
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
)
from ledger.signing.dsse import parse_envelope
from ledger.signing.keys import SigningKey

# --------------------------------------------------------------------------- the ledger


@dataclass(frozen=True)
class Planned:
    """One append, signed and serialised before the clock starts."""

    client: int
    seq: int
    path: str
    body: bytes
    envelope: dict[str, Any]
    digest: str


@dataclass
class Prepared:
    home: LedgerHome
    ledger: Ledger
    runs: list[tuple[str, str]]  # (digest, name)
    attesters: list[SigningKey]
    events: int


def prepare_ledger(path: Path, db_url: str, runs: int, attesters: int) -> Prepared:
    """A fresh ledger home: operator keys, ``runs`` distinct ingested runs, and one
    self-enrolled attester key per client (so no client's writes share a signer)."""
    path.mkdir(parents=True, exist_ok=True)
    home = LedgerHome.at(path, db_url)
    ledger = home.initialise(origin="bench.kernelindex/http")
    ingester = home.key("ingester")
    seed = load_seed()
    digests: list[tuple[str, str]] = []
    for i in range(runs):
        manifests = synthetic_manifests(seed, i)
        receipt = ledger.append(ingestion_envelope(manifests, ingester))
        digests.append((receipt.subject_digest, str(manifests["run"]["metadata"]["name"])))
    keys = [SigningKey.generate() for _ in range(attesters)]
    for n, key in enumerate(keys):
        label = f"bench-http-{n}"
        ledger.append(key_registration_envelope(key.public, [Role.ATTESTER], key, label=label))
    events = int(ledger.store.last_position())
    return Prepared(home, ledger, digests, keys, events)


def plan_appends(
    runs: list[tuple[str, str]], keys: list[SigningKey], counts: list[int], tag: str
) -> list[list[Planned]]:
    """Signed attestation envelopes per client: client ``c`` signs with key ``c mod keys``
    about run ``c mod runs``; every body is distinct (tag, client, number), so no append is
    a duplicate of another and each must be stored as a new event."""
    plans: list[list[Planned]] = []
    for client, count in enumerate(counts):
        digest, name = runs[client % len(runs)]
        key = keys[client % len(keys)]
        mine: list[Planned] = []
        for seq in range(count):
            envelope = attestation_envelope(
                digest,
                name,
                key,
                type_="note",
                body=f"bench-http {tag}: client {client} append {seq}",
            )
            mine.append(
                Planned(
                    client=client,
                    seq=seq,
                    path=f"/v1/runs/{digest}/attestations",
                    body=json.dumps(envelope, separators=(",", ":")).encode(),
                    envelope=envelope,
                    digest=parse_envelope(envelope).digest,
                )
            )
        plans.append(mine)
    return plans


def split(total: int, clients: int) -> list[int]:
    return [total // clients + (1 if c < total % clients else 0) for c in range(clients)]


def _percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def latency_summary(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    ms = [s * 1000 for s in ordered]
    if not ms:
        return {}
    return {
        "mean": round(statistics.fmean(ms), 3),
        "p50": round(_percentile(ms, 0.50), 3),
        "p90": round(_percentile(ms, 0.90), 3),
        "p99": round(_percentile(ms, 0.99), 3),
        "max": round(ms[-1], 3),
    }


def in_process_rate(ledger: Ledger, envelopes: list[Planned]) -> dict[str, Any]:
    """Anchor: ``Ledger.append`` in a loop, one thread, no HTTP, on the scenario's ledger."""
    warm = max(1, len(envelopes) // 10)
    for planned in envelopes[:warm]:
        ledger.append(planned.envelope)
    timed = envelopes[warm:]
    latencies: list[float] = []
    cpu0 = time.process_time()
    started = time.perf_counter()
    for planned in timed:
        t0 = time.perf_counter()
        ledger.append(planned.envelope)
        latencies.append(time.perf_counter() - t0)
    wall = time.perf_counter() - started
    result: dict[str, Any] = {
        "appends": len(timed),
        "warmup": warm,
        "seconds": round(wall, 3),
        "appendsPerSecond": round(len(timed) / wall, 1),
        "cpuMsPerAppend": round((time.process_time() - cpu0) / len(timed) * 1000, 3),
        "latencyMs": latency_summary(latencies),
    }
    return result


def profile_fresh_appends(
    ledger: Ledger, envelopes: list[Planned], group: int, top: int = 25
) -> dict[str, Any]:
    """cProfile of fresh appends through ``Ledger.append_many`` in groups of ``group`` (the
    server's write path), in this process. The profiler's own overhead inflates absolute
    times about twofold; the shares are what to read."""
    raw = [planned.envelope for planned in envelopes]
    profiler = cProfile.Profile()
    profiler.enable()
    for first in range(0, len(raw), group):
        ledger.append_many(raw[first : first + group])
    profiler.disable()
    stats = pstats.Stats(profiler)
    total = stats.total_tt  # type: ignore[attr-defined]
    rows: list[dict[str, Any]] = []
    entries = stats.stats  # type: ignore[attr-defined]
    for (filename, line, func), (_, calls, tottime, cumtime, _) in entries.items():
        rows.append(
            {
                "function": f"{_short(filename)}:{line}({func})",
                "calls": calls,
                "tottimeMsPerAppend": tottime / len(envelopes) * 1000,
                "cumtimeMsPerAppend": cumtime / len(envelopes) * 1000,
            }
        )
    by_self = sorted(rows, key=lambda r: -r["tottimeMsPerAppend"])[:top]
    by_cum = sorted(rows, key=lambda r: -r["cumtimeMsPerAppend"])[:top]
    for row in (*by_self, *by_cum):
        row["tottimeMsPerAppend"] = round(row["tottimeMsPerAppend"], 4)
        row["cumtimeMsPerAppend"] = round(row["cumtimeMsPerAppend"], 4)
    return {
        "appends": len(envelopes),
        "group": group,
        "profiledMsPerAppend": round(total / len(envelopes) * 1000, 3),
        "bySelfTime": by_self,
        "byCumulativeTime": by_cum,
    }


def in_process_groups(prepared: Prepared, sizes: list[int], appends: int) -> list[dict[str, Any]]:
    """Anchor: ``Ledger.append_many`` in groups of each size, one thread, no HTTP: what the
    ledger's group commit gives without the server around it (32 clients make groups of at
    most 32). The appends interleave over all runs, as the clients' do."""
    results: list[dict[str, Any]] = []
    for size in sizes:
        counts = split(appends, len(prepared.runs))
        plans = plan_appends(prepared.runs, prepared.attesters, counts, f"group-{size}")
        queue = [g[i].envelope for i in range(max(counts)) for g in plans if i < len(g)]
        refused = 0
        cpu0 = time.process_time()
        started = time.perf_counter()
        for first in range(0, len(queue), size):
            results_ = prepared.ledger.append_many(queue[first : first + size])
            refused += sum(1 for r in results_ if not hasattr(r, "position"))
        wall = time.perf_counter() - started
        results.append(
            {
                "group": size,
                "appends": len(queue),
                "refused": refused,
                "seconds": round(wall, 3),
                "appendsPerSecond": round(len(queue) / wall, 1),
                "cpuMsPerAppend": round((time.process_time() - cpu0) / len(queue) * 1000, 3),
            }
        )
    return results


def _short(filename: str) -> str:
    for marker in ("site-packages/", "/work/main/", "lib/python3"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename
