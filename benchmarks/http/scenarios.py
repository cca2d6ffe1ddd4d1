"""One scenario end to end (ledger, server, load, verification, timings) per backend, and the echo
anchor.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from benchmarks.http.acknowledged import verify_acknowledged
from benchmarks.http.config import console
from benchmarks.http.cpu import pg_backends
from benchmarks.http.load import LoadResult, load_summary, pooled, run_load
from benchmarks.http.server import ServerProcess, scan_server_log
from benchmarks.http.spans import N_GROUP, REQUEST_STAGES, S_GROUP, S_SERVICE, WRITER_STAGES
from benchmarks.http.workload import (
    in_process_groups,
    in_process_rate,
    plan_appends,
    prepare_ledger,
    profile_fresh_appends,
    split,
)
from ledger.signing.keys import SigningKey

# ---------------------------------------------------------------------- the scenarios


@contextlib.contextmanager
def pg_database(admin_url: str) -> Iterator[str]:
    """A uniquely named database on the shared server, dropped (forcibly) afterwards."""
    name = f"kernelindex_bench_http_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@dataclass
class Settings:
    clients: int
    appends: int
    runs: int
    warmup: int
    in_process: int
    client_kind: str
    timings: bool
    profile: bool
    groups: list[int]
    switch_interval: float | None
    threads: int | None
    keep: bool
    # On SQLite: the ledger's writer process (as `kernelindex serve`), or a writer thread.
    writer: str = "process"


def server_timings(folder: Path) -> dict[str, Any]:
    """The serve-child's stage timings, summed over its worker processes."""
    spans: dict[str, dict[str, float]] = {}
    side: dict[str, dict[str, float]] = {}
    notes: dict[str, dict[str, float]] = {}
    per_worker: list[int] = []
    requests = {"count": 0, "seconds": 0.0, "beforeHandlerSeconds": 0.0, "afterHandlerSeconds": 0.0}
    workers = 0
    for path in sorted(folder.glob("timings-*.json")):
        doc = json.loads(path.read_text())
        workers += 1
        # How the kernel spread the clients' connections over the workers' shared socket.
        per_worker.append(int(doc["requests"]["count"]))
        for key in requests:
            requests[key] += doc["requests"].get(key, 0.0)
        for target, source in ((spans, doc["spans"]), (side, doc["side"])):
            for name, values in source.items():
                slot = target.setdefault(name, {})
                for key, value in values.items():
                    slot[key] = slot.get(key, 0) + value
        for name, values in doc.get("notes", {}).items():
            slot = notes.setdefault(name, {"sum": 0.0, "count": 0.0, "max": 0.0})
            slot["sum"] += values["sum"]
            slot["count"] += values["count"]
            slot["max"] = max(slot["max"], values["max"])
    return {
        "workers": workers,
        "requestsPerWorker": sorted(per_worker, reverse=True),
        "requests": requests,
        "spans": spans,
        "side": side,
        "notes": notes,
    }


def breakdown(timings: dict[str, Any], client_mean_ms: float, wall: float) -> list[dict[str, Any]]:
    """Mean milliseconds per append of each stage, outermost first (self times).

    Request-thread stages are per request. Writer-thread stages happen once per group; their
    totals are divided by the number of appends, so they read as the writer's time per
    append (what bounds throughput), not as a request's latency.
    """
    spans: dict[str, dict[str, float]] = timings.get("spans", {})
    n = int(spans.get(S_SERVICE, {}).get("calls", 0))
    requests = timings.get("requests", {})
    if not n or not requests.get("count"):
        return []

    def per(seconds: float) -> float:
        return float(seconds) / n * 1000

    def stage(name: str, level: int) -> dict[str, Any]:
        return {"stage": name, "ms": per(spans[name]["selfSeconds"]), "level": level}

    asgi = requests["seconds"] / requests["count"] * 1000
    service_total = per(spans[S_SERVICE]["totalSeconds"])
    rows: list[dict[str, Any]] = [
        {"stage": "client-observed latency (mean)", "ms": client_mean_ms, "level": 0},
        {
            "stage": "outside the app: uvicorn/h11, sockets, event-loop wait, client",
            "ms": client_mean_ms - asgi,
            "level": 1,
        },
        {"stage": "inside the ASGI app (mean per request)", "ms": asgi, "level": 1},
        {
            "stage": "before the handler: body, routing, DI, thread hop (Litestar, event loop)",
            "ms": requests["beforeHandlerSeconds"] / requests["count"] * 1000,
            "level": 2,
        },
        {"stage": "service.append total", "ms": service_total, "level": 2},
    ]
    rows += [stage(name, 3) for name in REQUEST_STAGES if name in spans]
    rows.append(
        {
            "stage": "after the handler: thread hop back, response, access log (event loop)",
            "ms": requests["afterHandlerSeconds"] / requests["count"] * 1000,
            "level": 2,
        }
    )
    if S_GROUP in spans:
        group = spans[S_GROUP]
        sizes = timings.get("notes", {}).get(N_GROUP, {})
        mean_size = sizes["sum"] / sizes["count"] if sizes.get("count") else math.nan
        workers = max(1, int(timings.get("workers", 1)))
        rows.append(
            {
                "stage": "writer thread: append_many total, per append",
                "ms": per(group["totalSeconds"]),
                "level": 0,
                "writerCpuMs": per(group["cpuSeconds"]),
                "groups": int(group["calls"]),
                "meanGroup": round(mean_size, 2),
                "maxGroup": int(sizes.get("max", 0)),
                # Share of the timed phase the writer thread(s) spent committing groups:
                # near 1 means the writer is the bottleneck.
                "writerBusy": round(group["totalSeconds"] / wall / workers, 3) if wall else None,
            }
        )
        rows += [stage(name, 1) for name in WRITER_STAGES if name in spans]
    for name, values in timings.get("side", {}).items():
        rows.append(
            {
                "stage": f"(across stages) {name}",
                "ms": per(values["seconds"]),
                "statementsPerAppend": values["calls"] / n,
                "level": 2,
            }
        )
    for row in rows:
        row["ms"] = round(row["ms"], 3)
    return rows


