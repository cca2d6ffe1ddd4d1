"""A GET never writes (issue 33). The server's views are folded by a thread of its own, on its
own connections; a GET of a run page, a run record or a leaderboard right after a write waits
for them (a few seconds at most) and sees the write, while the serving engine sends no
INSERT, UPDATE or DELETE, no ``BEGIN IMMEDIATE`` (SQLite's write lock) and no PostgreSQL
lock. On both backends: with the writer thread in the serving process (each PostgreSQL
worker's), and through the ledger's writer process (``kernelindex serve`` on SQLite)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import TestClient
from served_app import TEST_CONFIG, Served
from sqlalchemy.engine import Engine

from api.demo import COHORT_FILE, _data, build_demo
from api.server.app import create_app
from domain.statements import Role
from ledger.home import LedgerHome
from ledger.signing.authoring import (
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
)
from ledger.signing.keys import SigningKey
from ledger.writer_process import RemoteWriter, WriterProcess
from tests.ledger.statement_count import statements_sent, writing

SEED = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
SEED_NAME = "sol-submission-38823"
GROUP_FIRST = "sol-submission-21613"  # 1.499 ms: the seed group's #1


@pytest.fixture
def behind_writer_process(db_url: str, tmp_path: Path) -> Iterator[Served]:
    """A worker as ``kernelindex serve`` makes one on SQLite: the ledger opened to read,
    every write handed to the ledger's writer process."""
    home = LedgerHome.at(tmp_path / "home", db_url)
    ledger, seed = build_demo(home)
    ledger.close()
    process = WriterProcess(home.path, home.db_url).start()
    reader = home.open(read_only=True)
    try:
        app = create_app(reader, TEST_CONFIG, RemoteWriter(process.address, process.key))
        with TestClient(app) as client:
            yield Served(home, reader, seed, app, client)
    finally:
        reader.close()
        process.stop()


def _faster_run(served: Served, name: str, mean_ns: int) -> str:
    """Post a run in the seed's group (the #1's manifests, renamed, with its own mean)."""
    cohort = _data(COHORT_FILE)["cohort"]
    manifests = copy.deepcopy(
        next(m for m in cohort if m["run"]["metadata"]["name"] == GROUP_FIRST)
    )
    manifests["run"]["metadata"]["name"] = name
    manifests["run"]["spec"]["timing"]["latencyNs"]["mean"] = mean_ns
    envelope = ingestion_envelope(manifests, served.home.key("ingester"))
    reply = served.client.post("/v1/runs", json=envelope)
    assert reply.status_code == 201, reply.text
    return str(reply.json()["subjectDigest"])


def _get(client: TestClient[Litestar], engine: Engine, path: str) -> tuple[Any, list[str]]:
    with statements_sent(engine) as sent:
        reply = client.get(path)
    assert reply.status_code == 200, (path, reply.text[:500])
    assert sent, "the read read nothing"
    return reply, sent


def _reads_see_writes_and_write_nothing(served: Served) -> None:
    client, engine = served.client, served.ledger.store.engine
    key = client.get(f"/v1/runs/{SEED}").json()["comparisonKey"]
    attester = SigningKey.generate()
    registered = client.post(
        "/v1/keys", json=key_registration_envelope(attester.public, [Role.ATTESTER], attester)
    )
    assert registered.status_code == 201, registered.text

    def attest(body: str) -> None:
        note = attestation_envelope(SEED, SEED_NAME, attester, type_="note", body=body)
        reply = client.post(f"/v1/runs/{SEED}/attestations", json=note)
        assert reply.status_code == 201, reply.text

    attest("seen by the run page")
    page, sent = _get(client, engine, f"/runs/{SEED}")
    assert "seen by the run page" in page.text
    assert writing(sent) == []

    counted = client.get(f"/v1/runs/{SEED}").json()["attestationCount"]
    attest("seen by the run record")
    record, sent = _get(client, engine, f"/v1/runs/{SEED}")
    assert record.json()["attestationCount"] == counted + 1
    assert "seen by the run record" in {a["body"] for a in record.json()["notes"]}
    assert writing(sent) == []

    faster = _faster_run(served, "faster-than-every-run", 1_000_000)
    board, sent = _get(client, engine, f"/v1/leaderboards/{key}")
    assert board.json()["entries"][0]["run"] == faster
    assert writing(sent) == []


def test_a_get_after_a_write_writes_nothing_and_sees_it(served: Served) -> None:
    _reads_see_writes_and_write_nothing(served)


def test_through_the_writer_process_too(behind_writer_process: Served) -> None:
    _reads_see_writes_and_write_nothing(behind_writer_process)
