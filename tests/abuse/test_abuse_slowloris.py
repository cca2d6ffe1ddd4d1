"""Slow-loris against a real uvicorn: clients that send a request a byte at a time, or stall.

Findings (uvicorn 0.3x-0.5x, h11): uvicorn bounds neither the time to send request headers
nor the time to send a body; its keep-alive timeout only starts after a response. So a
stalled request is held forever. The server stays responsive meanwhile (asyncio: a held
connection costs a socket, not a worker), but the held sockets and requests pile up without
bound. The fixes, tested here: ``HeaderDeadlineProtocol`` (uvicorn protocol, headers) and
``BodyDeadlineMiddleware`` (in the app, ``ServerConfig.body_timeout``): 408 and close.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from abuse_support import SEED, Served, event_count, serve, with_config
from litestar import Litestar
from live_server import free_port

from api.server.app import create_app
from api.server.config import ServerConfig
from api.server.http_protocol import HeaderDeadlineProtocol
from ledger.home import LedgerHome

ATTEST = f"/v1/runs/{SEED}/attestations"
HEADER_TIMEOUT = 1.0
BODY_TIMEOUT = 1.0


class QuickHeaderDeadline(HeaderDeadlineProtocol):
    header_timeout = HEADER_TIMEOUT


@contextmanager
def uvicorn_server(app: Litestar, protocol: Any = "h11") -> Iterator[tuple[str, int]]:
    """uvicorn on a free loopback port in a thread, with the given HTTP protocol class."""
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="error", access_log=False, http=protocol
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield "127.0.0.1", port
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def demo(
    tmp_path: Path, config: ServerConfig, protocol: Any = "h11"
) -> Iterator[tuple[Served, tuple[str, int]]]:
    # The deadlines are in the HTTP layer and never touch the store: SQLite only.
    for served in serve(LedgerHome.at(tmp_path / "home"), config):
        with uvicorn_server(create_app(served.ledger, config), protocol) as address:
            yield served, address


def read_until_closed(sock: socket.socket, limit: float) -> tuple[bytes, bool, float]:
    """(bytes received, whether the server closed the connection, seconds waited)."""
    started = time.monotonic()
    data = b""
    sock.settimeout(0.05)
    while time.monotonic() - started < limit:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return data, True, time.monotonic() - started
        if not chunk:
            return data, True, time.monotonic() - started
        data += chunk
    return data, False, time.monotonic() - started


class Loris(threading.Thread):
    """Sends ``message`` a byte every ``interval`` seconds (stops at the end or when cut)."""

    def __init__(
        self, address: tuple[str, int], message: bytes, interval: float, prefix: bytes = b""
    ) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection(address)
        self.sock.sendall(prefix)  # sent at once (e.g. the headers of a slow body)
        self.message, self.interval, self.prefix = message, interval, prefix
        self.sent = 0
        self.cut_after: float | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        started = time.monotonic()
        for byte in self.message:
            if self.stop.wait(self.interval):
                return
            try:
                self.sock.sendall(bytes([byte]))
            except OSError:
                self.cut_after = time.monotonic() - started
                return
            self.sent += 1

    def close(self) -> None:
        self.stop.set()
        self.join(timeout=5)
        self.sock.close()


def request_head(path: str = "/health", method: str = "GET", extra: str = "") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}\r\n".encode()


def post_head(length: int) -> bytes:
    return request_head(
        ATTEST, "POST", f"Content-Type: application/json\r\nContent-Length: {length}\r\n"
    )


def latencies(address: tuple[str, int], count: int) -> list[float]:
    """Seconds per request of a well-behaved client, each on a fresh connection."""
    url = f"http://{address[0]}:{address[1]}"
    found = []
    for _ in range(count):
        started = time.monotonic()
        reply = httpx.get(f"{url}/health", timeout=5)
        assert reply.status_code == 200
        found.append(time.monotonic() - started)
    return found


def test_slow_clients_do_not_starve_others_and_are_cut_off(tmp_path: Path) -> None:
    config = with_config(body_timeout=BODY_TIMEOUT)
    with demo(tmp_path, config, QuickHeaderDeadline) as (served, address):
        stored = event_count(served.ledger)
        body = b'{"payloadType":"x","payload":"","signatures":[]}'
        lorises = [
            Loris(address, request_head(extra="X-Slow: " + "a" * 200 + "\r\n"), 0.05)
            for _ in range(10)
        ]
        lorises += [Loris(address, body, 0.05, prefix=post_head(len(body))) for _ in range(10)]
        started = time.monotonic()
        for loris in lorises:
            loris.start()
        # Meanwhile a well-behaved client is answered as fast as ever.
        times = latencies(address, 20)
        print(f"\nwith 20 slow-loris clients: max latency {max(times) * 1000:.0f} ms")
        assert max(times) < 1.0, times
        # Every slow client is cut off: headers past their deadline, bodies past theirs.
        for loris in lorises:
            data, closed, _ = read_until_closed(loris.sock, HEADER_TIMEOUT + BODY_TIMEOUT + 3)
            assert closed, data
            assert data.startswith(b"HTTP/1.1 408 "), data[:200]
            problem = json.loads(data.split(b"\r\n\r\n", 1)[1])
            assert problem["code"] == "request-timeout"
            # Body lorises reached the app: their 408 comes from it, with a request id.
            assert (problem.get("requestId") is not None) == (loris.prefix != b"")
        elapsed = time.monotonic() - started
        print(f"all 20 cut off with 408 after {elapsed:.1f} s")
        assert elapsed < HEADER_TIMEOUT + BODY_TIMEOUT + 3
        for loris in lorises:
            loris.close()
        assert event_count(served.ledger) == stored
        assert max(latencies(address, 3)) < 1.0


def test_a_stalled_connection_or_body_answers_408_and_closes(tmp_path: Path) -> None:
    config = with_config(body_timeout=BODY_TIMEOUT)
    with demo(tmp_path, config, QuickHeaderDeadline) as (served, address):
        stored = event_count(served.ledger)
        # Connects and sends nothing at all.
        with socket.create_connection(address) as idle:
            data, closed, waited = read_until_closed(idle, 5)
        assert closed and data.startswith(b"HTTP/1.1 408 "), data
        assert HEADER_TIMEOUT - 0.1 <= waited < HEADER_TIMEOUT + 1.5
        # Half the headers, then silence.
        with socket.create_connection(address) as half:
            half.sendall(request_head()[:10])
            data, closed, waited = read_until_closed(half, 5)
        assert closed and data.startswith(b"HTTP/1.1 408 "), data
        # Headers complete, half the body, then silence: the app's deadline answers.
        with socket.create_connection(address) as stalled:
            stalled.sendall(post_head(1000) + b'{"payloadType":')
            data, closed, waited = read_until_closed(stalled, 5)
        head, _, payload = data.partition(b"\r\n\r\n")
        assert closed and head.startswith(b"HTTP/1.1 408 "), data
        assert b"application/problem+json" in head and b"x-request-id" in head.lower()
        problem = json.loads(payload)
        assert problem["code"] == "request-timeout" and problem["status"] == 408
        assert BODY_TIMEOUT - 0.1 <= waited < BODY_TIMEOUT + 1.5
        # A slow but steady request inside both deadlines is served normally.
        with socket.create_connection(address) as steady:
            for chunk in (request_head()[:20], request_head()[20:]):
                steady.sendall(chunk)
                time.sleep(0.3)
            data, _, _ = read_until_closed(steady, 1)
        assert data.startswith(b"HTTP/1.1 200 "), data[:200]
        # Keep-alive: a second request on the same connection gets its own header deadline,
        # counted from its first bytes (the connection's timer, set for the first request,
        # wakes 0.8 s after them and waits on: a 408 then would be early).
        with socket.create_connection(address) as kept:
            kept.sendall(request_head())
            time.sleep(0.2)
            kept.sendall(request_head()[:5])
            data, closed, waited = read_until_closed(kept, 5)
        assert data.startswith(b"HTTP/1.1 200 ") and b"HTTP/1.1 408 " in data and closed
        assert HEADER_TIMEOUT - 0.1 <= waited < HEADER_TIMEOUT + 1.5
        assert event_count(served.ledger) == stored


@pytest.mark.slow
def test_plain_uvicorn_holds_a_stalled_request_forever(tmp_path: Path) -> None:
    """The finding, measured: without the deadlines nothing ever cuts a stalled request."""
    hold = 8.0  # past uvicorn's 5 s keep-alive timeout, which does not apply mid-request
    with (
        demo(tmp_path, with_config(body_timeout=0), "h11") as (_, address),
        socket.create_connection(address) as headers,
        socket.create_connection(address) as body,
    ):
        headers.sendall(request_head()[:10])
        body.sendall(post_head(1000) + b"{")
        data, closed, waited = read_until_closed(headers, hold)
        assert not closed and data == b"", (data, waited)
        data, closed, _ = read_until_closed(body, 0.5)
        assert not closed and data == b""
        print(f"\nplain uvicorn: stalled headers and body still held after {waited:.1f} s")