def run_scenario(
    backend: str, db_url: str, workers: int, settings: Settings, work: Path
) -> dict[str, Any]:
    label = f"{backend}, {workers} worker{'s' if workers > 1 else ''}"
    console.print(f"[bold]{label}[/]: preparing a ledger ...")
    started = time.perf_counter()
    prepared = prepare_ledger(work / "home", db_url, settings.runs, settings.clients)
    counts = split(settings.appends, settings.clients)
    per_client = [c + settings.warmup for c in counts]
    plans = plan_appends(prepared.runs, prepared.attesters, per_client, "http")
    # The anchor's appends: the same kind (attestations by a registered attester), its own.
    anchor = plan_appends(prepared.runs, prepared.attesters, [settings.in_process], "inproc")[0]
    console.print(
        f"  {prepared.events} events, {len(prepared.runs)} runs, {settings.clients} attester "
        f"keys; {sum(per_client) + len(anchor)} envelopes signed in "
        f"{time.perf_counter() - started:.1f} s"
    )
    console.print(f"  in-process anchor: {settings.in_process} x Ledger.append ...")
    inproc = in_process_rate(prepared.ledger, anchor)
    if settings.profile:
        # Interleaved over the runs, as the clients' appends arrive at the writer.
        spread = split(max(128, settings.in_process // 2), len(prepared.runs))
        profiled = plan_appends(prepared.runs, prepared.attesters, spread, "profile")
        extra = [g[i] for i in range(max(spread)) for g in profiled if i < len(g)]
        group = min(settings.clients, 256)
        inproc["profile"] = profile_fresh_appends(prepared.ledger, extra, group)
    if settings.groups:
        console.print(f"  in-process anchor: Ledger.append_many in groups of {settings.groups} ...")
        inproc["groups"] = in_process_groups(prepared, settings.groups, settings.in_process)
    prepared.ledger.close()

    timings_dir = work / "timings"
    timings_dir.mkdir()
    args = ["serve-child", "--home", str(prepared.home.path), "--db", db_url]
    args += ["--workers", str(workers)]
    if settings.timings:
        args += ["--timings", str(timings_dir)]
    if settings.switch_interval is not None:
        args += ["--switch-interval", str(settings.switch_interval)]
    if settings.threads is not None:
        args += ["--threads", str(settings.threads)]
    args += ["--writer", settings.writer]
    console.print(
        f"  {settings.clients} clients x ~{counts[0]} appends (+{settings.warmup} warm-up) ..."
    )
    backends = pg_backends(db_url) if backend == "postgres" else None
    with ServerProcess(args, work / "server.log", workers) as server:
        load = run_load(server, plans, settings.warmup, settings.client_kind, backends)
    summary = load_summary(load)
    summary["serverLog"] = scan_server_log(work / "server.log")
    console.print(
        f"  {summary['acknowledged']} acknowledged in {summary['seconds']:.1f} s: "
        f"{summary['perSecond']:.0f}/s, p99 {summary['latencyMs'].get('p99', math.nan):.0f} ms"
    )

    console.print("  verifying every acknowledged append against the database ...")
    ledger = prepared.home.open()
    try:
        verification = verify_acknowledged(ledger, load.replies)
    finally:
        ledger.close()
    timings = server_timings(timings_dir) if settings.timings else {}
    return {
        "backend": backend,
        "workers": workers,
        "label": label,
        "ledgerEventsBefore": prepared.events,
        "runs": len(prepared.runs),
        "inProcess": inproc,
        "http": summary,
        "verification": verification,
        "serverTimings": timings,
        "breakdownMs": breakdown(
            timings, summary["latencyMs"].get("mean", math.nan), summary["seconds"]
        ),
    }


def echo_round(settings: Settings, work: Path) -> LoadResult:
    """One timed phase of the HTTP-stack anchor: the same clients, bodies and route shape,
    against echo, on a fresh echo server (its own log under ``work``)."""
    # Real signed envelopes of the same size; the echo server reads but never checks them.
    runs = [("sha256:" + "0" * 64, "echo-run")]
    counts = [c + settings.warmup for c in split(settings.appends, settings.clients)]
    plans = plan_appends(runs, [SigningKey.generate()], counts, "echo")
    work.mkdir(parents=True, exist_ok=True)
    with ServerProcess(["echo-child"], work / "echo.log") as server:
        return run_load(server, plans, settings.warmup, settings.client_kind)


def echo_summary(rounds: list[LoadResult]) -> dict[str, Any]:
    """The anchor over its rounds pooled (``pooled``), each round's own rate beside it."""
    summary = load_summary(pooled(rounds))
    summary["rounds"] = [load_summary(r)["perSecond"] for r in rounds]
    console.print(
        f"  echo: {summary['acknowledged']} answered in {summary['seconds']:.1f} s over "
        f"{len(rounds)} round(s): {summary['perSecond']:.0f}/s "
        f"(rounds {', '.join(f'{r:.0f}' for r in summary['rounds'])}), "
        f"p99 {summary['latencyMs'].get('p99', math.nan):.1f} ms"
    )
    return summary


def run_echo(settings: Settings, work: Path) -> dict[str, Any]:
    """The HTTP-stack anchor, one round."""
    console.print("[bold]echo anchor[/]: bare Litestar, same clients and bodies ...")
    return echo_summary([echo_round(settings, work)])
