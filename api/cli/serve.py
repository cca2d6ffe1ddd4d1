"""`kernelindex serve`: the HTTP API and pages over a ledger home, with uvicorn."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from api.cli.common import DbOption, HomeOption, err, handles_errors, out
from api.demo import DEMO_HOME, build_demo, demo_home
from ledger.errors import StoreError
from ledger.home import DB_ENV, HOME_ENV, LedgerHome

if TYPE_CHECKING:
    from ledger.application import Ledger
    from ledger.writer_process import RemoteWriter

APP_FACTORY = "api.server.app:create_app_from_env"
HEADER_DEADLINE_PROTOCOL = "api.server.http_protocol:HeaderDeadlineProtocol"
PUBLIC_URL_ENV = "KERNELINDEX_PUBLIC_URL"
# Read by worker processes (create_app_from_env).
LOG_FORMAT_ENV = "KERNELINDEX_LOG_FORMAT"
# HTTP workers when none are asked for. On SQLite a second worker in front of the writer
# process was measured against one on 2 cores (benchmarks/README.md, "2026-12-07 (session
# 2) — http"): no gain resolved, and two workers spend more CPU per append in all; on
# PostgreSQL more workers added reads, not writes. The HTTP benchmark measures this layout.
DEFAULT_WORKERS = 1


class LogFormat(StrEnum):
    json = "json"
    console = "console"


def _is_sqlite(db_url: str) -> bool:
    try:
        return make_url(db_url).get_backend_name() == "sqlite"
    except ArgumentError:
        return False  # a malformed URL fails with its own message when the ledger opens it


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@handles_errors
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port.")] = 8000,
    home: HomeOption = None,
    db: DbOption = None,
    demo: Annotated[
        bool,
        typer.Option(
            "--demo",
            help=f"Build (or reuse) the demo ledger (at {DEMO_HOME} or --home) and serve it.",
        ),
    ] = False,
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            help="HTTP worker processes (on SQLite they hand every write to the ledger's one "
            "writer process).",
        ),
    ] = DEFAULT_WORKERS,
    public_url: Annotated[
        str | None,
        typer.Option(
            "--public-url",
            help="Base of permalinks, e.g. https://ledger.example.org (default: the address "
            "served; never the client's Host header).",
        ),
    ] = None,
    log_format: Annotated[
        LogFormat, typer.Option("--log-format", help="Structured log lines: json or console.")
    ] = LogFormat.json,
) -> None:
    """Serve the HTTP API (/v1, OpenAPI at /schema) and the pages for a ledger."""
    # The server stack (Litestar, uvicorn) loads in _serve, not when any other command starts.
    from api.server.observability import configure_logging  # noqa: PLC0415
    from ledger.writer_process import RemoteWriter, WriterProcess  # noqa: PLC0415

    target = demo_home(home, db) if demo else LedgerHome.at(home, db)
    if demo:
        build_demo(target)[0].close()
    ledger = target.open()
    writer: WriterProcess | None = None
    stop = _Stop()
    if _is_sqlite(target.db_url):
        # SQLite takes one writing process: the ledger's writer process, which every HTTP
        # worker hands its writes to; the workers read the ledger themselves. Should it end
        # unasked it is started again; if it cannot be kept running, serving stops.
        ledger.close()
        # Its records are lines of the server's log, in the server's format.
        log_setup = functools.partial(configure_logging, log_format is LogFormat.json)
        writer = WriterProcess(target.path, target.db_url, log_setup=log_setup).start()
        os.environ.update(writer.env)
        ledger = target.open(read_only=True)
        writer.watch(report=_warn, give_up=stop.give_up)
    try:
        remote = RemoteWriter(writer.address, writer.key) if writer is not None else None
        pid = writer.pid if writer is not None else None
        _serve(ledger, target, host, port, workers, public_url, log_format, remote, pid, stop)
    finally:
        ledger.close()
        if writer is not None:
            writer.stop()
    if stop.reason is not None:
        raise StoreError(stop.reason)  # exit 1, the reason on stderr


def _warn(message: str) -> None:
    err.print(f"[yellow]serve: {escape(message)}[/]")


class _Stop:
    """How the writer's watcher ends a running server when the writer cannot be kept
    running: uvicorn's own exit (as on SIGTERM: the workers finish what they serve), the
    reason kept for `serve` to exit with. ``arm`` once uvicorn runs; a give-up that came
    before is honoured then."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self._hook: Callable[[], None] | None = None
        self._lock = threading.Lock()

    def arm(self, hook: Callable[[], None]) -> None:
        with self._lock:
            self._hook = hook
            due = self.reason is not None
        if due:
            hook()

    def give_up(self, reason: str) -> None:
        _warn(f"{reason}; stopping the server")
        with self._lock:
            self.reason = reason
            hook = self._hook
        if hook is not None:
            hook()


