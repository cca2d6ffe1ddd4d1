"""What the application itself costs per append, without HTTP parsing, sockets or the writer:
the app as ``kernelindex serve`` makes it (rate limits off, as the HTTP benchmark runs it)
called directly as an ASGI app with real signed attestation envelopes, its writer a stub
that answers each envelope at once with one real receipt (inclusion proof and all), on one
thread; the bare Litestar echo (``benchmarks.http.server.echo_app``) under the same driver.
Thread-CPU per request (load-independent), and a fixed count of requests for
``valgrind --tool=callgrind`` (instructions, the same on any machine)::

    python -m benchmarks.http.app_cost 2>/dev/null          # both apps, µs of thread CPU
    python -m benchmarks.http.app_cost --requests 2000 --app append --repeat 1 2>/dev/null
    valgrind --tool=callgrind --zero-before=getsid --dump-before=getpgid \\
        python -m benchmarks.http.app_cost --app append --requests 500 --repeat 1 --mark

``--mark`` brackets the timed requests with ``os.getsid``/``os.getpgid`` calls, so
callgrind's ``--zero-before``/``--dump-before`` count only them (``grep summary``, ÷ requests).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from benchmarks.http.workload import Planned, plan_appends, prepare_ledger
from ledger.logged_event import LoggedEvent


class StubWriter:
    """A writer that answers every envelope at once with the same real receipt: the app's
    own cost is measured, not the ledger's."""

    def __init__(self, receipt: LoggedEvent) -> None:
        self.receipt = receipt

    def submit(self, envelope: object) -> Future[LoggedEvent]:
        reply: Future[LoggedEvent] = Future()
        reply.set_result(self.receipt)
        return reply

    def append(self, envelope: object) -> LoggedEvent:
        return self.receipt

    def close(self, timeout: float = 30.0) -> None:
        return None


def _scope(planned: Planned) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 40000 + planned.client),
        "scheme": "http",
        "method": "POST",
        "root_path": "",
        "path": planned.path,
        "raw_path": planned.path.encode(),
        "query_string": b"",
        "headers": [
            (b"host", b"127.0.0.1:8000"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(planned.body)).encode()),
        ],
        "state": {},
    }


async def _drive(app: Any, plans: list[Planned]) -> tuple[float, list[int]]:
    """Every request in turn; the thread CPU they took, and each reply's status."""
    statuses: list[int] = []

    async def one(planned: Planned) -> None:
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                await asyncio.sleep(3600)  # a disconnect never comes while it is served
            sent = True
            return {"type": "http.request", "body": planned.body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        await app(_scope(planned), receive, send)

    started = time.thread_time()
    for planned in plans:
        await one(planned)
    return time.thread_time() - started, statuses


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5, help="timed passes (median shown)")
    parser.add_argument("--app", choices=("both", "append", "echo"), default="both")
    parser.add_argument("--mark", action="store_true", help="getsid/getpgid around the timing")
    args = parser.parse_args(argv)

    from api.server.app import create_app  # noqa: PLC0415
    from api.server.config import ServerConfig  # noqa: PLC0415
    from benchmarks.http.server import echo_app  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as tmp:
        prepared = prepare_ledger(Path(tmp) / "home", f"sqlite:///{tmp}/ledger.db", 4, 32)
        plans = [
            p
            for mine in plan_appends(
                prepared.runs, prepared.attesters, [args.requests // 32 + 1] * 32, "cost"
            )
            for p in mine
        ]
        # Interleaved across clients (as the load arrives), each envelope once.
        plans = sorted(plans, key=lambda p: (p.seq, p.client))[: args.requests + 32]
        warm, timed = plans[:32], plans[32:]
        receipt = prepared.ledger.append(warm[0].envelope)
        apps: dict[str, Any] = {}
        if args.app in ("both", "append"):
            apps["append"] = create_app(
                prepared.ledger,
                ServerConfig(key_rate=0, address_rate=0, json_logs=True),
                StubWriter(receipt),
            )
        if args.app in ("both", "echo"):
            apps["echo"] = echo_app()
        # The access log goes where the app's logging was configured: stderr (send it to
        # /dev/null, as the commands above do; its cost counts either way).
        results = asyncio.run(_all(apps, warm, timed, args))
        prepared.ledger.close()
    for name, (spent, statuses) in results.items():
        codes = sorted(set(statuses))
        print(
            f"{name}: {statistics.median(spent) / len(timed) * 1e6:.1f} µs thread CPU per "
            f"request (median of {len(spent)} passes of {len(timed)}; "
            f"each {', '.join(f'{s / len(timed) * 1e6:.1f}' for s in spent)}); statuses {codes}"
        )


async def _all(
    apps: dict[str, Any], warm: list[Planned], timed: list[Planned], args: argparse.Namespace
) -> dict[str, tuple[list[float], list[int]]]:
    out: dict[str, tuple[list[float], list[int]]] = {}
    for name, app in apps.items():
        await _drive(app, warm)
        spent: list[float] = []
        statuses: list[int] = []
        for _ in range(args.repeat):
            if args.mark:
                os.getsid(0)
            used, codes = await _drive(app, timed)
            if args.mark:
                os.getpgid(0)
            spent.append(used)
            statuses.extend(codes)
        out[name] = (spent, statuses)
    return out


if __name__ == "__main__":
    main()
