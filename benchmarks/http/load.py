"""Closed-loop clients on keep-alive connections (a raw HTTP/1.1 client and httpx), and the summary
of what they were answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from benchmarks.http.config import HOST, TIMED_HEADER
from benchmarks.http.cpu import CpuWindow
from benchmarks.http.server import ServerProcess
from benchmarks.http.workload import Planned, latency_summary

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


def pooled(results: list[LoadResult]) -> LoadResult:
    """Several timed phases of the same clients as one: every reply, the walls summed, the
    CPU summed and the machine's busy share weighted by wall. A rate over the pool is
    (201s over all phases) / (their walls): the same definition as one phase's, over more
    requests, so one scheduling hiccup weighs less and drift between phases averages out."""
    wall = sum(r.wall for r in results)
    cpu = CpuWindow([])
    cpu.server_s = sum(r.cpu.server_s for r in results)
    cpu.client_s = sum(r.cpu.client_s for r in results)
    cpu.database_s = sum(r.cpu.database_s for r in results)
    cpu.machine_busy = sum(r.cpu.machine_busy * r.wall for r in results) / wall if wall else 0.0
    return LoadResult([reply for r in results for reply in r.replies], wall, cpu)


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
