"""A synthetic, really signed ledger for the benchmarks.

``build_ledger(path, runs, attestations_per_run)`` creates a ledger home at ``path`` (trust
root, operator keys, ``ledger.db`` SQLite file) exactly as ``kernelindex init`` does, then
appends through the real ``Ledger.append``:

- a few self-registered attester keys;
- ``runs`` distinct BenchmarkRun ingestions derived from the seed manifest
  (``conformance/fixtures/seed/run-38823.manifest.json``): each gets its own ``metadata.name``,
  ``externalId``, latency and ``observedAt``, so every run manifest digest differs, while the
  protocol and environment manifests stay the seed's;
- ``attestations_per_run`` attestations on each run, signed by the attesters in turn.

``open_built(path)`` reopens such a home for reuse. ``export(built, bundle_path, runs=None)``
writes a bundle with ``ledger.bundle.export_bundle`` (the whole ledger, or only the given
runs: key events are always included).

Run it directly to build one::

    python -m benchmarks.generate OUT_DIR --runs 1000 --attestations 3 --bundle OUT.jsonl
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from domain.statements import Role
from domain.timestamps import format_time, parse_time
from ledger.application import Ledger
from ledger.bundle import ExportSummary, export_bundle
from ledger.home import LedgerHome
from ledger.signing.authoring import (
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
)
from ledger.signing.keys import SigningKey
from ledger.signing.trust import TrustRoot

REPO = Path(__file__).resolve().parents[1]
SEED = REPO / "conformance" / "fixtures" / "seed" / "run-38823.manifest.json"
ATTESTERS = 4
ATTESTATION_TYPES = ("reproduced", "note", "reproduced", "disputed")


@dataclass
class BuiltLedger:
    home: LedgerHome
    ledger: Ledger
    trust_root: TrustRoot
    run_digests: list[str]
    events: int
    seconds: float

    @property
    def db_path(self) -> Path:
        return self.home.path / "ledger.db"


def load_seed(seed: Path = SEED) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(seed.read_text("utf-8"))
    return loaded


def synthetic_manifests(seed: dict[str, Any], i: int) -> dict[str, dict[str, Any]]:
    """The seed's manifest set with a run of its own (distinct run digest), number ``i``."""
    manifests: dict[str, dict[str, Any]] = copy.deepcopy(seed)
    run = manifests["run"]
    spec = run["spec"]
    base_ns = int(spec["timing"]["latencyNs"]["mean"])
    mean_ns = base_ns + (i * 7919) % 400_000 - 200_000
    spec["timing"]["latencyNs"]["mean"] = mean_ns
    observed = parse_time(str(spec["observedAt"])) + timedelta(seconds=37 * i)
    spec["observedAt"] = format_time(observed)
    native = spec.get("sourceNative")
    if isinstance(native, dict):
        native["externalId"] = f"bench-{i}"
        metrics = native.get("metrics")
        if isinstance(metrics, dict):
            metrics["latency_ms"] = round(mean_ns / 1e6, 6)
    run["metadata"]["name"] = f"bench-run-{i:07d}"
    return manifests


def build_ledger(
    path: Path,
    runs: int,
    attestations_per_run: int,
    *,
    seed: Path = SEED,
    progress: Callable[[int], None] | None = None,
) -> BuiltLedger:
    """Create a ledger home at ``path`` (must not hold one) and fill it; see the module doc."""
    started = time.perf_counter()
    path.mkdir(parents=True, exist_ok=True)
    home = LedgerHome.at(path, f"sqlite:///{path / 'ledger.db'}")
    ledger = home.initialise(origin="bench.kernelindex/log")
    events = 3  # admin, ingester and log keys registered by initialise
    ingester = home.key("ingester")
    attesters = [SigningKey.generate() for _ in range(ATTESTERS)]
    for n, key in enumerate(attesters):
        ledger.append(
            key_registration_envelope(key.public, [Role.ATTESTER], key, label=f"attester-{n}")
        )
        events += 1
    seed_doc = load_seed(seed)
    digests: list[str] = []
    for i in range(runs):
        manifests = synthetic_manifests(seed_doc, i)
        receipt = ledger.append(ingestion_envelope(manifests, ingester))
        digests.append(receipt.subject_digest)
        run_name = str(manifests["run"]["metadata"]["name"])
        events += 1
        for j in range(attestations_per_run):
            attester = attesters[(i + j) % ATTESTERS]
            ledger.append(
                attestation_envelope(
                    receipt.subject_digest,
                    run_name,
                    attester,
                    type_=ATTESTATION_TYPES[j % len(ATTESTATION_TYPES)],
                    body=f"benchmark attestation {j} on run {i}",
                    observed_ns=1_700_000 + i + j,
                )
            )
            events += 1
        if progress is not None:
            progress(events)
    return BuiltLedger(
        home=home,
        ledger=ledger,
        trust_root=home.trust_root(),
        run_digests=digests,
        events=events,
        seconds=time.perf_counter() - started,
    )


def open_built(path: Path) -> BuiltLedger:
    """Reopen a ledger home ``build_ledger`` made earlier (to reuse it)."""
    home = LedgerHome.at(path, f"sqlite:///{path / 'ledger.db'}")
    ledger = home.open()
    digests = [digest for digest, _ in ledger.run_index()]
    events = int(ledger.store.last_position())
    return BuiltLedger(home, ledger, home.trust_root(), digests, events, 0.0)


def export(built: BuiltLedger, bundle: Path, runs: Iterable[str] | None = None) -> ExportSummary:
    """Write a bundle of the whole ledger (``runs`` None) or of the given runs."""
    with bundle.open("w", encoding="utf-8") as handle:
        return export_bundle(built.ledger, handle, runs=runs)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", type=Path, help="ledger home folder to create")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--attestations", type=int, default=3, help="per run")
    parser.add_argument("--bundle", type=Path, help="also export the whole ledger here")
    args = parser.parse_args(argv)
    built = build_ledger(args.home, args.runs, args.attestations)
    print(f"{built.events} events in {built.seconds:.1f}s ({built.events / built.seconds:.0f}/s)")
    if args.bundle is not None:
        summary = export(built, args.bundle)
        print(f"bundle {args.bundle}: {summary.events} events, tree size {summary.tree_size}")


if __name__ == "__main__":
    main()
