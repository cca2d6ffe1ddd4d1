"""Issue 32 item 5, "a dead writer is never noticed": `kernelindex serve` on SQLite hands every
write to the ledger's one writer process (with --workers 2 or without). SIGKILL that process
alone, while a few clients write in a loop, and the server must notice: `/health` stops
answering 200 while the writer is down, the writer is started again and writes resume; every
write acknowledged (before, during or after the outage) is in the log, the log is dense and
`kernelindex audit` says VERIFIED. A writer that cannot be started again ends `serve`,
non-zero, saying why.

Clients send each envelope until it is acknowledged: a write refused meanwhile (503, or no
reply) is sent again, which is safe (a stored envelope answers 200 with its original receipt).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from fault_kit import cli, cli_command, cli_env, log_shape, wait_for_events

from benchmarks.http.acknowledged import verify_acknowledged
from benchmarks.http.cpu import descendants
from benchmarks.http.load import Reply
from benchmarks.http.server import ServerProcess
from benchmarks.http.workload import Planned, plan_appends, prepare_ledger, split
from ledger.home import LedgerHome

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/net/unix").exists(), reason="finds the writer in /proc"),
]

CLIENTS = 4
APPENDS = 160  # in all: the kill lands after KILL_AFTER of them, with plenty still to send
KILL_AFTER = 40
RESUME_S = 90.0  # how long a client sends one envelope again before it gives up (wide)


def _writer_pid(server: ServerProcess) -> int | None:
    """The server's process that holds the writer's Unix socket (its listener and accepted
    connections are named by its path; the workers' ends are not): found in /proc, not
    from what `serve` prints."""
    named = {
        f"socket:[{fields[6]}]"
        for line in Path("/proc/net/unix").read_text().splitlines()[1:]
        if len(fields := line.split()) >= 8 and fields[7].endswith("/writer.sock")
    }
    assert server.proc is not None
    for pid in descendants(server.proc.pid):
        try:
            links = {os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()}
        except OSError:
            continue
        if links & named:
            return pid
    return None


@contextmanager
def _serving(home: LedgerHome, log: Path, workers: int = 2) -> Iterator[ServerProcess]:
    """`kernelindex serve --workers N` (console logs: the launcher waits for every worker)."""
    args = ["serve", "--home", str(home.path), "--db", home.db_url, "--workers", str(workers)]
    server = ServerProcess(
        [*args, "--log-format", "console"],
        log,
        workers=workers,
        command=cli_command(),
        env=cli_env(),
    )
    try:
        yield server.__enter__()
    finally:
        server.kill()  # whatever the test did: no server outlives it


class _Writes:
    """Clients that each send their envelopes in order, each until it is acknowledged."""

    def __init__(self, url: str, plans: list[list[Planned]]) -> None:
        self.url = url
        self.acknowledged: list[tuple[float, int, Reply]] = []  # (when, status, reply)
        self.refused: list[tuple[float, int, bytes]] = []  # (when, status, body)
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._client, args=(p,)) for p in plans]

    def __enter__(self) -> _Writes:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for thread in self._threads:
            thread.join(RESUME_S + 60)

    def _client(self, plan: list[Planned]) -> None:
        with httpx.Client(base_url=self.url, timeout=60, trust_env=False) as http:
            for planned in plan:
                give_up_at = time.monotonic() + RESUME_S
                while True:
                    started = time.monotonic()
                    try:
                        reply = http.post(
                            planned.path,
                            content=planned.body,
                            headers={"content-type": "application/json"},
                        )
                        status, body = reply.status_code, reply.content
                    except httpx.HTTPError:
                        status, body = 0, b""
                    with self._lock:
                        if status in (200, 201):
                            # 200 is a duplicate: the original's receipt, sent again after
                            # a refusal; acknowledged all the same (checked as a 201 is).
                            done = Reply(planned, 201, time.monotonic() - started, body, False)
                            self.acknowledged.append((time.monotonic(), status, done))
                        else:
                            self.refused.append((time.monotonic(), status, body))
                    if status in (200, 201):
                        break
                    if time.monotonic() > give_up_at:
                        return  # writes never resumed: the test says so
                    time.sleep(0.1)


class _HealthProbe:
    """GET /health every few milliseconds, as a load balancer's probe would."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.seen: list[tuple[float, int, bytes]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._probe)

    def __enter__(self) -> _HealthProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _probe(self) -> None:
        with httpx.Client(timeout=10, trust_env=False) as http:
            while not self._stop.wait(0.02):
                try:
                    reply = http.get(f"{self.url}/health")
                    self.seen.append((time.monotonic(), reply.status_code, reply.content))
                except httpx.HTTPError:
                    self.seen.append((time.monotonic(), 0, b""))


# Two HTTP worker processes, and the single-process server (its HTTP side and the writer's
# watcher in one process): the writer is a process of its own in both.
@pytest.mark.parametrize("workers", [2, 1])
def test_a_writer_killed_mid_writes_is_started_again_losing_nothing(
    tmp_path: Path, workers: int
) -> None:
    home = LedgerHome.at(tmp_path / "home")
    prepared = prepare_ledger(home.path, home.db_url, runs=2, attesters=CLIENTS)
    prepared.ledger.close()
    before = prepared.events
    plans = plan_appends(prepared.runs, prepared.attesters, split(APPENDS, CLIENTS), "writer")
    log = tmp_path / "server.log"

    with _serving(home, log, workers) as server:
        killed = _writer_pid(server)
        assert killed is not None, server.tail()
        with _HealthProbe(server.url) as health, _Writes(server.url, plans) as writes:
            reached = wait_for_events(home.db_url, before + KILL_AFTER)
            killed_at = time.monotonic()
            os.kill(killed, signal.SIGKILL)  # the writer alone: serve and its workers run on
        after_writes = httpx.get(f"{server.url}/health", timeout=10, trust_env=False)
        restarted = _writer_pid(server)
        server.stop()
        # Stopped by SIGTERM: uvicorn's single-process server re-raises it once shut down.
        assert server.proc is not None, server.tail()
        assert server.proc.returncode in (0, -signal.SIGTERM), server.tail()
    text = log.read_text(errors="replace")

    assert reached >= before + KILL_AFTER, f"only {reached - before} writes before the kill"
    acked_before = sum(when < killed_at for when, _, _ in writes.acknowledged)
    assert 0 < acked_before < APPENDS, "the kill did not land mid-writes"
    # Writes resumed: every envelope was acknowledged in the end, by a new writer process.
    acknowledged = [reply for _, _, reply in writes.acknowledged]
    unanswered = APPENDS - len(acknowledged)
    refusals = sorted({status for _, status, _ in writes.refused})
    assert unanswered == 0, (
        f"{unanswered} writes never acknowledged after the writer was killed (refused: "
        f"{refusals}); health said {sorted({s for _, s, _ in health.seen})}\n{text[-3000:]}"
    )
    assert restarted is not None and restarted != killed
    assert set(refusals) <= {0, 503}, writes.refused[:3]  # refused as unavailable, never 500
    # /health reported the outage: not 200 after the kill, until the writer ran again.
    outage = [(status, body) for when, status, body in health.seen if when > killed_at]
    down = [body for status, body in outage if status == 503]
    assert down, f"/health never reported the dead writer: {sorted({s for s, _ in outage})}"
    assert json.loads(down[0])["code"] == "unavailable", down[0]
    assert outage[-1][0] == 200 and after_writes.status_code == 200, after_writes.text
    assert "ended unasked (killed by SIGKILL)" in text and "runs again" in text, text[-3000:]

    # Nothing acknowledged is lost: each receipt's event is in the log, as sent, with a proof
    # that verifies against the log recomputed from the stored events; the log is dense.
    ledger = home.open()
    try:
        report = verify_acknowledged(ledger, acknowledged)
        shape = log_shape(ledger)
    finally:
        ledger.close()
    assert report["acknowledged"] == report["present"] == APPENDS, report
    assert report["lost"] == report["mismatched"] == report["duplicatePositions"] == 0, report
    assert report["proofsVerified"] == report["rootsMatchRecomputedLog"] == APPENDS, report
    assert report["dense"] and report["storedLeafHashMismatches"] == 0, report
    assert shape["dense"] and shape["unsequenced"] == 0, shape
    assert shape["events"] == before + APPENDS, shape  # each envelope stored once
    audit = cli("audit", "--home", str(home.path), "--db", home.db_url)
    assert audit.returncode == 0 and "VERIFIED" in audit.stdout, audit.stdout + audit.stderr
    print(
        f"\nwriter {killed} killed after {acked_before} acknowledged; restarted as {restarted}; "
        f"{len(writes.refused)} refusals meanwhile ({refusals}), /health 503 "
        f"{len(down)} times; {APPENDS} acknowledged, 0 lost, audit VERIFIED"
    )


@pytest.mark.parametrize("workers", [2, 1])
def test_a_writer_that_cannot_be_started_again_ends_serve_saying_why(
    tmp_path: Path, workers: int
) -> None:
    """The writer's home is broken under it (its trust root gone), then the writer is
    killed: every start again fails, so `serve` exits non-zero, the reason on stderr,
    rather than refuse every write behind a server that looks up."""
    home = LedgerHome.at(tmp_path / "home")
    home.initialise(origin="test.kernelindex/writer-kill").close()
    log = tmp_path / "server.log"
    with _serving(home, log, workers) as server:
        killed = _writer_pid(server)
        assert killed is not None, server.tail()
        home.trust_root_path.rename(tmp_path / "trust-root.json.moved")
        os.kill(killed, signal.SIGKILL)
        assert server.proc is not None
        try:
            code: int | None = server.proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            code = None
    text = log.read_text(errors="replace")
    assert code == 1, f"serve did not exit non-zero ({code}):\n{text[-3000:]}"
    assert "ended unasked (killed by SIGKILL)" in text, text[-3000:]
    assert "could not be kept running" in text and "did not start" in text, text[-3000:]
