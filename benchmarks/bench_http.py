"""HTTP write benchmark (docs/design.md §13): signed attestation appends from concurrent clients.

Target: ≥ 1,000 appends/s from 32 clients on loopback, p99 ≤ 50 ms, every reply carrying an
inclusion proof. Measured in one run, per backend (SQLite file; PostgreSQL with 1 and with 4
uvicorn workers):

(a) the real server in its own process (``serve-child``: ``create_app`` with rate limits off,
    under uvicorn), a fresh ledger of ``--runs`` ingested runs and one self-enrolled attester
    key per client; every attestation envelope is signed before the clock starts, so the
    clients measure the server, not their own signing. Each client keeps one keep-alive
    connection and sends its next append as soon as the previous one is answered (closed
    loop). Reported: appends/s (201s / wall time), latency p50/p90/p99/max, every non-201
    reply by status and problem type;
(b) afterwards, with the server stopped, every acknowledged append is checked against the
    database: the event at the receipt's position is the envelope sent; its inclusion proof
    verifies; the root it names is the root of the log recomputed from the stored events
    at that size; and the log is dense (tree size == events == leaves);
(c) anchors measured in the same run: a bare Litestar echo endpoint under the same uvicorn
    and clients (the HTTP stack's ceiling on this machine); ``Ledger.append`` in a loop and
    ``Ledger.append_many`` in groups of 32, single thread, no HTTP (the ledger's own
    ceilings, one envelope per commit and group commit);
(d) where the server's time goes: the serve-child times each stage of a write with wrappers
    installed in its own process: in the request threads (before the handler, edge checks,
    waiting for the group-commit writer, after), and in the writer thread per group (key
    check, envelope parse, aggregate loads, Ed25519, INSERT, sequencing, inclusion proofs,
    COMMIT, group sizes); the parent reads the CPU time of the server, the clients, the
    PostgreSQL backends and the whole machine (other work on a shared machine included).

Prints the tables and writes ``benchmarks/results/http-<date>.json``.

    python -m benchmarks.bench_http                          # SQLite, 32 clients, 3,000 appends
    python -m benchmarks.bench_http --backend both           # + PostgreSQL, 1 and 4 workers
    python -m benchmarks.bench_http --quick                  # 320 appends, smaller anchors

Ledger homes live under ``benchmarks/.cache/http/`` while a scenario runs and are removed
after it; PostgreSQL databases are created uniquely named on ``--pg`` and dropped after.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import math
import os
import platform
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from api.cli.serve import DEFAULT_WORKERS
from benchmarks import steadiness
from benchmarks.bench_verify import Work, ed25519_rates
from benchmarks.http.config import (
    CACHE,
    DEFAULT_PG,
    PROFILE_VAR,
    RESULTS,
    TARGET_ECHO_RATIO,
    TARGET_P99_MS,
    THREAD_CPU_ONLY_VAR,
    console,
)
from benchmarks.http.profiling import summary
from benchmarks.http.report import judge, print_report
from benchmarks.http.scenarios import (
    Settings,
    echo_round,
    echo_summary,
    pg_database,
    run_echo,
    run_scenario,
)
from benchmarks.http.server import child_main
from benchmarks.suite import Context, FigureResult, Row, at_least, at_most

# ------------------------------------------------------------------------ suite figure

# The suite's load: this module's default. With 1,000 the timed phase lasted ~1 s and the
# echo's ~0.4 s, so one 50 ms scheduling stall moved the ratio by a tenth (session 2's
# medians ranged 0.34-0.59); 3,000 appends and the echo measured before and after the API
# and pooled (``echo_summary``) keep the figure's definition with three times the requests.
SUITE_APPENDS = 3_000
SUITE_QUICK_APPENDS = 320  # as --quick: 10 per client
ANCHOR_SECONDS = 1.0  # the one-core Ed25519 anchor's each reading, before and after


def ed25519_work(count: int = 200) -> Work:
    """Signatures to time the one-core Ed25519 anchor on: only its drift is used (after ÷
    before, same work), so synthetic 1 KiB messages, about an attestation's PAE, will do."""
    key = Ed25519PrivateKey.generate()
    messages = [n.to_bytes(4, "big") * 256 for n in range(count)]
    return [(key.public_key(), key.sign(m), m) for m in messages]


