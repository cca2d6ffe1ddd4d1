"""What the application itself costs per append, without HTTP parsing, sockets or the writer:
the app as ``kernelindex serve`` makes it (rate limits off, as the HTTP benchmark runs it)
called directly as an ASGI app with real signed attestation envelopes, its writer a stub
that answers each envelope at once with one real receipt (inclusion proof and all), on one
thread; the bare Litestar echo (``benchmarks.http.server.echo_app``) under the same driver; the
heap settled as a served worker's (frozen, its collector tuned: ``settle_worker_heap``).
Thread-CPU per request (load-independent), and a fixed count of requests for
``valgrind --tool=callgrind`` (instructions, the same on any machine)::

    python -m benchmarks.http.app_cost 2>/dev/null          # both apps, µs of thread CPU
    python -m benchmarks.http.app_cost --requests 2000 --app append --repeat 1 2>/dev/null
    python -m benchmarks.http.app_cost --app append --writer remote --concurrency 16 2>/dev/null
    valgrind --tool=callgrind --zero-before=getsid --dump-before=getpgid \\
        python -m benchmarks.http.app_cost --app append --requests 500 --repeat 1 --mark

``--mark`` brackets the timed requests with ``os.getsid``/``os.getpgid`` calls, so
callgrind's ``--zero-before``/``--dump-before`` count only them (``grep summary``, ÷ requests).

``--writer remote``: the app's writer is a real ``RemoteWriter`` (as a served worker's),
connected over the writer's wire to a stub writer in a process of its own that answers what
it has read, a batch at a time, with that receipt: the hand-off to the writer, its reader
thread and the loop's wake-ups count (the CPU of this process: ``process``; the event loop's
thread alone: the first figure). ``--concurrency N``: N requests in flight at once (the
replies of one batch settle together), else one after another.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import pickle
import statistics
import tempfile
import time
from concurrent.futures import Future
from multiprocessing.process import BaseProcess
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


def _stub_writer(address: str, key: bytes, receipt: LoggedEvent) -> None:
    """The writer process's stand-in: every request read so far answered at once, in one
    message, with ``receipt``; until its worker goes."""
    import msgspec  # noqa: PLC0415

    from ledger.checked_wire import TAG  # noqa: PLC0415
    from ledger.writer_wire import Listener, set_connection_timeouts  # noqa: PLC0415

    listener = Listener(address, key)
    connection = listener.accept()
    set_connection_timeouts(connection, 0, 0)  # the handshake's limits: not for requests
    try:
        while True:
            bodies = [connection.recv_bytes()]
            while connection.poll(0):
                bodies.append(connection.recv_bytes())
            numbers = [
                msgspec.msgpack.decode(b[1:])[0] if b[:1] == TAG else pickle.loads(b)[0]  # noqa: S301
                for b in bodies
            ]
            connection.send([(n, True, receipt) for n in numbers])
    except (EOFError, OSError):
        return


def _remote_writer(tmp: str, receipt: LoggedEvent) -> tuple[Any, BaseProcess]:
    from ledger.remote_writer import RemoteWriter  # noqa: PLC0415

    address, key = f"{tmp}/writer.sock", os.urandom(32)
    peer = multiprocessing.get_context("fork").Process(
        target=_stub_writer, args=(address, key, receipt), daemon=True
    )
    peer.start()
    for _ in range(500):
        if os.path.exists(address):
            break
        time.sleep(0.01)
    return RemoteWriter(address, key), peer


async def _drive(
    app: Any, plans: list[Planned], concurrency: int = 1
) -> tuple[float, float, list[int]]:
    """Every request, ``concurrency`` at a time; the thread CPU and the process CPU they
    took, and each reply's status."""
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

    started, process = time.thread_time(), time.process_time()
    for at in range(0, len(plans), concurrency):
        await asyncio.gather(*(one(p) for p in plans[at : at + concurrency]))
    return time.thread_time() - started, time.process_time() - process, statuses


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5, help="timed passes (median shown)")
    parser.add_argument("--app", choices=("both", "append", "echo"), default="both")
    parser.add_argument("--mark", action="store_true", help="getsid/getpgid around the timing")
    parser.add_argument("--writer", choices=("stub", "remote"), default="stub")
    parser.add_argument("--concurrency", type=int, default=1, help="requests in flight at once")
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
        writer, peer = (
            _remote_writer(tmp, receipt) if args.writer == "remote" else (StubWriter(receipt), None)
        )
        apps: dict[str, Any] = {}
        if args.app in ("both", "append"):
            apps["append"] = create_app(
                prepared.ledger,
                ServerConfig(key_rate=0, address_rate=0, json_logs=True),
                writer,
            )
        if args.app in ("both", "echo"):
            apps["echo"] = echo_app()
        # The heap as a served worker's once it is ready (``create_app_from_env``): its
        # start-up frozen out of the collector's walks, its collector tuned; a tree from
        # before ``settle_worker_heap`` froze it alone.
        from api.server import app as served  # noqa: PLC0415
        from ledger.long_lived import freeze_long_lived  # noqa: PLC0415

        getattr(served, "settle_worker_heap", freeze_long_lived)()
        # The access log goes where the app's logging was configured: stderr (send it to
        # /dev/null, as the commands above do; its cost counts either way).
        results = asyncio.run(_all(apps, warm, timed, args))
        writer.close()
        if peer is not None:
            peer.join(10)
        prepared.ledger.close()
    for name, (spent, processes, statuses) in results.items():
        codes = sorted(set(statuses))
        print(
            f"{name}: {statistics.median(spent) / len(timed) * 1e6:.1f} µs thread CPU per "
            f"request (median of {len(spent)} passes of {len(timed)}; "
            f"each {', '.join(f'{s / len(timed) * 1e6:.1f}' for s in spent)}); process "
            f"{statistics.median(processes) / len(timed) * 1e6:.1f} µs; statuses {codes}; "
            f"writer {args.writer}, concurrency {args.concurrency}"
        )


async def _all(
    apps: dict[str, Any], warm: list[Planned], timed: list[Planned], args: argparse.Namespace
) -> dict[str, tuple[list[float], list[float], list[int]]]:
    out: dict[str, tuple[list[float], list[float], list[int]]] = {}
    for name, app in apps.items():
        await _drive(app, warm, args.concurrency)
        spent: list[float] = []
        processes: list[float] = []
        statuses: list[int] = []
        for _ in range(args.repeat):
            if args.mark:
                os.getsid(0)
            used, process, codes = await _drive(app, timed, args.concurrency)
            if args.mark:
                os.getpgid(0)
            spent.append(used)
            processes.append(process)
            statuses.extend(codes)
        out[name] = (spent, processes, statuses)
    return out


if __name__ == "__main__":
    main()
