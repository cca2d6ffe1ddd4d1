"""A server's first run page: CPU and wall time of the first ``GET /runs/{seed}`` (and of
the first ``GET /runs/{seed}/history``) in a fresh server process on the demo ledger, which
re-verifies the run's stored events with nothing kept (issue 33: reads do not re-validate
manifests admission validated).

    python -m benchmarks.bench_cold_page [--repeats N] [--before CHECKOUT]

Each sample is a new process (``create_app`` over the ledger, then the two GETs, each timed
on the process's CPU clock: the request is served on a worker thread); with ``--before``,
another checkout's process takes its turn after each of this one's, on the same ledger.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SEED = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"

CHILD = """\
import json, sys, time
from litestar.testing import TestClient
from api.server.app import create_app
from ledger.home import LedgerHome
home = LedgerHome.at(__import__("pathlib").Path(sys.argv[1]), sys.argv[2])
app = create_app(home.open())
out = {}
with TestClient(app) as client:
    run = sys.argv[3]
    for name, path in (("page", f"/runs/{run}"), ("history", f"/runs/{run}/history")):
        cpu, wall = time.process_time(), time.perf_counter()
        assert client.get(path).status_code == 200
        out[name] = [time.process_time() - cpu, time.perf_counter() - wall]
print(json.dumps(out))
"""


def _sample(checkout: Path, home: Path, db: str) -> dict[str, list[float]]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-c", CHILD, str(home), db, SEED],
        env=env,
        cwd=checkout,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, list[float]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--before", type=Path)
    args = parser.parse_args(argv)
    checkouts = {"after": REPO} | ({"before": args.before.resolve()} if args.before else {})
    with tempfile.TemporaryDirectory() as tmp:
        home, db = Path(tmp) / "home", f"sqlite:///{tmp}/ledger.db"
        subprocess.run(  # noqa: S603 - our own CLI
            [sys.executable, "-m", "api.cli", "demo", "--home", str(home), "--db", db],
            cwd=REPO,
            capture_output=True,
            check=True,
        )
        samples: dict[str, list[dict[str, list[float]]]] = {k: [] for k in checkouts}
        for _ in range(args.repeats):
            for name, checkout in checkouts.items():
                samples[name].append(_sample(checkout, home, db))
    for name, runs in samples.items():
        for request in ("page", "history"):
            cpu = statistics.median(r[request][0] for r in runs) * 1000
            wall = statistics.median(r[request][1] for r in runs) * 1000
            print(f"{name:6} first {request:8} CPU {cpu:6.1f} ms  wall {wall:6.1f} ms")


if __name__ == "__main__":
    main()