def figure(ctx: Context) -> FigureResult:
    """``python -m benchmarks``' HTTP figure: SQLite, 32 clients, ``SUITE_APPENDS`` timed
    appends (``--quick``: 320), the echo anchor and the in-process anchors, as ``main``
    runs them, in a session folder removed afterwards."""
    global console  # noqa: PLW0603 - the suite's console, so output stays above its progress
    quick = ctx.quick
    settings = Settings(
        clients=32,
        appends=SUITE_QUICK_APPENDS if quick else SUITE_APPENDS,
        runs=32,
        warmup=1,
        in_process=100 if quick else 200,
        client_kind="raw",
        timings=True,
        profile=False,
        groups=[32],
        switch_interval=None,
        threads=None,
        keep=False,
    )
    saved, console = console, ctx.console
    CACHE.mkdir(parents=True, exist_ok=True)
    session = CACHE / f"suite-{uuid.uuid4().hex[:8]}"
    session.mkdir()
    try:
        # The machine's own speed, on one core's thread-CPU, before and after everything
        # timed: the echo's rounds weigh contention; this, the host slowing as a whole.
        ctx.step("anchor: bare Ed25519, one core, thread-CPU")
        signatures = ed25519_work()
        ed25519_before = ed25519_rates(signatures, ANCHOR_SECONDS)
        ctx.step("echo anchor, round 1 of 2: bare Litestar handler, same clients and bodies")
        echo_rounds = [echo_round(settings, session / "echo-1")]
        workers = DEFAULT_WORKERS  # the layout `kernelindex serve` runs by default
        ctx.step(
            f"API on SQLite as served: {workers} uvicorn worker(s) + the writer process, "
            f"{settings.clients} clients x {settings.appends} appends"
        )
        work = session / f"sqlite-{workers}"
        work.mkdir()
        url = f"sqlite:///{work / 'home' / 'ledger.db'}"
        with _thread_cpu_into(session / "thread-cpu"):
            scenario = run_scenario("sqlite", url, workers, settings, work)
        served = scenario["http"]["acknowledged"] + settings.warmup * settings.clients
        scenario["serverThreadCpu"] = summary(session / "thread-cpu", served)
        # The echo again after the API: a machine that drifts (other work starting or
        # ending) weighs on the anchor as it did on both sides of the API's phase.
        ctx.step("echo anchor, round 2 of 2: the same clients and bodies, after the API")
        echo_rounds.append(echo_round(settings, session / "echo-2"))
        echo = echo_summary(echo_rounds)
        ctx.step("anchor again: bare Ed25519, one core, thread-CPU")
        ed25519_after = ed25519_rates(signatures, ANCHOR_SECONDS)
    finally:
        console = saved
        shutil.rmtree(session, ignore_errors=True)
    judged = judge(scenario, echo)
    scenario["judged"] = judged
    http, ver, inproc = scenario["http"], scenario["verification"], scenario["inProcess"]
    rate, p99 = http["perSecond"], http["latencyMs"].get("p99", math.nan)
    ok_rate, rate_to = at_least(rate / echo["perSecond"], TARGET_ECHO_RATIO)
    ok_p99, p99_to = at_most(p99, TARGET_P99_MS)
    best_group = max((g["appendsPerSecond"] for g in inproc.get("groups") or []), default=0.0)
    # Both timed rows stand on the echo's rounds and on the machine's speed around them.
    rounds = echo["rounds"]
    drifts = {
        "echo": steadiness.drift(rounds[0], rounds[-1]) if len(rounds) > 1 else None,
        "ed25519ThreadCpu": steadiness.drift(ed25519_before["cpu"], ed25519_after["cpu"]),
    }
    anchors = {
        "ed25519PerThreadCpuSecond": round(ed25519_before["cpu"], 1),
        "ed25519AfterPerThreadCpuSecond": round(ed25519_after["cpu"], 1),
        "drift": drifts,
    }
    timed = [
        Row(
            "http",
            f"attestation appends/s over HTTP, {settings.clients} clients, SQLite "
            f"({workers} worker{'s' if workers > 1 else ''} + writer, as served)",
            f"{rate:,.0f}/s",
            f"echo {echo['perSecond']:,.0f}/s",
            judged["ratios"]["httpToEcho"],
            f"ratio ≥ {TARGET_ECHO_RATIO}",
            ok_rate,
            rate_to,
        ),
        Row(
            "http",
            "  latency p99 (p50) ms",
            f"{p99:,.1f} ({http['latencyMs'].get('p50', math.nan):,.1f})",
            f"echo {echo['latencyMs']['p99']:,.1f}",
            judged["ratios"]["p99ToEchoP99"],
            f"≤ {TARGET_P99_MS:.0f} ms",
            ok_p99,
            p99_to,
        ),
    ]
    rows = [
        *(steadiness.judge(row, drifts) for row in timed),
        Row(
            "http",
            "  inclusion proof in every 201, verified; none lost, log dense",
            f"{ver['proofsVerified']}/{ver['acknowledged']}",
            "",
            None,
            "every reply",
            judged["pass"]["inclusionProofInEveryReply"] and judged["pass"]["noneLostLogDense"],
        ),
        Row(
            "http",
            "  in-process anchors: Ledger.append / append_many(32), no HTTP",
            f"{rate:,.0f}/s",
            f"{inproc['appendsPerSecond']:,.0f} / {best_group:,.0f}/s",
            judged["ratios"]["httpToInProcessGroups"],
        ),
    ]
    writer = next((r for r in scenario["breakdownMs"] if "writerBusy" in r), None)
    why = (
        f"the echo anchor itself does {echo['perSecond']:,.0f}/s at p99 "
        f"{echo['latencyMs']['p99']:,.0f} ms here (2 cores shared by clients and server; "
        f"rounds before and after the API: {', '.join(f'{r:,.0f}' for r in echo['rounds'])}/s)"
    )
    if writer is not None:
        why += (
            f"; the group-commit writer is busy {writer['writerBusy']:.0%} at "
            f"{writer['ms']:.1f} ms per append (groups of {writer['meanGroup']} on average)"
        )
    why += _where_the_cpu_went(scenario, echo)
    return FigureResult(
        "http",
        f"attestation appends over HTTP ({settings.appends} timed appends, 32 clients)",
        rows,
        {
            "config": dataclasses.asdict(settings),
            "echo": echo,
            "anchors": anchors,
            "scenario": scenario,
        },
        why=why,
    )


