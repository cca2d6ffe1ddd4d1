"""What the manifest schema gate costs: ``validate_manifest`` per kind, and the manifest-set
check of an ingestion with the digest memo cold, in thread-CPU µs (issues 33 and 36).

The manifests are real ones: per kind, up to 200 from the public catalog export (the run,
protocol and environment of the seed besides); the manifest sets are the ingestion
benchmark's (``generate.synthetic_manifests``, their shared members warm as a running server
holds them: ``bench_ingest.warm_shared_manifests``). ``--before CHECKOUT`` measures another
checkout too (``PYTHONPATH``), the two taking turns in fresh processes, so that the machine's
load weighs on both alike; each figure is the median over ``--repeats`` turns.

    python -m benchmarks.bench_manifest_gate [--before CHECKOUT] [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CATALOG = (
    REPO
    / "conformance"
    / "fixtures"
    / "kernelindex-catalog"
    / "catalog-2026-08-16-0022af0b.jsonl.zst"
)
PER_KIND = 200
SETS = 400


def catalog_by_kind() -> dict[str, list[dict[str, Any]]]:
    import zstandard  # a dev dependency, as the catalog tests read it  # noqa: PLC0415

    with CATALOG.open("rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as reader:
        lines = reader.read().splitlines()
    found: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        record = json.loads(line)
        manifest = record["row"].get("manifest")
        docs = manifest.values() if record["table"] == "benchmark_runs" else [manifest]
        for doc in docs:
            if doc is not None and len(found.setdefault(doc["kind"], [])) < PER_KIND:
                found[doc["kind"]].append(doc)
    return found


def _cpu_us(fn: Callable[[Any], object], items: list[Any]) -> float:
    """Thread-CPU µs per item, the best of three passes (the least disturbed)."""
    best = float("inf")
    for _ in range(3):
        started = time.thread_time()
        for item in items:
            fn(item)
        best = min(best, time.thread_time() - started)
    return best / len(items) * 1e6


def measure_here() -> dict[str, float]:
    """One turn in this process: the figures of the checkout on ``sys.path``."""
    from benchmarks.bench_ingest import warm_shared_manifests  # noqa: PLC0415
    from benchmarks.generate import load_seed, synthetic_manifests  # noqa: PLC0415
    from domain.manifests.manifest_set import check_manifest_set  # noqa: PLC0415
    from domain.manifests.registry import validate_manifest  # noqa: PLC0415

    figures: dict[str, float] = {}
    by_kind = catalog_by_kind()
    for doc in load_seed().values():
        by_kind[doc["kind"]].append(doc)
    for kind, docs in sorted(by_kind.items()):
        validate_manifest(docs[0])  # the kind's model made (and, for pydantic, built)
        figures[kind] = _cpu_us(validate_manifest, docs)
    seed = load_seed()
    sets = [synthetic_manifests(seed, i) for i in range(SETS)]
    warm_shared_manifests(SETS)
    started = time.thread_time()
    for manifests in sets:
        check_manifest_set(manifests)
    figures["checkManifestSet (memo cold)"] = (time.thread_time() - started) / SETS * 1e6
    figures["checkManifestSet (memo warm)"] = _cpu_us(check_manifest_set, sets)
    return figures


def _turn(checkout: Path) -> dict[str, float]:
    """One turn in a fresh process that imports ``checkout``'s code (its directory first on
    the path: ``python -c`` would put the working directory there)."""
    done = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, __file__, "--turn"],
        cwd=checkout,
        env={**os.environ, "PYTHONPATH": str(checkout)},
        capture_output=True,
        text=True,
        check=True,
    )
    figures: dict[str, float] = json.loads(done.stdout)
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="another checkout to measure beside this")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--turn", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.turn:
        import domain  # noqa: PLC0415

        assert Path(domain.__file__).parents[1] == Path.cwd(), "another checkout's code"
        print(json.dumps(measure_here()))
        return
    sides = {"after": REPO} | ({"before": args.before.resolve()} if args.before else {})
    samples: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    load_before = os.getloadavg()
    for _ in range(args.repeats):
        for side, checkout in sides.items():
            samples[side].append(_turn(checkout))
    load_after = os.getloadavg()
    names = list(samples["after"][0])
    print(f"thread-CPU µs, median of {args.repeats} turns; load {load_before} → {load_after}")
    print(
        "| figure | " + " | ".join(sides) + (" | before ÷ after |" if "before" in sides else " |")
    )
    print("|---|" + "---|" * (len(sides) + ("before" in sides)))
    for name in names:
        medians = {s: statistics.median(t[name] for t in samples[s]) for s in sides}
        cells = " | ".join(f"{medians[s]:,.1f}" for s in sides)
        ratio = f" | {medians['before'] / medians['after']:.1f}×" if "before" in sides else ""
        print(f"| {name} | {cells}{ratio} |")


if __name__ == "__main__":
    main()
