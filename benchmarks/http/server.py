"""The servers under test, each in its own process: the real app (rate limits off) and a bare
Litestar echo, under uvicorn; and the parent's handle on them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from benchmarks.http.config import (
    DB_VAR,
    HOME_VAR,
    HOST,
    PROFILE_VAR,
    REPO,
    SWITCH_VAR,
    THREADS_VAR,
    TIMINGS_VAR,
)
from benchmarks.http.cpu import descendants
from benchmarks.http.profiling import profile_worker, profile_writer
from benchmarks.http.spans import instrument
from ledger.home import LedgerHome

# ------------------------------------------------------------------------- server apps


def bench_app() -> Callable[..., Awaitable[None]]:
    """uvicorn factory of the serve-child: the real app on the ledger the environment names,
    with rate limits off (the benchmark sends far beyond the default per-key rate)."""
    from api.server.app import create_app, settle_worker_heap  # noqa: PLC0415
    from api.server.config import ServerConfig  # noqa: PLC0415

    if os.environ.get(SWITCH_VAR):
        # An experiment, not a fix: how often the GIL passes between the writer thread and
        # the event loop (CPython's default is every 5 ms).
        sys.setswitchinterval(float(os.environ[SWITCH_VAR]))
    from ledger.writer_process import RemoteWriter  # noqa: PLC0415

    home = LedgerHome.at(Path(os.environ[HOME_VAR]), os.environ[DB_VAR])
    # As `kernelindex serve` runs: with a writer process (SQLite), the workers hand it writes.
    writer = RemoteWriter.from_env()
    app = create_app(
        home.open(read_only=writer is not None),
        ServerConfig(key_rate=0, address_rate=0, json_logs=True),
        writer,
    )
    if os.environ.get(THREADS_VAR):
        # An experiment: Litestar runs sync handlers on the event loop's default executor,
        # min(32, cores + 4) threads; a write handler holds its thread until its group is
        # committed, so that pool bounds how many envelopes one group can gather.
        threads = int(os.environ[THREADS_VAR])

        def bigger_pool() -> None:
            pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="handler")
            asyncio.get_running_loop().set_default_executor(pool)

        app.on_startup.append(bigger_pool)
    settle_worker_heap()  # as `kernelindex serve`'s workers do
    if os.environ.get(PROFILE_VAR):
        profile_worker(app)
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


def _uvicorn(factory: str, port: int, workers: int, http: str = "auto") -> None:
    import uvicorn  # noqa: PLC0415

    uvicorn.run(
        factory,
        factory=True,
        http=http,
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
        parser.add_argument(
            "--writer",
            choices=("process", "thread"),
            default="process",
            help="on SQLite, the ledger's writer process (as `kernelindex serve`) or, for "
            "comparison, a writer thread in each worker",
        )
    args = parser.parse_args(argv[1:])
    if argv[0] == "echo-child":
        _uvicorn("benchmarks.http.server:echo_app", args.port, args.workers)
        return
    os.environ[HOME_VAR] = args.home
    os.environ[DB_VAR] = args.db
    if args.timings:
        os.environ[TIMINGS_VAR] = args.timings
    if args.switch_interval:
        os.environ[SWITCH_VAR] = args.switch_interval
    if args.threads:
        os.environ[THREADS_VAR] = args.threads
    # The server under test speaks HTTP as `kernelindex serve` does (its header deadline);
    # the echo anchor is uvicorn's own protocol, bare.
    from api.cli.serve import HEADER_DEADLINE_PROTOCOL as served  # noqa: PLC0415

    if args.writer == "thread" or not args.db.startswith("sqlite"):
        _uvicorn("benchmarks.http.server:bench_app", args.port, args.workers, served)
        return
    from ledger.writer_process import WriterProcess  # noqa: PLC0415

    log_setup = profile_writer if os.environ.get(PROFILE_VAR) else None  # runs in the writer
    writer = WriterProcess(Path(args.home), args.db, log_setup=log_setup).start()
    os.environ.update(writer.env)
    try:
        _uvicorn("benchmarks.http.server:bench_app", args.port, args.workers, served)
    finally:
        writer.stop()


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
        return [self.proc.pid, *descendants(self.proc.pid)]

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