@contextlib.contextmanager
def _thread_cpu_into(folder: Path) -> Iterator[None]:
    """The serve-child started inside notes its threads' CPU and its writer's groups into
    ``folder`` (``--thread-cpu``: /proc reads at start and end, two clock reads a group, the
    writer's files written by a thread of its own every half second; no profiler), so the
    suite's own run says which party sets the rate."""
    folder.mkdir(parents=True)
    saved = {k: os.environ.get(k) for k in (PROFILE_VAR, THREAD_CPU_ONLY_VAR)}
    os.environ[PROFILE_VAR], os.environ[THREAD_CPU_ONLY_VAR] = str(folder.resolve()), "1"
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _where_the_cpu_went(scenario: dict[str, Any], echo: dict[str, Any]) -> str:
    """CPU ms per append of each party against the echo's per request, and how busy the
    two cores were: a party near one core sets the rate; a machine short of busy is idle
    waiting (the writer's commit wall beyond its CPU is its sync and its waits)."""
    http, threads = scenario["http"]["cpu"], scenario.get("serverThreadCpu") or {}
    text = (
        f"; CPU ms per append: server {http['serverMsPerRequest']}, clients "
        f"{http['clientMsPerRequest']} (echo: {echo['cpu']['serverMsPerRequest']}, "
        f"{echo['cpu']['clientMsPerRequest']}); cores busy {http['machineBusy']:.0%} "
        f"(echo {echo['cpu']['machineBusy']:.0%})"
    )
    for worker in threads.get("workers", []):
        main_thread = next((v for k, v in worker.items() if k.startswith("MainThread")), None)
        text += f"; worker {worker.get('process')} (event loop {main_thread})"
    for writer in threads.get("writers", []):
        cpu = writer["cpuMsPerRequest"]
        text += (
            f"; writer {cpu.get('process')} (commit_group wall {cpu.get('commitGroupWall')}, "
            f"CPU {cpu.get('commitGroupCpu')}; groups of {writer['meanGroup']})"
        )
    return text


