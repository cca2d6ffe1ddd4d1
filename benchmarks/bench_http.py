"""HTTP write benchmark (DESIGN.md §13): signed attestation appends from concurrent clients.

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
import asyncio
import base64
import contextlib
import contextvars
import cProfile
import dataclasses
import datetime as dt
import functools
import json
import math
import os
import platform
import pstats
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import httpx
from rich.console import Console
from rich.table import Table
from sqlalchemy import create_engine, select, text
from sqlalchemy.engine import make_url

from benchmarks.generate import load_seed, synthetic_manifests
from benchmarks.suite import Context, FigureResult, Row, at_least, at_most
from domain.statements import Role
from ledger import timing
from ledger.application import Ledger
from ledger.home import LedgerHome
from ledger.proofs.log_entries import LogEntry
from ledger.proofs.merkle import CompactRange, ProofError, verify_inclusion
from ledger.signing.authoring import (
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
)
from ledger.signing.dsse import parse_envelope
from ledger.signing.keys import SigningKey
from ledger.store.transparency_log import leaves
from ledger.timing import Stage

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CACHE = HERE / ".cache" / "http"
RESULTS = HERE / "results"
DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
HOST = "127.0.0.1"
TARGET_RATE = 1_000.0  # appends/s
TARGET_P99_MS = 50.0
# The serve-child's uvicorn factory reads its ledger from these (uvicorn workers are spawned
# processes: the environment is the one channel every worker inherits).
HOME_VAR = "BENCH_HTTP_HOME"
DB_VAR = "BENCH_HTTP_DB"
TIMINGS_VAR = "BENCH_HTTP_TIMINGS"
SWITCH_VAR = "BENCH_HTTP_SWITCH_INTERVAL"
THREADS_VAR = "BENCH_HTTP_THREADS"
# Timed requests carry this header. A serve-child worker starts counting at the first one it
# sees: the phases are sequential (/health polls, then every warm-up answered, then the timed
# load), so nothing before the timed phase is counted, in any worker or thread (the group
# commit writer thread included, which no per-request context reaches).
TIMED_HEADER = b"x-bench-timed"
# Per timed request: when the handler entered and left service.append. The handler runs in a
# worker thread that gets a copy of the request's context, and the copy shares this dict.
_STAMPS: contextvars.ContextVar[dict[str, float] | None] = contextvars.ContextVar(
    "bench_stamps", default=None
)

# Wide enough for the tables when the output is a file or a pipe.
console = Console(width=None if sys.stdout.isatty() else 150)
F = TypeVar("F", bound=Callable[..., Any])


# ------------------------------------------------------------------- server-side timings


class Spans:
    """Wall time per named stage, exclusive of nested stages, summed over all calls.

    Stages nest (an aggregate load inside the signature check inside authorisation), so
    each stage keeps its *self* time: its wall time minus that of the stages it called.
    The self times of everything under ``service.append`` then add up to its total, which
    makes a breakdown without double counting. A per-thread stack holds the time of the
    children of each open stage; totals are shared by every thread under one lock. Nothing
    counts until ``active`` (see TIMED_HEADER).
    """

    def __init__(self) -> None:
        self.self_s: defaultdict[str, float] = defaultdict(float)
        self.total_s: defaultdict[str, float] = defaultdict(float)
        self.cpu_s: defaultdict[str, float] = defaultdict(float)
        self.calls: Counter[str] = Counter()
        self.raised: Counter[str] = Counter()
        # Side counters: not stages (they cut across them), e.g. every SQL statement.
        self.side_s: defaultdict[str, float] = defaultdict(float)
        self.side_calls: Counter[str] = Counter()
        # Notes: a value per call (e.g. the size of each committed group): sum, count, max.
        self.notes: dict[str, list[float]] = {}
        self.requests = 0
        self.request_s = 0.0
        # Of request_s: before the handler reached service.append, and after it returned.
        self.before_s = 0.0
        self.after_s = 0.0
        self.active = False
        self._lock = threading.Lock()
        self._local = threading.local()

    def _stack(self) -> list[float]:
        stack: list[float] | None = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def record(self, name: str, elapsed: float, children: float = 0.0, cpu: float = 0.0) -> None:
        stack = self._stack()
        if stack:
            stack[-1] += elapsed
        if not self.active:
            return
        with self._lock:
            self.self_s[name] += elapsed - children
            self.total_s[name] += elapsed
            self.calls[name] += 1
            self.cpu_s[name] += cpu

    def wrap(self, name: str, fn: F, *, cpu: bool = False) -> F:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            stack = self._stack()
            stack.append(0.0)
            cpu0 = time.thread_time() if cpu else 0.0
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            except BaseException:
                if self.active:
                    with self._lock:
                        self.raised[name] += 1
                raise
            finally:
                elapsed = time.perf_counter() - started
                used = time.thread_time() - cpu0 if cpu else 0.0
                self.record(name, elapsed, stack.pop(), used)

        return timed  # type: ignore[return-value]

    # ledger.timing.Probe: the ledger's own stages, named by LEDGER_STAGES.
    def begin(self, stage: Stage) -> object:
        self._stack().append(0.0)
        cpu = time.thread_time() if stage in CPU_STAGES else 0.0
        return (time.perf_counter(), cpu)

    def end(self, stage: Stage, began: object, raised: bool) -> None:
        started, cpu0 = cast("tuple[float, float]", began)
        elapsed = time.perf_counter() - started
        used = time.thread_time() - cpu0 if stage in CPU_STAGES else 0.0
        name = LEDGER_STAGES[stage]
        if raised and self.active:
            with self._lock:
                self.raised[name] += 1
        self.record(name, elapsed, self._stack().pop(), used)

    def side(self, name: str, fn: F) -> F:
        @functools.wraps(fn)
        def counted(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - started
                if self.active:
                    with self._lock:
                        self.side_s[name] += elapsed
                        self.side_calls[name] += 1

        return counted  # type: ignore[return-value]

    def note(self, name: str, value: float) -> None:
        if not self.active:
            return
        with self._lock:
            total, count, most = self.notes.get(name, [0.0, 0.0, 0.0])
            self.notes[name] = [total + value, count + 1, max(most, value)]

    def wrap_asgi(self, app: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
        """Time each HTTP request inside the ASGI app (framework, thread hop, handler)."""

        async def timed(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http" or not any(
                name == TIMED_HEADER for name, _ in scope.get("headers", ())
            ):
                await app(scope, receive, send)
                return
            self.active = True
            stamps: dict[str, float] = {}
            token = _STAMPS.set(stamps)
            started = time.perf_counter()
            try:
                await app(scope, receive, send)
            finally:
                ended = time.perf_counter()
                _STAMPS.reset(token)
                with self._lock:
                    self.requests += 1
                    self.request_s += ended - started
                    if "enter" in stamps and "exit" in stamps:
                        self.before_s += stamps["enter"] - started
                        self.after_s += ended - stamps["exit"]

        return timed

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "switchInterval": sys.getswitchinterval(),
            "requests": {
                "count": self.requests,
                "seconds": self.request_s,
                "beforeHandlerSeconds": self.before_s,
                "afterHandlerSeconds": self.after_s,
            },
            "spans": {
                name: {
                    "calls": self.calls[name],
                    "selfSeconds": self.self_s[name],
                    "totalSeconds": self.total_s[name],
                    "cpuSeconds": self.cpu_s[name],
                    "raised": self.raised[name],
                }
                for name in self.calls
            },
            "side": {
                name: {"calls": self.side_calls[name], "seconds": self.side_s[name]}
                for name in self.side_calls
            },
            "notes": {
                name: {"sum": total, "count": count, "max": most}
                for name, (total, count, most) in self.notes.items()
            },
        }


# Stage names. Request threads: the edge checks, then waiting for the group commit writer.
# The writer thread: one group at a time, its stages summed over all groups (then divided by
# the number of appends for a per-append figure).
S_SERVICE = "service.append: edge checks (envelope parse, endpoint/subject match)"
S_WAIT = "waiting for the writer thread (queue, groups ahead, own group)"
S_GROUP = "append_many: group loop, overlay, received times, receipts"
S_KEYS = "key reuse check (one query per group)"
S_PARSE = "envelope parse (base64, JSON, statement)"
S_GET = "aggregate loads (repository.get: cache copy + fast-forward SELECT)"
S_PREDICATE = "predicate schema (pydantic)"
S_AUTHORIZE = "authorisation (key record, validity, role)"
S_VERIFY = "Ed25519 signature check"
S_COMMIT_FN = "_commit: transaction begin/end"
S_SAVE = "event INSERT (save: serialise, insert)"
S_SEQUENCE = "log sequencing (lock, SELECT max x2, event read, leaf+node INSERT)"
S_PROOF = "inclusion proofs (leaf lookup, one node query per group)"
S_DB_COMMIT = "COMMIT (WAL write + fsync)"
S_SQL = "SQL statements (driver execute)"
LEDGER_STAGES: dict[Stage, str] = {
    Stage.GROUP: S_GROUP,
    Stage.KEYS: S_KEYS,
    Stage.PARSE: S_PARSE,
    Stage.GET: S_GET,
    Stage.PREDICATE: S_PREDICATE,
    Stage.AUTHORIZE: S_AUTHORIZE,
    Stage.VERIFY: S_VERIFY,
    Stage.COMMIT: S_COMMIT_FN,
    Stage.SAVE: S_SAVE,
    Stage.SEQUENCE: S_SEQUENCE,
    Stage.PROOF: S_PROOF,
}
CPU_STAGES = {Stage.GROUP}
N_GROUP = timing.GROUP_SIZE
REQUEST_STAGES = (S_SERVICE, S_WAIT)
WRITER_STAGES = (
    S_GROUP,
    S_KEYS,
    S_PARSE,
    S_GET,
    S_PREDICATE,
    S_AUTHORIZE,
    S_VERIFY,
    S_COMMIT_FN,
    S_SAVE,
    S_SEQUENCE,
    S_PROOF,
    S_DB_COMMIT,
)


def instrument(service: Any) -> Spans:
    """Time the stages of an append in this (serve-child) process: the ledger's own through
    its timing hooks (``ledger.timing``); the HTTP edge's and the writer queue's, which are
    not stages of the ledger, by wrapping three public or edge methods (a rename fails here,
    loudly); the driver's COMMIT and statements by wrapping the dialect."""
    from api.server import service as service_module  # noqa: PLC0415
    from ledger import group_commit  # noqa: PLC0415

    spans = Spans()
    timing.install(spans)  # the ledger's stages (ledger.timing), timed where the ledger says
    # The write handlers are async: the edge checks run on the event loop, then the handler
    # awaits the writer's future without holding a thread.
    checked = service_module.LedgerService._checked
    service_module.LedgerService._checked = staticmethod(  # type: ignore[method-assign]
        spans.wrap(S_SERVICE, checked)
    )
    submit = group_commit.GroupCommitWriter.submit

    @functools.wraps(submit)
    def timed_submit(self: Any, envelope: Any) -> Any:
        started = time.perf_counter()
        future = submit(self, envelope)
        future.add_done_callback(lambda _: spans.record(S_WAIT, time.perf_counter() - started))
        return future

    group_commit.GroupCommitWriter.submit = timed_submit  # type: ignore[method-assign]
    service_append = service_module.LedgerService.append_async

    @functools.wraps(service_append)
    async def stamped(*args: Any, **kwargs: Any) -> Any:
        stamps = _STAMPS.get()
        if stamps is not None:
            stamps["enter"] = time.perf_counter()
        try:
            return await service_append(*args, **kwargs)
        finally:
            if stamps is not None:
                stamps["exit"] = time.perf_counter()

    service_module.LedgerService.append_async = stamped  # type: ignore[method-assign]
    # The driver-level calls: COMMIT as a stage of its own; every statement as a side
    # counter (statements run inside every stage, so they cannot be a stage themselves).
    dialect = service.ledger.store.engine.dialect
    dialect.do_commit = spans.wrap(S_DB_COMMIT, dialect.do_commit)
    for attribute in ("do_execute", "do_executemany", "do_execute_no_params"):
        setattr(dialect, attribute, spans.side(S_SQL, getattr(dialect, attribute)))
    return spans


