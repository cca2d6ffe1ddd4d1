"""A cheap read stays fast while clients loop on the most expensive anonymous read (issue 32).

``kernelindex serve`` (one worker, the default limits as deployed) on a ledger holding the
KernelIndex catalog (7,857 runs, imported with ``kernelindex import kernelindex-catalog``;
``--quick``: 300 of its runs). A quiet client (its own loopback address) reads one run record
(``GET /v1/runs/RUN``, ~10 ms) over and over:

1. ``quiet``: alone;
2. ``loop``: while six clients, each from its own address, loop on ``/feeds/records.atom``,
   the most expensive anonymous read (~0.7 s of CPU computed, on the catalog);
3. ``bust``: while six clients loop on the feed with a different ``limit`` each request, so
   that an answer seldom comes from the read cache: each is a new, expensive answer, charged
   the feed's cost to the client's address, and computed in one of the server's few
   compute slots (``compute_slots``; the rest wait, 503 past ``compute_wait``).
   Refused (429), a client waits its Retry-After (one that does not is a plain request flood,
   which the per-address limit is for).

Target: the run read's p99 under load ≤ 3 × its quiet p99, in each loaded phase. Beside each
phase's wall times, the server's CPU (its processes' user + system time, per request served)
and, measured in this process on one thread, the thread-CPU and wall time of one feed and one
run record computed without any cache: what a request would cost without the cache.

    python -m benchmarks --only readcost
    python -m benchmarks.bench_read_cost [--quick] [--seconds S] [--rebuild]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console

from benchmarks.bench_cli import CATALOG, QUICK_RUNS, _source
from benchmarks.http.cpu import descendants, process_cpu
from benchmarks.suite import Context, FigureResult, Row, at_most, latency_ms

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
TARGET = 3.0
LOOPERS = 6
FEED = "/feeds/records.atom"
QUIET_ADDRESS = "127.0.0.2"


def _env(home: Path) -> dict[str, str]:
    return os.environ | {
        "KERNELINDEX_HOME": str(home / "home"),
        "KERNELINDEX_DB": f"sqlite:///{home / 'ledger.db'}",
    }


def _kernelindex() -> list[str]:
    return [str(Path(sys.executable).with_name("kernelindex"))]


def ledger_home(quick: bool, rebuild: bool, console: Console) -> Path:
    """The catalog imported into a SQLite home under ``.cache/`` (made once, kept)."""
    home = CACHE / ("read-cost-quick" if quick else "read-cost")
    if (home / "ready").exists() and not rebuild:
        return home
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    source = _source(quick, home) if quick else CATALOG
    console.log(f"importing {source.name} into {home} (once; --rebuild to redo)")
    for args in (["init"], ["import", "kernelindex-catalog", str(source)]):
        command = [*_kernelindex(), *args]
        subprocess.run(command, env=_env(home), check=True, capture_output=True)  # noqa: S603
    (home / "ready").write_text("")
    return home


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served(home: Path) -> Iterator[tuple[str, int]]:
    """``kernelindex serve`` on ``home``: (base URL, pid) until /health answers; stopped
    after."""
    port = _free_port()
    log = (home / "serve.log").open("wb")
    process = subprocess.Popen(  # noqa: S603 - our own CLI, arguments we chose
        [*_kernelindex(), "serve", "--port", str(port), "--workers", "1"],
        env=_env(home),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"serve did not start: {(home / 'serve.log').read_text()}")
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        yield base, process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def _client(base: str, address: str) -> httpx.Client:
    return httpx.Client(
        base_url=base, timeout=60, transport=httpx.HTTPTransport(local_address=address)
    )


def _references(base: str) -> str:
    with httpx.Client(base_url=base, timeout=60) as c:
        return str(c.get("/v1/runs", params={"limit": 1}).json()["items"][0]["digest"])


class Loopers:
    """Six clients, each from its own address, sending one request after another."""

    def __init__(self, base: str, bust: bool) -> None:
        self.base, self.bust = base, bust
        self.statuses: Counter[int] = Counter()
        self.feed_walls: list[float] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._loop, args=(f"127.0.0.{3 + i}", i), daemon=True)
            for i in range(LOOPERS)
        ]

    def _loop(self, address: str, index: int) -> None:
        sent = 0
        with _client(self.base, address) as c:
            while not self._stop.is_set():
                sent += 1
                params = {"limit": str(1 + (index * 17 + sent) % 100)} if self.bust else {}
                started = time.perf_counter()
                reply = c.get(FEED, params=params)
                with self._lock:
                    self.statuses[reply.status_code] += 1
                    if reply.status_code == 200:
                        self.feed_walls.append(time.perf_counter() - started)
                if reply.status_code in (429, 503):  # as a client should (else: a flood)
                    self._stop.wait(float(reply.headers.get("retry-after", "1")))

    def __enter__(self) -> Loopers:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=120)


def _loop_process(base: str, bust: bool, stop: Any, results: Any) -> None:
    """The six loops, until ``stop``; then their statuses and feed wall times to ``results``."""
    with Loopers(base, bust) as loopers:
        stop.wait()
    results.put((dict(loopers.statuses), loopers.feed_walls))


def cheap_reads(base: str, run: str, seconds: float) -> list[float]:
    """Run-record reads one after another for ``seconds``: their wall times."""
    samples: list[float] = []
    with _client(base, QUIET_ADDRESS) as c:
        for _ in range(3):
            assert c.get(f"/v1/runs/{run}").status_code == 200  # warm
        stop = time.monotonic() + seconds
        while time.monotonic() < stop:
            started = time.perf_counter()
            reply = c.get(f"/v1/runs/{run}")
            samples.append(time.perf_counter() - started)
            assert reply.status_code == 200, reply.text[:300]
    return samples


def _server_cpu(pid: int) -> float:
    return sum(process_cpu([pid, *descendants(pid)]).values())


def phase(base: str, pid: int, run: str, seconds: float, loop: str | None) -> dict[str, Any]:
    cpu0 = _server_cpu(pid)
    if loop is None:
        samples = cheap_reads(base, run, seconds)
        statuses: Counter[int] = Counter()
        feed_walls: list[float] = []
    else:
        # The loops run in a process of their own: in this one, their threads would hold up
        # the quiet client's (one GIL), which is not the server's doing.
        context = multiprocessing.get_context("spawn")
        stop, results = context.Event(), context.Queue()
        child = context.Process(target=_loop_process, args=(base, loop == "bust", stop, results))
        child.start()
        time.sleep(2.0)  # the loops under way (and the feed computed once, when cached)
        samples = cheap_reads(base, run, seconds)
        stop.set()
        counted, feed_walls = results.get(timeout=180)
        child.join(timeout=60)
        statuses = Counter({int(k): v for k, v in counted.items()})
    server_s = _server_cpu(pid) - cpu0
    served = len(samples) + sum(statuses.values())
    return {
        "cheapRead": latency_ms(samples),
        "cheapReads": len(samples),
        "feedStatuses": {str(k): v for k, v in sorted(statuses.items())},
        "feed200": latency_ms(feed_walls),
        "serverCpuS": round(server_s, 3),
        "serverCpuMsPerRequest": round(server_s / served * 1000, 3) if served else None,
    }


def uncached_costs(home: Path, run: str) -> dict[str, Any]:
    """Thread-CPU and wall of one feed and one run record computed in this process, no
    cache (the views already current): best of 3 each."""
    from api.server.pages.feeds import feed_of  # noqa: PLC0415
    from api.service.ledger_service import LedgerService  # noqa: PLC0415
    from ledger.home import LedgerHome  # noqa: PLC0415

    ledger = LedgerHome.at(home / "home", f"sqlite:///{home / 'ledger.db'}").open(read_only=True)
    service = LedgerService(ledger)

    def timed(work: Any) -> dict[str, float]:
        best = {"wallMs": float("inf"), "threadCpuMs": float("inf")}
        for _ in range(3):
            wall0, cpu0 = time.perf_counter(), time.thread_time()
            work()
            best["wallMs"] = min(best["wallMs"], (time.perf_counter() - wall0) * 1000)
            best["threadCpuMs"] = min(best["threadCpuMs"], (time.thread_time() - cpu0) * 1000)
        return {k: round(v, 2) for k, v in best.items()}

    try:
        return {
            "feed": timed(lambda: feed_of(service, "")),
            "runRecord": timed(lambda: service.runs.record(run)),
        }
    finally:
        ledger.close()


def measure(quick: bool, seconds: float, rebuild: bool, console: Console) -> dict[str, Any]:
    home = ledger_home(quick, rebuild, console)
    out: dict[str, Any] = {
        "ledger": f"catalog, {QUICK_RUNS if quick else 7857} runs",
        "seconds": seconds,
        "loopers": LOOPERS,
    }
    with served(home) as (base, pid):
        run = _references(base)
        for name in ("quiet", "loop", "bust"):
            out[name] = phase(base, pid, run, seconds, None if name == "quiet" else name)
            console.log(
                f"{name}: run record p50 {out[name]['cheapRead']['p50']:.1f} ms, p99 "
                f"{out[name]['cheapRead']['p99']:.1f} ms; feed replies "
                f"{out[name]['feedStatuses'] or '-'}; server CPU "
                f"{out[name]['serverCpuMsPerRequest']} ms per request"
            )
    out["uncached"] = uncached_costs(home, run)
    console.log(f"computed without a cache: {out['uncached']}")
    quiet = out["quiet"]["cheapRead"]["p99"]
    for name in ("loop", "bust"):
        out[name]["p99Ratio"] = round(out[name]["cheapRead"]["p99"] / quiet, 3)
    return out


def figure(ctx: Context) -> FigureResult:
    seconds = 8.0 if ctx.quick else 30.0
    ctx.step(f"a run record read, quiet and with {LOOPERS} clients looping on the feed")
    m = measure(ctx.quick, seconds, False, ctx.console)
    quiet = m["quiet"]["cheapRead"]
    rows = [
        Row(
            "readcost",
            "run record p99 ms, quiet",
            f"{quiet['p99']:.1f}",
            f"p50 {quiet['p50']:.1f}; server CPU {m['quiet']['serverCpuMsPerRequest']} ms/req",
        )
    ]
    for name, what in (
        ("loop", f"{LOOPERS} clients looping on the feed"),
        ("bust", f"{LOOPERS} clients looping on new feed answers"),
    ):
        loaded = m[name]
        rows.append(
            Row(
                "readcost",
                f"run record p99 ms, {what}",
                f"{loaded['cheapRead']['p99']:.1f}",
                f"quiet {quiet['p99']:.1f}; feed replies {loaded['feedStatuses']}",
                loaded["p99Ratio"],
                f"≤ {TARGET:g}×",
                *at_most(loaded["p99Ratio"], TARGET),
            )
        )
    unc = m["uncached"]
    rows.append(
        Row(
            "readcost",
            "  computed without a cache, ms: feed / run record",
            f"{unc['feed']['wallMs']:.0f} / {unc['runRecord']['wallMs']:.1f}",
            f"thread CPU {unc['feed']['threadCpuMs']:.0f} / {unc['runRecord']['threadCpuMs']:.1f}",
        )
    )
    why = (
        "the feed is computed once per views position and the address limit charges a new "
        "expensive answer its route's cost: what is left competing is the loops' cheap "
        "requests (cache hits, 429s) and the GIL of the one worker"
    )
    return FigureResult("readcost", "cheap reads under expensive loops", rows, m, why=why)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_RUNS} runs of the catalog")
    parser.add_argument("--seconds", type=float, default=30.0, help="of reads per phase")
    parser.add_argument("--rebuild", action="store_true", help="import the catalog again")
    parser.add_argument("--out", type=Path, help="write the measurements here (JSON)")
    args = parser.parse_args(argv)
    console = Console()
    m = measure(args.quick, args.seconds, args.rebuild, console)
    if args.out is not None:
        args.out.write_text(json.dumps(m, indent=2) + "\n")
    for name in ("loop", "bust"):
        verdict = "pass" if m[name]["p99Ratio"] <= TARGET else "MISS"
        console.print(f"{name}: p99 × quiet = {m[name]['p99Ratio']:.2f} (≤ {TARGET:g}: {verdict})")


if __name__ == "__main__":
    main()