def machine() -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor(),
        "loadAverageBefore": round(os.getloadavg()[0], 2),
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--appends", type=int, help="timed appends per scenario (3,000)")
    parser.add_argument("--runs", type=int, help="runs the attestations spread over (=clients)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed appends per client")
    parser.add_argument("--in-process", type=int, help="appends of the in-process anchor (500)")
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="sqlite")
    parser.add_argument("--pg", default=DEFAULT_PG, help="PostgreSQL admin URL")
    parser.add_argument("--pg-workers", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--client", choices=("raw", "httpx"), default="raw")
    parser.add_argument("--quick", action="store_true", help="320 appends, 100 in-process")
    parser.add_argument("--no-timings", action="store_true", help="no stage timings in server")
    parser.add_argument("--profile", action="store_true", help="cProfile in-process appends")
    parser.add_argument(
        "--groups",
        type=int,
        nargs="*",
        default=[32],
        metavar="SIZE",
        help="in-process Ledger.append_many anchor group sizes (32; none: skip)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the ledger homes and logs")
    parser.add_argument("--no-echo", action="store_true", help="skip the echo anchor")
    parser.add_argument(
        "--threads",
        type=int,
        help="experiment: the server's handler thread pool (default min(32, cores + 4))",
    )
    parser.add_argument(
        "--switch-interval",
        type=float,
        help="experiment: sys.setswitchinterval(S) in the server (CPython default 0.005)",
    )
    parser.add_argument(
        "--writer",
        choices=("process", "thread"),
        default="process",
        help="SQLite: the ledger's writer process, as `kernelindex serve` runs it (default), "
        "or a writer thread in the HTTP process (the layout before issue 16)",
    )
    parser.add_argument(
        "--sqlite-workers",
        type=int,
        nargs="+",
        default=[DEFAULT_WORKERS],
        help="SQLite: HTTP worker processes in front of the writer process (default: as "
        "`kernelindex serve` runs, 1)",
    )
    parser.add_argument(
        "--profile-server",
        type=Path,
        metavar="DIR",
        help="cProfile (thread-CPU time) of the server's worker, views folder and writer, "
        "every thread's CPU and the writer's group sizes, into DIR (benchmarks/http/profiling.py)",
    )
    parser.add_argument(
        "--thread-cpu",
        type=Path,
        metavar="DIR",
        help="as --profile-server without the profilers: threads' CPU and group sizes only",
    )
    parser.add_argument("--out", type=Path, help="results file (default results/http-DATE.json)")
    return parser


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("serve-child", "echo-child"):
        child_main(argv)
        return {}
    args = _parser().parse_args(argv)
    profile_dir = args.profile_server or args.thread_cpu
    if profile_dir is not None:
        # The serve-child and its writer process inherit the environment.
        profile_dir.mkdir(parents=True, exist_ok=True)
        if any(profile_dir.iterdir()):  # its files are summed: another run's would count
            _parser().error(f"{profile_dir} is not empty")
        os.environ[PROFILE_VAR] = str(profile_dir.resolve())
        if args.profile_server is None:
            os.environ[THREAD_CPU_ONLY_VAR] = "1"
    settings = Settings(
        clients=args.clients,
        appends=args.appends or (10 * args.clients if args.quick else 3000),
        runs=args.runs or args.clients,
        warmup=args.warmup,
        in_process=args.in_process or (100 if args.quick else 500),
        client_kind=args.client,
        timings=not args.no_timings,
        profile=args.profile,
        groups=args.groups,
        switch_interval=args.switch_interval,
        threads=args.threads,
        keep=args.keep,
        writer=args.writer,
    )
    today = dt.date.today().isoformat()
    out = args.out or RESULTS / f"http-{today}{'-quick' if args.quick else ''}.json"

    scenarios: list[tuple[str, int]] = []
    if args.backend in ("sqlite", "both"):
        scenarios.extend(("sqlite", w) for w in args.sqlite_workers)
    if args.backend in ("postgres", "both"):
        scenarios.extend(("postgres", w) for w in args.pg_workers)
    result: dict[str, Any] = {
        "machine": machine(),
        "config": {
            "clients": settings.clients,
            "appendsPerScenario": settings.appends,
            "warmupPerClient": settings.warmup,
            "runs": settings.runs,
            "inProcessAppends": settings.in_process,
            "client": settings.client_kind,
            "server": "uvicorn (asyncio loop, h11), access log by the app to a file",
            "stageTimings": settings.timings,
            "serverSwitchInterval": settings.switch_interval,
            "serverHandlerThreads": settings.threads or min(32, (os.cpu_count() or 1) + 4),
        },
        "targets": {"ratioToEcho": TARGET_ECHO_RATIO, "p99Ms": TARGET_P99_MS},
    }
    CACHE.mkdir(parents=True, exist_ok=True)
    session = CACHE / f"run-{uuid.uuid4().hex[:8]}"
    session.mkdir()
    try:
        (session / "echo").mkdir()
        result["echo"] = None if args.no_echo else run_echo(settings, session / "echo")
        result["scenarios"] = []
        for backend, workers in scenarios:
            work = session / f"{backend}-{workers}"
            work.mkdir()
            if backend == "sqlite":
                url = f"sqlite:///{work / 'home' / 'ledger.db'}"
                result["scenarios"].append(run_scenario(backend, url, workers, settings, work))
            else:
                with pg_database(args.pg) as url:
                    result["scenarios"].append(run_scenario(backend, url, workers, settings, work))
    finally:
        if settings.keep:
            console.print(f"kept {session}")
        else:
            shutil.rmtree(session, ignore_errors=True)
    for scenario in result["scenarios"]:
        scenario["judged"] = judge(scenario, result["echo"])
    if profile_dir is not None and len(result["scenarios"]) == 1:  # one server's files
        served = result["scenarios"][0]["http"]["acknowledged"] + settings.warmup * args.clients
        result["serverThreadCpu"] = summary(profile_dir, served)
        console.print(f"server threads' CPU, ms per request: {result['serverThreadCpu']}")
    result["loadAverageAfter"] = round(os.getloadavg()[0], 2)
    result["command"] = "python -m benchmarks.bench_http " + " ".join(argv)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print_report(result)
    console.print(f"results: {out}")
    return result


if __name__ == "__main__":
    main()
