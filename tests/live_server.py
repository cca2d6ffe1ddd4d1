"""A real uvicorn server on a free loopback port, in a background thread, for tests."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn
from litestar import Litestar


@dataclass(frozen=True)
class LiveServer:
    url: str


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def live_server(app: Litestar) -> Iterator[LiveServer]:
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield LiveServer(f"http://127.0.0.1:{port}")
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def wait_for_health(
    base: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 90
) -> None:
    """Until a server process started elsewhere answers ``/health`` with 200; fails with
    its log if it exits or does not answer within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        assert process.poll() is None, f"serve exited:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"no /health in {timeout:g} s:\n{log.read_text()}"
        try:
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