def _serve(
    ledger: Ledger,
    target: LedgerHome,
    host: str,
    port: int,
    workers: int,
    public_url: str | None,
    log_format: LogFormat,
    remote: RemoteWriter | None,
    writer_pid: int | None,
    stop: _Stop,
) -> None:
    import uvicorn  # noqa: PLC0415 - the web stack only once serving, not for --help
    from uvicorn.config import STARTUP_FAILURE  # noqa: PLC0415
    from uvicorn.supervisors import Multiprocess  # noqa: PLC0415

    from api.server.app import create_app  # noqa: PLC0415
    from api.server.config import ServerConfig  # noqa: PLC0415
    from api.server.http_protocol import HeaderDeadlineProtocol  # noqa: PLC0415
    from ledger.long_lived import freeze_long_lived  # noqa: PLC0415

    if public_url is None and host not in {"0.0.0.0", "::", ""}:  # noqa: S104
        # Its own address, when that is one clients can reach; behind a wildcard bind the
        # permalink stays relative (never the client's Host header): give --public-url.
        public_url = _url(host, port)
    out.print(
        f"Serving the ledger at [bold]{target.path}[/] ({target.db_url})\n"
        f"  listening on {_url(host, port)}  (API under /v1, OpenAPI at /schema)"
        + (f", {workers} workers" if workers > 1 else "")
        + (f"\n  writer process pid {writer_pid}" if writer_pid is not None else "")
    )
    # Our access line per request replaces uvicorn's; its own notices only when asked for
    # human-readable logs, so JSON logs stay machine-readable.
    uvicorn_level = "info" if log_format is LogFormat.console else "warning"
    if workers > 1:
        if remote is not None:
            remote.close()  # each worker makes its own
        os.environ[HOME_ENV] = str(target.path)
        os.environ[DB_ENV] = target.db_url
        os.environ[LOG_FORMAT_ENV] = log_format.value
        if public_url is not None:
            os.environ[PUBLIC_URL_ENV] = public_url
        # What uvicorn.run does for workers, with a handle on the supervisor to stop it.
        multi = uvicorn.Config(
            APP_FACTORY,
            factory=True,
            http=HEADER_DEADLINE_PROTOCOL,
            host=host,
            port=port,
            workers=workers,
            log_level=uvicorn_level,
            access_log=False,
        )
        supervisor = Multiprocess(multi, sockets=[multi.bind_socket()])
        stop.arm(supervisor.should_exit.set)
        supervisor.run()
        return
    config = ServerConfig(public_url=public_url, json_logs=log_format is LogFormat.json)
    app = create_app(ledger, config, remote, target)
    freeze_long_lived()
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            http=HeaderDeadlineProtocol,  # slow-loris: headers must arrive in time (408)
            host=host,
            port=port,
            log_level=uvicorn_level,
            access_log=False,
        )
    )
    stop.arm(lambda: setattr(server, "should_exit", True))
    server.run()
    if not server.started and stop.reason is None:
        raise typer.Exit(STARTUP_FAILURE)  # uvicorn said why (the port taken, say)


# What this module adds to `kernelindex` (api/cli/main.py lists it).
app = typer.Typer()
app.command("serve")(serve)
