"""Witnessed checkpoints: how soon a write's checkpoint is cosigned, and what asking costs.

Three of our witnesses (``kernelindex witness serve``) run as processes of their own on
loopback; a fresh ledger home names them (quorum 2 of 3). Measured:

- **append → 2-of-3 cosigned**: one ingestion at a time through ``Ledger.append``; from the
  call to the moment two witnesses' cosignatures of a checkpoint that includes it are stored
  (``Witnessing.wait_for``), p50 and p99. The receipt itself is returned before that, and
  its time is shown too.
- **writes/s with witnessing on and off**: the same number of ingestions through the group
  commit writer (``--clients`` threads at once), each mode on a fresh home, the modes taking
  turns (medians of ``--repeats``); the ledger process's CPU per write (the witnesses' own
  processes not counted); and, with witnessing on, how long after the last receipt the
  quorum had cosigned the final tree.

Anchors (issue 35): Tessera publishes a checkpoint only once its witness policy is met;
Rekor v2 asks clients to wait up to 20 s for a cosigned checkpoint; Sunlight sequences (and
so asks its witnesses) once a second.

    python -m benchmarks.bench_witness                     # 200 sequential, 2,000 at once
    python -m benchmarks.bench_witness --sequential 50 --writes 300 --json out.json
    python -m benchmarks.bench_witness --min-interval 0   # a round at every commit
    python -m benchmarks.bench_witness --postgres postgresql+psycopg://postgres@127.0.0.1:5432/postgres

``--postgres SERVER_URL``: each home on a fresh PostgreSQL database of that server (created,
and dropped at the end) instead of a SQLite file; the witnessing round then also takes the
log's round lock (one asker across processes, ``ledger.witnessing``).

Envelopes are signed before any clock starts. On a shared 2-core machine every process
(the writer, its client threads, three witnesses) competes for the same cores: the figures
are upper bounds of what a deployment with the witnesses elsewhere would see.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from benchmarks.bench_ingest import signed_ingestions
from ledger.group_commit import GroupCommitWriter
from ledger.home import LedgerHome
from ledger.signing.keys import SigningKey
from ledger.witness.cosignature import CosignerKey
from ledger.witnessing import DEFAULT_MIN_INTERVAL_S

REPO = Path(__file__).resolve().parents[1]
WITNESS = [sys.executable, "-m", "api.cli.witness", "witness", "serve"]
QUORUM = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


@contextmanager
def witness_processes(
    folder: Path, trust_root: Path, keys: list[tuple[str, Path, int]]
) -> Iterator[None]:
    """Our witnesses as processes, following the home's log, until the block ends."""
    with ExitStack() as stack:
        for name, key, port in keys:
            log = (folder / f"{name}.log").open("w")
            stack.enter_context(log)
            process = subprocess.Popen(  # noqa: S603 - our own command, our arguments
                [
                    *WITNESS,
                    "--name",
                    name,
                    "--key",
                    str(key),
                    "--port",
                    str(port),
                    "--follow-trust-root",
                    str(trust_root),
                    "--state",
                    str(folder / name),
                ],
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            stack.callback(process.wait, 30)
            stack.callback(process.terminate)
            deadline = time.monotonic() + 60
            while True:
                try:
                    httpx.get(f"http://127.0.0.1:{port}/")
                    break
                except httpx.TransportError:
                    if time.monotonic() > deadline or process.poll() is not None:
                        raise RuntimeError(f"witness {name} did not start") from None
                    time.sleep(0.05)
        yield


def make_home(
    folder: Path, witnesses: list[tuple[str, Path, int]], database: Callable[[Path], str]
) -> LedgerHome:
    """A fresh home on a database of its own, naming the witnesses (quorum 2 of 3)."""
    home = LedgerHome.at(folder / "home", database(folder))
    named = []
    for name, key, port in witnesses:
        vkey = CosignerKey.from_private_key(name, SigningKey.load(key).private_key()).key_string()
        named.append((vkey, f"http://127.0.0.1:{port}"))
    home.initialise(witnesses=named, quorum=QUORUM).close()
    return home


def sqlite_file(folder: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'ledger.db'}"


@contextmanager
def postgres_databases(server: str) -> Iterator[Callable[[Path], str]]:
    """Fresh databases on a PostgreSQL server, one per home asked for; dropped at the end."""
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    made: list[str] = []

    def database(folder: Path) -> str:
        name = f"bench_witness_{uuid.uuid4().hex[:12]}"
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        made.append(name)
        return make_url(server).set(database=name).render_as_string(hide_password=False)

    try:
        yield database
    finally:
        with admin.connect() as conn:
            for name in made:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def ms(values: list[float], p: float) -> float:
    return round(percentile(values, p) * 1000, 2)


def sequential(home: LedgerHome, count: int, min_interval: float) -> dict[str, Any]:
    """One write at a time: receipt time, and append → quorum-cosigned time."""
    envelopes = signed_ingestions(home.key("ingester"), count)
    ledger = home.open(witnessing=True, min_interval=min_interval)
    witnessing = ledger.witnessing
    assert witnessing is not None
    receipts: list[float] = []
    cosigned: list[float] = []
    try:
        for envelope in envelopes:
            start = time.perf_counter()
            receipt = ledger.append(envelope)
            receipts.append(time.perf_counter() - start)
            assert receipt.inclusion is not None
            if not witnessing.wait_for(receipt.inclusion.tree_size, QUORUM, 60):
                raise RuntimeError("no quorum within 60 s")
            cosigned.append(time.perf_counter() - start)
    finally:
        ledger.close()
    return {
        "writes": count,
        "receiptP50Ms": ms(receipts, 50),
        "receiptP99Ms": ms(receipts, 99),
        "cosignedP50Ms": ms(cosigned, 50),
        "cosignedP99Ms": ms(cosigned, 99),
        "cosignedMeanMs": round(statistics.mean(cosigned) * 1000, 2),
    }


def concurrent(
    home: LedgerHome, count: int, clients: int, witnessing: bool, min_interval: float
) -> dict[str, Any]:
    """``count`` ingestions from ``clients`` threads through the group commit writer."""
    envelopes = signed_ingestions(home.key("ingester"), count)
    ledger = home.open(witnessing=witnessing, min_interval=min_interval)
    writer = GroupCommitWriter(ledger)
    lock = threading.Lock()
    pending = list(reversed(envelopes))

    def client() -> None:
        while True:
            with lock:
                if not pending:
                    return
                envelope = pending.pop()
            writer.append(envelope)

    try:
        threads = [threading.Thread(target=client) for _ in range(clients)]
        start, cpu = time.perf_counter(), time.process_time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - start
        # This process's CPU (writer, clients, witnessing thread; not the witnesses').
        cpu_ms = (time.process_time() - cpu) * 1000 / count
        found: dict[str, Any] = {
            "writes": count,
            "clients": clients,
            "writesPerS": round(count / elapsed, 1),
            "ledgerCpuMsPerWrite": round(cpu_ms, 3),
        }
        if ledger.witnessing is not None:
            size = ledger.tlog.checkpoint().size
            after = time.perf_counter()
            met = ledger.witnessing.wait_for(size, QUORUM, 120)
            found["finalCosignedAfterMs"] = (
                round((time.perf_counter() - after) * 1000, 1) if met else None
            )
    finally:
        writer.close()
        ledger.close()
    return found


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequential", type=int, default=200, help="writes timed one by one")
    parser.add_argument("--writes", type=int, default=2000, help="writes per throughput mode")
    parser.add_argument("--clients", type=int, default=16, help="threads writing at once")
    parser.add_argument("--repeats", type=int, default=3, help="throughput runs per mode")
    parser.add_argument(
        "--min-interval",
        type=float,
        default=DEFAULT_MIN_INTERVAL_S,
        help="seconds between the starts of background rounds (Witnessing's min_interval)",
    )
    parser.add_argument(
        "--postgres", metavar="SERVER_URL", help="each home on a fresh database of this server"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {
        "machine": {"python": sys.version.split()[0], "cpus": os.cpu_count()},
        "database": "postgresql" if args.postgres else "sqlite",
        "minIntervalS": args.min_interval,
    }
    with ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-witness-"))
        database = (
            stack.enter_context(postgres_databases(args.postgres)) if args.postgres else sqlite_file
        )
        folder = Path(tmp)
        keys = []
        for i in range(3):
            key = folder / f"w{i}.pem"
            SigningKey.generate().save(key)
            keys.append((f"w{i}.bench", key, free_port()))
        home = make_home(folder / "sequential", keys, database)
        with witness_processes(folder / "sequential", home.trust_root_path, keys):
            results["appendToQuorum"] = sequential(home, args.sequential, args.min_interval)
        # The modes take turns, each on a fresh home, so a burst of other work on the
        # machine weighs on both; the figure is each mode's median.
        runs: dict[str, list[dict[str, Any]]] = {"on": [], "off": []}
        for turn in range(args.repeats):
            for mode in ("on", "off") if turn % 2 == 0 else ("off", "on"):
                run = folder / f"{mode}-{turn}"
                home = make_home(run, keys, database)
                with witness_processes(run, home.trust_root_path, keys):
                    measured = concurrent(
                        home, args.writes, args.clients, mode == "on", args.min_interval
                    )
                    runs[mode].append(measured)
    for mode, found in runs.items():
        results[f"witnessing{mode.title()}"] = {
            "writes": args.writes,
            "clients": args.clients,
            "writesPerS": statistics.median(r["writesPerS"] for r in found),
            "ledgerCpuMsPerWrite": statistics.median(r["ledgerCpuMsPerWrite"] for r in found),
            "runs": found,
        }
    on, off = results["witnessingOn"]["writesPerS"], results["witnessingOff"]["writesPerS"]
    results["throughputRatio"] = round(on / off, 3)
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