# ------------------------------------------------------------------------- server apps


def bench_app() -> Callable[..., Awaitable[None]]:
    """uvicorn factory of the serve-child: the real app on the ledger the environment names,
    with rate limits off (the benchmark sends far beyond the default per-key rate)."""
    from api.server.app import create_app  # noqa: PLC0415
    from api.server.config import ServerConfig  # noqa: PLC0415

    if os.environ.get(SWITCH_VAR):
        # An experiment, not a fix: how often the GIL passes between the writer thread and
        # the event loop (CPython's default is every 5 ms).
        sys.setswitchinterval(float(os.environ[SWITCH_VAR]))
    home = LedgerHome.at(Path(os.environ[HOME_VAR]), os.environ[DB_VAR])
    app = create_app(home.open(), ServerConfig(key_rate=0, address_rate=0, json_logs=True))
    if os.environ.get(THREADS_VAR):
        # An experiment: Litestar runs sync handlers on the event loop's default executor,
        # min(32, cores + 4) threads; a write handler holds its thread until its group is
        # committed, so that pool bounds how many envelopes one group can gather.
        threads = int(os.environ[THREADS_VAR])

        def bigger_pool() -> None:
            pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="handler")
            asyncio.get_running_loop().set_default_executor(pool)

        app.on_startup.append(bigger_pool)
    timings = os.environ.get(TIMINGS_VAR)
    if not timings:
        return app
    spans = instrument(app.state.service)
    out = Path(timings) / f"timings-{os.getpid()}.json"
    # Written at lifespan shutdown (SIGTERM from the parent), in every worker process.
    app.on_shutdown.append(lambda: out.write_text(json.dumps(spans.to_json())))
    return spans.wrap_asgi(app)


