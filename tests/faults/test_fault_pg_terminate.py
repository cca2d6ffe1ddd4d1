"""PostgreSQL ends the server's connections (``pg_terminate_backend``: a restart, a failover,
an operator) between requests and while requests are in flight.

A request caught by it gets its answer or a clean 503 problem+json (``store-unavailable``),
never a hang, a 500 or a stack trace; a refused write stored nothing; and the very next
requests succeed on the same server process, which reconnects by itself.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fault_kit import assert_store_whole, serving
from sqlalchemy import create_engine, text

from benchmarks.http.acknowledged import verify_acknowledged
from benchmarks.http.load import LoadResult, run_load
from benchmarks.http.workload import Prepared, plan_appends, prepare_ledger, split
from ledger.signing.authoring import attestation_envelope

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("shared")]

KILLS = 40  # connection kills while the load runs (it may end sooner)


def terminate_server_connections(db_url: str) -> int:
    """End every other session on the ledger's database; how many there were."""
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            ended = conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            ).all()
        return len(ended)
    finally:
        engine.dispose()


def _reads_and_a_write(client: httpx.Client, prepared: Prepared, note: str) -> list[int]:
    digest, name = prepared.runs[0]
    envelope = attestation_envelope(
        digest, name, prepared.attesters[0], type_="note", body=f"after terminate: {note}"
    )
    replies = [
        client.get(f"/v1/runs/{digest}"),
        client.get(f"/v1/runs/{digest}/history"),
        client.post(f"/v1/runs/{digest}/attestations", json=envelope),
        client.get("/v1/log/checkpoint"),
    ]
    for reply in replies:
        assert reply.status_code < 400, (reply.request.url, reply.status_code, reply.text[:500])
    return [r.status_code for r in replies]


@pytest.fixture
def pg_url(db_url: str) -> str:
    if not db_url.startswith("postgresql"):
        pytest.skip("pg_terminate_backend is PostgreSQL's")
    return db_url


@pytest.mark.slow
def test_terminated_connections_between_and_during_requests(pg_url: str, tmp_path: Path) -> None:
    prepared = prepare_ledger(tmp_path / "home", pg_url, runs=2, attesters=4)
    prepared.ledger.close()
    plans = plan_appends(prepared.runs, prepared.attesters, split(600, 4), "terminate")
    with (
        serving(prepared.home, tmp_path / "server.log") as server,
        httpx.Client(base_url=server.url, trust_env=False, timeout=30) as client,
    ):
        _reads_and_a_write(client, prepared, "warm")  # the pool holds live connections now
        # Between requests: every pooled connection is dead when the next request comes.
        assert terminate_server_connections(pg_url) >= 1
        _reads_and_a_write(client, prepared, "between")

        # In flight: connections end under a running write load (and reads beside it).
        outcome: dict[str, Any] = {}

        def load() -> None:
            try:
                outcome["load"] = run_load(server, plans, 0, "raw")
            except BaseException as exc:  # reported below
                outcome["load"] = exc

        clients = threading.Thread(target=load)
        clients.start()
        terminated = 0
        reads: list[httpx.Response] = []
        try:
            # Many kills, short apart, while the clients run: a rare path (a rollback on a
            # connection ended mid-statement, say) shows up in one run, not one run in ten.
            while clients.is_alive() and len(reads) < KILLS:
                time.sleep(0.05)
                terminated += terminate_server_connections(pg_url)
                reads.append(client.get(f"/v1/runs/{prepared.runs[1][0]}"))
        finally:
            clients.join(timeout=120)
        result = outcome.get("load")
        assert isinstance(result, LoadResult), f"{result!r}\n{server.tail()}"
        # And straight after, with no restart: the same process answers.
        _reads_and_a_write(client, prepared, "after")
        log = server.tail(1_000_000)  # the whole log

    replies = result.replies
    refused = [r for r in replies if r.status != 201]
    for reply in refused:  # only clean, typed refusals: no hang (status 0), no 500
        assert reply.status == 503, (reply.status, reply.body[:300])
        problem = json.loads(reply.body)
        assert problem["code"] == "store-unavailable", problem
    for reply in (r for r in reads if r.status_code != 200):
        assert reply.status_code == 503, reply.text[:300]
        assert reply.headers["content-type"].startswith("application/problem+json")
        assert reply.json()["code"] == "store-unavailable"
    assert "Traceback" not in log and "unhandled_error" not in log, log[-3000:]
    # Past the banner, the log is one JSON object a line: every library's record as well.
    lines = [line for line in log.splitlines() if line.strip()]
    body = [line for line in lines if not line.startswith(("Serving the ledger", "  listening"))]
    for line in body:
        assert isinstance(json.loads(line), dict), line

    ledger = prepared.home.open()
    try:
        report = verify_acknowledged(ledger, replies)
    finally:
        ledger.close()
    acknowledged = len(replies) - len(refused)
    assert report["present"] == report["proofsVerified"] == acknowledged, report
    assert report["lost"] == report["mismatched"] == 0 and report["dense"], report
    assert report["unacknowledgedButStored"] == 0, "a refused write was stored"
    assert_store_whole(prepared.home)
    print(
        f"\n[postgresql] {terminated} connections terminated under load: {acknowledged} "
        f"appends acknowledged, {len(refused)} refused with 503 store-unavailable; reads "
        f"{[r.status_code for r in reads]}"
    )
