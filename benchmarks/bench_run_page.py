"""The run page's cost: SQL statements and latency of ``GET /runs/{run}``, warm and right after
a write, on the demo ledger, in one process (issue 33's before/after figure).

    python -m benchmarks.bench_run_page [--requests 300] [--writes 30] [--out FILE]

Statements are counted with an SQLAlchemy hook on every engine (``before_cursor_execute``),
each labelled by its first word, so a GET that writes shows its INSERT/UPDATE. Latency is the
in-process request (Litestar's test client: no sockets), wall time and the process's CPU
time (every thread: the request is served on a worker thread). It uses
only what every version of the app since the demo has (``build_demo``, ``create_app``), so the
same file measures an older checkout: ``PYTHONPATH=<old checkout> python <this file>``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from litestar.testing import TestClient
from sqlalchemy import event
from sqlalchemy.engine import Engine

from api.demo import build_demo
from api.server.app import create_app
from api.server.config import ServerConfig
from ledger.home import LedgerHome
from ledger.signing.authoring import attestation_envelope
from ledger.signing.keys import SigningKey

FOLDER_THREAD = "kernelindex-views"  # projections.folder.THREAD_NAME, where there is one


class Statements:
    """Every statement any engine executes while counting, by its first word (the
    request's, on whichever thread serves it)."""

    def __init__(self) -> None:
        self.counting = False
        self.seen: Counter[str] = Counter()
        event.listen(Engine, "before_cursor_execute", self._seen)

    def _seen(self, *args: Any) -> None:
        # The views folder's own thread (a server's) folds in the background: its writes to
        # the views are not the request's.
        if self.counting and threading.current_thread().name != FOLDER_THREAD:
            self.seen[str(args[2]).lstrip().split(None, 1)[0].upper()] += 1

    @contextmanager
    def counted(self) -> Iterator[Counter[str]]:
        self.seen = Counter()
        self.counting = True
        try:
            yield self.seen
        finally:
            self.counting = False


def _quantiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered) * 1e3, 2), "p99": round(p99 * 1e3, 2)}


def measure(requests: int, writes: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="bench-run-page-"))
    home = LedgerHome(folder / "home", f"sqlite:///{folder / 'ledger.db'}")
    ledger, seed = build_demo(home)
    attester = SigningKey.load(home.path / "keys" / "demo-attester.pem")
    run = ledger.run(seed)
    assert run is not None
    statements = Statements()
    config = ServerConfig(key_rate=0, address_rate=0, json_logs=True)
    walls: list[float] = []
    cpus: list[float] = []
    warm_counts: list[Counter[str]] = []
    after_counts: list[Counter[str]] = []
    after_walls: list[float] = []
    with TestClient(create_app(ledger, config)) as client:
        path = f"/runs/{seed}"
        assert client.get(path).status_code == 200
        for _ in range(requests):
            with statements.counted() as seen:
                wall, cpu = time.perf_counter(), time.process_time()
                reply = client.get(path)
                cpus.append(time.process_time() - cpu)
                walls.append(time.perf_counter() - wall)
            assert reply.status_code == 200
            warm_counts.append(Counter(seen))
        for number in range(writes):
            ledger.append(
                attestation_envelope(
                    seed, run.run_name, attester, type_="note", body=f"run page bench {number}"
                )
            )
            with statements.counted() as seen:
                wall = time.perf_counter()
                reply = client.get(path)
                after_walls.append(time.perf_counter() - wall)
            assert reply.status_code == 200
            after_counts.append(Counter(seen))
    ledger.close()

    def typical(counts: list[Counter[str]]) -> dict[str, int]:
        totals = [sum(c.values()) for c in counts]
        middle = counts[totals.index(sorted(totals)[len(totals) // 2])]
        return dict(sorted(middle.items()))

    return {
        "requests": requests,
        "writes": writes,
        "warm": {
            "statements": typical(warm_counts),
            "wall_ms": _quantiles(walls),
            "process_cpu_ms": _quantiles(cpus),
        },
        "after_a_write": {
            "statements": typical(after_counts),
            "wall_ms": _quantiles(after_walls),
        },
        "load_average": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--writes", type=int, default=30)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    result = measure(args.requests, args.writes)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", "utf-8")


if __name__ == "__main__":
    main()