def echo_app() -> Any:
    """The anchor: a bare Litestar app on the same route shape, answering 201 with the JSON
    it was sent. Sync handler in a worker thread, like the real write handlers."""
    from litestar import Litestar, get, post  # noqa: PLC0415

    @post("/v1/runs/{digest:str}/attestations", sync_to_thread=True, status_code=201)
    def echo(digest: str, data: dict[str, Any]) -> dict[str, Any]:
        return data

    @get("/health", sync_to_thread=False)
    def health() -> dict[str, str]:
        return {"status": "ok"}

    return Litestar(route_handlers=[echo, health])


def _uvicorn(factory: str, port: int, workers: int) -> None:
    import uvicorn  # noqa: PLC0415

    uvicorn.run(
        factory,
        factory=True,
        host=HOST,
        port=port,
        workers=workers,
        # "info": uvicorn's supervisor then logs a worker it killed for missing its 5 s
        # health check ("Child process [...] died"), which the parent counts.
        log_level="info",
        access_log=False,  # the app logs its own access line (structlog, to stderr)
        lifespan="on",
        # A client done with its warm-up waits for the slowest client's before the timed
        # phase; uvicorn's default 5 s keep-alive would close its idle connection meanwhile.
        timeout_keep_alive=120,
    )


def child_main(argv: list[str]) -> None:
    """``serve-child`` / ``echo-child``: run one server in this process (and its workers)."""
    parser = argparse.ArgumentParser(prog="bench_http " + argv[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    if argv[0] == "serve-child":
        parser.add_argument("--home", required=True)
        parser.add_argument("--db", required=True)
        parser.add_argument("--timings", help="folder for per-worker stage timings")
        parser.add_argument("--switch-interval", help="sys.setswitchinterval in the server")
        parser.add_argument("--threads", help="handler thread pool size in the server")
    args = parser.parse_args(argv[1:])
    if argv[0] == "echo-child":
        _uvicorn("benchmarks.bench_http:echo_app", args.port, args.workers)
        return
    os.environ[HOME_VAR] = args.home
    os.environ[DB_VAR] = args.db
    if args.timings:
        os.environ[TIMINGS_VAR] = args.timings
    if args.switch_interval:
        os.environ[SWITCH_VAR] = args.switch_interval
    if args.threads:
        os.environ[THREADS_VAR] = args.threads
    _uvicorn("benchmarks.bench_http:bench_app", args.port, args.workers)


def scan_server_log(path: Path) -> dict[str, Any]:
    """What the server log says went wrong: workers the supervisor killed and restarted,
    error-level lines and tracebacks (the first few of each kind, shortened)."""
    text_ = path.read_text(errors="replace") if path.exists() else ""
    deaths = [line for line in text_.splitlines() if "died" in line and "Child process" in line]
    errors = [
        line
        for line in text_.splitlines()
        if '"level": "error"' in line or line.startswith(("Traceback", "ERROR"))
    ]
    return {
        "workerDeaths": len(deaths),
        "errorLines": len(errors),
        "examples": [line[:300] for line in (deaths + errors)[:5]],
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """A child server process: started, waited for until /health answers, then stopped with
    SIGTERM (graceful: lifespan shutdown writes the timings), killed if it hangs."""

    def __init__(
        self,
        args: list[str],
        log: Path,
        workers: int = 1,
        command: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = _free_port()
        self.log = log
        self.workers = workers
        # Default: this module's serve-child; tests run `python -m api.cli serve` through it.
        self._command = command or [sys.executable, "-m", "benchmarks.bench_http"]
        self._env = env
        self._args = [*args, "--port", str(self.port)]
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def __enter__(self) -> ServerProcess:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(  # noqa: S603 - our own module, fixed arguments
                [*self._command, *self._args],
                cwd=REPO,
                env=self._env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 120.0) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        with httpx.Client(trust_env=False, timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"server exited at start:\n{self.tail()}")
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.url}/health").status_code == 200 and self._all_up():
                        return
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server did not answer /health in {timeout:.0f} s:\n{self.tail()}")

    def _all_up(self) -> bool:
        """Every uvicorn worker has finished startup. /health answers as soon as the first
        one has; clients connecting then would all land on it (and on a loaded machine the
        supervisor may still be killing and restarting slow starters)."""
        if self.workers <= 1:
            return True
        text_ = self.log.read_text(errors="replace") if self.log.exists() else ""
        return text_.count("Application startup complete.") >= self.workers

    def tail(self, lines: int = 30) -> str:
        text_ = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text_.splitlines()[-lines:])

    def pids(self) -> list[int]:
        """The server and its uvicorn workers (all descendants)."""
        if self.proc is None:
            return []
        return [self.proc.pid, *_descendants(self.proc.pid)]

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL to the server and its workers: no shutdown hook, no flush."""
        if self.proc is not None and self.proc.poll() is None:
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ------------------------------------------------------------------------- CPU accounting

_TICK = os.sysconf("SC_CLK_TCK")


def _descendants(pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    found: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        children = [p for p, parent in parents.items() if parent == current]
        found.extend(children)
        frontier.extend(children)
    return found


def _process_cpu(pids: list[int]) -> dict[int, float]:
    """utime + stime in seconds of each live process (by pid: workers may come and go)."""
    cpu: dict[int, float] = {}
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = Path(f"/proc/{pid}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            cpu[pid] = (int(fields[11]) + int(fields[12])) / _TICK
    return cpu


def _machine_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all cores since boot, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    total = sum(values[:8])  # user..steal (guest time is already inside user)
    return total - idle, total


@dataclass
class CpuWindow:
    """CPU used between start() and stop(): the server's processes, this (client) process,
    the database's backend processes serving the ledger (PostgreSQL), and the machine's
    share busy across all cores (what is left is everyone else: on a shared machine, other
    work competes for the same cores, and this says how much)."""

    server_pids: list[int]
    database_pids: Callable[[], list[int]] | None = None
    server_s: float = 0.0
    client_s: float = 0.0
    database_s: float = 0.0
    machine_busy: float = 0.0
    _server0: dict[int, float] = field(default_factory=dict)
    _database0: dict[int, float] = field(default_factory=dict)
    _client0: float = 0.0
    _jiffies0: tuple[int, int] = (0, 0)

    def start(self) -> None:
        # After the warm-up: every pooled database connection (backend) exists by now.
        if self.database_pids is not None:
            self._database0 = _process_cpu(self.database_pids())
        self._server0 = _process_cpu(self.server_pids)
        self._client0 = time.process_time()
        self._jiffies0 = _machine_jiffies()

    def stop(self) -> None:
        now = _process_cpu(self.server_pids)
        self.server_s = sum(now[p] - self._server0.get(p, 0.0) for p in now)
        self.client_s = time.process_time() - self._client0
        database = _process_cpu(list(self._database0))
        self.database_s = sum(database[p] - self._database0[p] for p in database)
        busy, total = _machine_jiffies()
        span = total - self._jiffies0[1]
        self.machine_busy = (busy - self._jiffies0[0]) / span if span else 0.0


def pg_backends(db_url: str) -> Callable[[], list[int]]:
    """The pids of the PostgreSQL backends connected to this database (same machine)."""

    def pids() -> list[int]:
        engine = create_engine(db_url)
        try:
            with engine.connect() as conn:
                rows = conn.execute(
                    text(
                        "SELECT pid FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                )
                return [int(r[0]) for r in rows]
        finally:
            engine.dispose()

    return pids


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


# ---------------------------------------------------------------------------- the load


@dataclass
class Reply:
    planned: Planned
    status: int  # 0: no HTTP reply (connection error or timeout)
    seconds: float
    body: bytes
    timed: bool


class RawConnection:
    """One keep-alive HTTP/1.1 connection with the request bytes built ahead of time.

    A deliberately thin client: on a 2-core machine the clients share the CPU with the
    server, and every microsecond a client spends building or parsing HTTP is taken from
    the server being measured. Replies must carry Content-Length (uvicorn always sends it
    for these responses); anything else is counted as a protocol error.
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    def request(self, planned: Planned, timed: bool) -> bytes:
        head = (
            f"POST {planned.path} HTTP/1.1\r\nHost: {HOST}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(planned.body)}\r\n"
            + ("X-Bench-Timed: 1\r\n" if timed else "")
            + "\r\n"
        )
        return head.encode() + planned.body

    async def post(self, request: bytes) -> tuple[int, bytes]:
        if self._reader is not None and self._reader.at_eof():
            await self.close()  # closed by the server while idle: nothing was sent on it
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(HOST, self.port)
        assert self._reader is not None
        try:
            self._writer.write(request)
            await self._writer.drain()
            head = await self._reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length: int | None = None
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if length is None:
                raise ConnectionError("reply without Content-Length")
            return status, await self._reader.readexactly(length)
        except BaseException:
            await self.close()  # the next request opens a fresh connection
            raise

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError, ConnectionError):
                await self._writer.wait_closed()
        self._reader = self._writer = None


class HttpxConnection:
    """The same, through httpx.AsyncClient (keep-alive, one connection per client)."""

    def __init__(self, port: int) -> None:
        self.client = httpx.AsyncClient(
            base_url=f"http://{HOST}:{port}",
            trust_env=False,  # loopback only: never a proxy from the environment
            timeout=120.0,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
        )

    async def post_planned(self, planned: Planned, timed: bool) -> tuple[int, bytes]:
        headers = {"content-type": "application/json"}
        if timed:
            headers[TIMED_HEADER.decode()] = "1"
        reply = await self.client.post(planned.path, content=planned.body, headers=headers)
        return reply.status_code, reply.content

    async def close(self) -> None:
        await self.client.aclose()


async def _one(conn: RawConnection | HttpxConnection, planned: Planned, timed: bool) -> Reply:
    started = time.perf_counter()
    try:
        if isinstance(conn, RawConnection):
            request = conn.request(planned, timed)
            status, body = await asyncio.wait_for(conn.post(request), 120.0)
        else:
            status, body = await conn.post_planned(planned, timed)
    except (TimeoutError, OSError, ConnectionError, asyncio.IncompleteReadError) as exc:
        status, body = 0, f"{type(exc).__name__}: {exc}".encode()
    except httpx.HTTPError as exc:
        status, body = 0, f"{type(exc).__name__}: {exc}".encode()
    return Reply(planned, status, time.perf_counter() - started, body, timed)


@dataclass
class LoadResult:
    replies: list[Reply]
    wall: float
    cpu: CpuWindow


async def _drive(
    port: int, plans: list[list[Planned]], warmup: int, client_kind: str, cpu: CpuWindow
) -> LoadResult:
    conns: list[RawConnection | HttpxConnection] = [
        RawConnection(port) if client_kind == "raw" else HttpxConnection(port) for _ in plans
    ]

    async def client(i: int, todo: list[Planned], timed: bool) -> list[Reply]:
        return [await _one(conns[i], planned, timed) for planned in todo]

    async def warm_up(i: int, todo: list[Planned]) -> list[Reply]:
        # Connections open one after another, not in one burst: with several uvicorn
        # workers on one socket, a burst is accepted by whichever worker wakes first.
        await asyncio.sleep(i * 0.02)
        return await client(i, todo, False)

    try:
        # Warm-up: every client's connection open, the server's caches warm; verified
        # like the rest but not timed.
        warm = await asyncio.gather(*(warm_up(i, p[:warmup]) for i, p in enumerate(plans)))
        cpu.start()
        started = time.perf_counter()
        timed = await asyncio.gather(*(client(i, p[warmup:], True) for i, p in enumerate(plans)))
        wall = time.perf_counter() - started
        cpu.stop()
    finally:
        for conn in conns:
            await conn.close()
    replies = [r for group in (*warm, *timed) for r in group]
    return LoadResult(replies, wall, cpu)


def run_load(
    server: ServerProcess,
    plans: list[list[Planned]],
    warmup: int,
    client_kind: str,
    database_pids: Callable[[], list[int]] | None = None,
) -> LoadResult:
    cpu = CpuWindow(server.pids(), database_pids)
    return asyncio.run(_drive(server.port, plans, warmup, client_kind, cpu))


def _problem(reply: Reply) -> str:
    """A short, groupable description of a failed reply."""
    if reply.status == 0:
        return reply.body.decode(errors="replace")[:160]
    try:
        doc = json.loads(reply.body)
    except ValueError:
        return reply.body.decode(errors="replace")[:160]
    if isinstance(doc, dict):
        kind = str(doc.get("type", "")).rsplit("/", 1)[-1] or doc.get("title", "")
        return f"{kind}: {str(doc.get('detail', ''))[:140]}"
    return str(doc)[:160]


def load_summary(result: LoadResult, created: int = 201) -> dict[str, Any]:
    timed = [r for r in result.replies if r.timed]
    ok = [r for r in timed if r.status == created]
    failures: Counter[str] = Counter(
        f"{r.status} {_problem(r)}" for r in result.replies if r.status != created
    )
    cpu = result.cpu
    cores = os.cpu_count() or 1
    busy_s = cpu.machine_busy * cores * result.wall
    others = busy_s - cpu.server_s - cpu.client_s - cpu.database_s

    def per_request(seconds: float) -> float | None:
        return round(seconds / len(timed) * 1000, 3) if timed else None

    return {
        "requests": len(timed),
        "warmupRequests": len(result.replies) - len(timed),
        "acknowledged": len(ok),
        "seconds": round(result.wall, 3),
        "perSecond": round(len(ok) / result.wall, 1) if result.wall else 0.0,
        "latencyMs": latency_summary([r.seconds for r in timed]),
        "latencyMsAcknowledged": latency_summary([r.seconds for r in ok]),
        "statuses": dict(Counter(str(r.status) for r in result.replies)),
        "failures": dict(failures.most_common(10)),
        "cpu": {
            "serverSeconds": round(cpu.server_s, 2),
            "clientSeconds": round(cpu.client_s, 2),
            "databaseBackendSeconds": round(cpu.database_s, 2),
            "serverMsPerRequest": per_request(cpu.server_s),
            "clientMsPerRequest": per_request(cpu.client_s),
            "databaseBackendMsPerRequest": per_request(cpu.database_s),
            "machineBusy": round(cpu.machine_busy, 3),
            # Cores kept busy by anything else (other processes, PostgreSQL's background
            # writers): the interference the figures above were measured under.
            "otherCoresBusy": round(others / result.wall, 2) if result.wall else None,
        },
    }


# ------------------------------------------------------------------------- verification


def verify_acknowledged(ledger: Ledger, replies: list[Reply]) -> dict[str, Any]:
    """Every 201 receipt against the database, read directly (the server is stopped).

    For each receipt: the event at its position is the envelope that was sent (same
    aggregate and version, byte-equal envelope, same digest); its leaf index is the one the
    log gave that position; its inclusion proof verifies against the root it names; and that
    root is the root of the log recomputed here, from the stored events' own bytes, at the
    tree size the proof names. Then the log must be dense: events == leaves == tree size.
    """
    events: dict[int, Any] = {}
    start = 1
    while True:
        batch = ledger.recorder.select_notifications(start, 1000)
        for n in batch:
            events[n.id] = n
        if len(batch) < 1000:
            break
        start = batch[-1].id + 1
    with ledger.store.transaction(commit=False) as session:
        rows = session.execute(
            select(leaves.c.leaf_index, leaves.c.position, leaves.c.leaf_hash).order_by(
                leaves.c.leaf_index
            )
        ).all()
    leaf_of = {int(r[1]): int(r[0]) for r in rows}
    # The log recomputed from the events' bytes, in leaf order: the root at every size.
    compact = CompactRange()
    roots: list[bytes] = []
    stored_hash_mismatches = 0
    for _, position, stored_hash in rows:
        event = events.get(int(position))
        if event is None:
            stored_hash_mismatches += 1
            compact.append(bytes(stored_hash))
        else:
            entry = LogEntry.from_stored(
                event.id,
                str(event.originator_id),
                event.originator_version,
                event.topic,
                bytes(event.state),
            )
            mine = entry.leaf_hash()
            stored_hash_mismatches += mine != bytes(stored_hash)
            compact.append(mine)
        roots.append(compact.root())  # roots[size - 1]

    acknowledged = [r for r in replies if r.status == 201]
    present = mismatched = missing = proofs_ok = roots_ok = leaf_ok = 0
    problems: list[str] = []
    positions: set[int] = set()
    for reply in acknowledged:
        receipt = json.loads(reply.body)
        position = int(receipt["position"])
        positions.add(position)
        stored = events.get(position)
        if stored is None:
            missing += 1
            problems.append(f"position {position} ({reply.planned.digest}) is not stored")
            continue
        state = json.loads(stored.state)
        same = (
            str(stored.originator_id) == receipt["aggregateId"]
            and stored.originator_version == receipt["version"]
            and state.get("envelope") == reply.planned.envelope
            and state.get("envelope_digest") == reply.planned.digest == receipt["envelopeDigest"]
        )
        if not same:
            mismatched += 1
            problems.append(f"position {position} holds another event than {reply.planned.digest}")
            continue
        present += 1
        log = receipt.get("log") or {}
        try:
            leaf_index, size = int(log["leafIndex"]), int(log["treeSize"])
            if leaf_of.get(position) == leaf_index:
                leaf_ok += 1
            root = base64.b64decode(log["rootHash"])
            hashes = [base64.b64decode(h) for h in log["hashes"]]
            entry = LogEntry.from_stored(
                position, receipt["aggregateId"], receipt["version"], stored.topic, stored.state
            )
            verify_inclusion(entry.leaf_hash(), leaf_index, size, hashes, root)
            proofs_ok += 1
            if 0 < size <= len(roots) and roots[size - 1] == root:
                roots_ok += 1
        except (KeyError, TypeError, ValueError, ProofError) as exc:
            problems.append(f"position {position}: proof does not verify ({exc})")

    sent_unacknowledged = {r.planned.digest for r in replies if r.status != 201}
    stored_digests = {json.loads(n.state).get("envelope_digest") for n in events.values()}
    tree_size = len(rows)
    dense = (
        len(events) == tree_size
        and [int(r[0]) for r in rows] == list(range(tree_size))
        and [int(r[1]) for r in rows] == sorted(events)
    )
    return {
        "acknowledged": len(acknowledged),
        "present": present,
        "lost": missing,
        "mismatched": mismatched,
        "duplicatePositions": len(acknowledged) - len(positions),
        "leafIndexMatches": leaf_ok,
        "proofsVerified": proofs_ok,
        "rootsMatchRecomputedLog": roots_ok,
        "unacknowledgedButStored": len(sent_unacknowledged & stored_digests),
        "events": len(events),
        "treeSize": tree_size,
        "storedLeafHashMismatches": stored_hash_mismatches,
        "dense": dense,
        "problems": problems[:10],
    }


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


def run_echo(settings: Settings, work: Path) -> dict[str, Any]:
    """The HTTP-stack anchor: the same clients, bodies and route shape, against echo."""
    console.print("[bold]echo anchor[/]: bare Litestar, same clients and bodies ...")
    # Real signed envelopes of the same size; the echo server reads but never checks them.
    runs = [("sha256:" + "0" * 64, "echo-run")]
    counts = [c + settings.warmup for c in split(settings.appends, settings.clients)]
    plans = plan_appends(runs, [SigningKey.generate()], counts, "echo")
    with ServerProcess(["echo-child"], work / "echo.log") as server:
        load = run_load(server, plans, settings.warmup, settings.client_kind)
    summary = load_summary(load)
    console.print(
        f"  {summary['acknowledged']} answered in {summary['seconds']:.1f} s: "
        f"{summary['perSecond']:.0f}/s, p99 {summary['latencyMs'].get('p99', math.nan):.1f} ms"
    )
    return summary


# --------------------------------------------------------------------------- reporting


def _fmt(value: float, digits: int = 0) -> str:
    return "—" if value is None or math.isnan(value) else f"{value:,.{digits}f}"


def _ratio(value: float, anchor: float | None) -> float | None:
    if not anchor or math.isnan(anchor) or math.isnan(value):
        return None
    return round(value / anchor, 3)


def _show_ratio(ratio: float | None) -> str:
    return "—" if ratio is None else f"{ratio:.2f}"


def _pass(ok: bool) -> str:
    return "[green]pass[/]" if ok else "[red]fail[/]"


def judge(scenario: dict[str, Any], echo: dict[str, Any] | None) -> dict[str, Any]:
    """Ratios against the anchors measured in this run, and each §13 target met or not."""
    http, ver = scenario["http"], scenario["verification"]
    rate, p99 = http["perSecond"], http["latencyMs"].get("p99", math.nan)
    echo_rate = echo["perSecond"] if echo else None
    echo_p99 = echo["latencyMs"]["p99"] if echo else None
    groups = scenario["inProcess"].get("groups") or []
    best_group = max((g["appendsPerSecond"] for g in groups), default=None)
    return {
        "ratios": {
            "httpToEcho": _ratio(rate, echo_rate),
            "httpToInProcess": _ratio(rate, scenario["inProcess"]["appendsPerSecond"]),
            "httpToInProcessGroups": _ratio(rate, best_group),
            "p99ToEchoP99": _ratio(p99, echo_p99),
        },
        "pass": {
            "appendsPerSecond": rate >= TARGET_RATE,
            "p99": p99 <= TARGET_P99_MS,
            "inclusionProofInEveryReply": ver["acknowledged"] > 0
            and ver["proofsVerified"] == ver["acknowledged"] == ver["rootsMatchRecomputedLog"],
            "noneLostLogDense": ver["present"] == ver["acknowledged"] and ver["dense"],
        },
    }


def print_report(result: dict[str, Any]) -> None:
    echo = result["echo"]
    clients = result["config"]["clients"]
    table = Table(title=f"HTTP attestation appends, {clients} clients on loopback (DESIGN.md §13)")
    for column in ("figure", "value", "anchor", "ratio", "target", ""):
        table.add_column(column, justify="left" if column in ("figure", "target") else "right")
    if echo:
        table.add_row(
            "echo anchor: requests/s (p50 / p99 ms)",
            _fmt(echo["perSecond"]),
            "",
            "",
            "HTTP-stack ceiling",
            f"{echo['latencyMs']['p50']:.1f} / {echo['latencyMs']['p99']:.1f}",
        )
    for s in result["scenarios"]:
        http, ver, inproc = s["http"], s["verification"], s["inProcess"]
        lat, ratios, ok = http["latencyMs"], s["judged"]["ratios"], s["judged"]["pass"]
        table.add_section()
        table.add_row(
            f"[bold]{s['label']}[/]: appends/s over HTTP",
            _fmt(http["perSecond"]),
            f"echo {_fmt(echo['perSecond'])}" if echo else "",
            _show_ratio(ratios["httpToEcho"]),
            f"≥ {TARGET_RATE:,.0f}",
            _pass(ok["appendsPerSecond"]),
        )
        table.add_row(
            "  vs Ledger.append in-process, 1 thread",
            _fmt(http["perSecond"]),
            f"{_fmt(inproc['appendsPerSecond'])}/s",
            _show_ratio(ratios["httpToInProcess"]),
            "",
            "",
        )
        for group in inproc.get("groups") or []:
            table.add_row(
                f"  vs Ledger.append_many, groups of {group['group']}, in-process",
                _fmt(http["perSecond"]),
                f"{_fmt(group['appendsPerSecond'])}/s",
                _show_ratio(_ratio(http["perSecond"], group["appendsPerSecond"])),
                "",
                "",
            )
        table.add_row(
            "  latency p99 ms (p50)",
            f"{_fmt(lat['p99'], 1)} ({_fmt(lat['p50'], 1)})",
            f"echo {echo['latencyMs']['p99']:.1f}" if echo else "",
            _show_ratio(ratios["p99ToEchoP99"]),
            f"≤ {TARGET_P99_MS:.0f}",
            _pass(ok["p99"]),
        )
        table.add_row(
            "  inclusion proof in every 201, verified",
            f"{ver['proofsVerified']}/{ver['acknowledged']}",
            "",
            "",
            "every reply",
            _pass(ok["inclusionProofInEveryReply"]),
        )
        table.add_row(
            "  acknowledged / present / lost",
            f"{ver['acknowledged']} / {ver['present']} / {ver['lost'] + ver['mismatched']}",
            "",
            "",
            "lost 0, log dense",
            _pass(ok["noneLostLogDense"]),
        )
        failed = sum(v for k, v in http["statuses"].items() if k != "201")
        table.add_row("  non-201 replies", str(failed), "", "", "", "")
        log = http.get("serverLog", {})
        if log.get("workerDeaths") or log.get("errorLines"):
            table.add_row(
                "  server log: workers killed / error lines",
                f"{log['workerDeaths']} / {log['errorLines']}",
                "",
                "",
                "",
                "",
            )
    console.print(table)
    for s in result["scenarios"]:
        if s["http"]["failures"]:
            console.print(f"[yellow]{s['label']} non-201 replies:[/]")
            for what, count in s["http"]["failures"].items():
                console.print(f"  {count} x {what}")
        rows = s["breakdownMs"]
        if not rows:
            continue
        detail = Table(title=f"where a request's time goes: {s['label']} (mean ms per append)")
        detail.add_column("stage")
        detail.add_column("ms", justify="right")
        detail.add_column("note", justify="right")
        for row in rows:
            note = ""
            if "groups" in row:
                note = (
                    f"{row['groups']} groups, mean {row['meanGroup']}, max {row['maxGroup']}; "
                    f"writer CPU {row['writerCpuMs']:.2f} ms/append, busy {row['writerBusy']:.0%}"
                )
            if "statementsPerAppend" in row:
                note = f"{row['statementsPerAppend']:.1f} statements/append"
            detail.add_row("  " * row["level"] + row["stage"], f"{row['ms']:.2f}", note)
        cpu = s["http"]["cpu"]
        database = ""
        if cpu["databaseBackendSeconds"]:
            database = f", PostgreSQL backends {cpu['databaseBackendMsPerRequest']} ms/append"
        detail.caption = (
            f"CPU during the load: server {cpu['serverMsPerRequest']} ms/append{database}, "
            f"clients {cpu['clientMsPerRequest']} ms/request; machine {cpu['machineBusy']:.0%} "
            f"busy of {os.cpu_count()} cores, {cpu['otherCoresBusy']} cores busy with other work"
        )
        console.print(detail)


# ------------------------------------------------------------------------ suite figure

SUITE_APPENDS = 1_000  # the suite's load: a third of this module's default (3,000)
SUITE_QUICK_APPENDS = 320  # as --quick: 10 per client


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
        ctx.step("echo anchor: bare Litestar handler, same clients and bodies")
        (session / "echo").mkdir()
        echo = run_echo(settings, session / "echo")
        ctx.step(f"API on SQLite: {settings.clients} clients x {settings.appends} appends")
        work = session / "sqlite-1"
        work.mkdir()
        url = f"sqlite:///{work / 'home' / 'ledger.db'}"
        scenario = run_scenario("sqlite", url, 1, settings, work)
    finally:
        console = saved
        shutil.rmtree(session, ignore_errors=True)
    judged = judge(scenario, echo)
    scenario["judged"] = judged
    http, ver, inproc = scenario["http"], scenario["verification"], scenario["inProcess"]
    rate, p99 = http["perSecond"], http["latencyMs"].get("p99", math.nan)
    ok_rate, rate_to = at_least(rate, TARGET_RATE)
    ok_p99, p99_to = at_most(p99, TARGET_P99_MS)
    best_group = max((g["appendsPerSecond"] for g in inproc.get("groups") or []), default=0.0)
    rows = [
        Row(
            "http",
            f"attestation appends/s over HTTP, {settings.clients} clients, SQLite",
            f"{rate:,.0f}/s",
            f"echo {echo['perSecond']:,.0f}/s",
            judged["ratios"]["httpToEcho"],
            f"≥ {TARGET_RATE:,.0f}/s",
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
        f"{echo['latencyMs']['p99']:,.0f} ms here (2 cores shared by clients and server)"
    )
    if writer is not None:
        why += (
            f"; the group-commit writer is busy {writer['writerBusy']:.0%} at "
            f"{writer['ms']:.1f} ms per append (groups of {writer['meanGroup']} on average)"
        )
    return FigureResult(
        "http",
        f"attestation appends over HTTP ({settings.appends} timed appends, 32 clients)",
        rows,
        {"config": dataclasses.asdict(settings), "echo": echo, "scenario": scenario},
        why=why,
    )


def machine() -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor(),
        "loadAverageBefore": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("serve-child", "echo-child"):
        child_main(argv)
        return {}
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
    parser.add_argument("--out", type=Path, help="results file (default results/http-DATE.json)")
    args = parser.parse_args(argv)
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
    )
    today = dt.date.today().isoformat()
    out = args.out or RESULTS / f"http-{today}{'-quick' if args.quick else ''}.json"

    scenarios: list[tuple[str, int]] = []
    if args.backend in ("sqlite", "both"):
        scenarios.append(("sqlite", 1))
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
        "targets": {"appendsPerSecond": TARGET_RATE, "p99Ms": TARGET_P99_MS},
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
    result["loadAverageAfter"] = round(os.getloadavg()[0], 2)
    result["command"] = "python -m benchmarks.bench_http " + " ".join(argv)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print_report(result)
    console.print(f"results: {out}")
    return result


if __name__ == "__main__":
    main()
