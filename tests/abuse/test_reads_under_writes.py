"""Reads are never starved by writes (issue 32 item 4): while fresh keys register themselves
and post attestations as fast as the server takes them, concurrent searches, run lookups, an
operation's page, the records feed and exports all answer 200, each consistent in itself.

Before, a read demanded that the views not move while it read, and gave up with a 503 after
ten tries: a few writes a second made 35 of 40 concurrent searches answer 503 after ~20 s.
A read is now one database snapshot (tests/projections/test_snapshot_reads.py shows a write
landing mid-read is not seen by it). Over real TCP, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from typing import Any

import httpx
import pytest
from abuse_support import SEED, Served, with_config
from live_server import live_server

from api.demo import COHORT_FILE
from api.server.app import create_app
from benchmarks.generate import synthetic_manifests
from domain.statements import Role
from ledger.signing.authoring import (
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
)
from ledger.signing.keys import SigningKey
from ledger.verify import VerificationPolicy, verify_bundle_lines

WRITERS = 6
READS_PER_KIND = 8
EXPORTS = 4  # each verified here, which costs more than the export
READERS = 40  # every read at once, as the 40 concurrent searches
# Runs added to the demo's group, so that a read takes as long as it does on a real ledger
# (tens of milliseconds, more while forty run at once): long enough for writes to land in it.
EXTRA_RUNS = 200
# No reply cache: every read below is computed, under the flood, from the views.
CONFIG = with_config(read_cache_bytes=0)
pytestmark = pytest.mark.slow


def _flood(base: str, run_name: str, stop: threading.Event, written: list[int]) -> None:
    """Mint a key, register it (self-signed attester), attest with it, read; again, until
    stopped."""
    with httpx.Client(base_url=base, timeout=60) as client:
        while not stop.is_set():
            key = SigningKey.generate()
            registration = key_registration_envelope(key.public, [Role.ATTESTER], key)
            assert client.post("/v1/keys", json=registration).status_code == 201
            note = attestation_envelope(SEED, run_name, key, type_="note", body="flood")
            assert client.post(f"/v1/runs/{SEED}/attestations", json=note).status_code == 201
            # And reads the groups, as a client does after writing: a read folds what is new
            # into the views first (on SQLite nothing else does), so they keep moving.
            assert client.get("/v1/groups").status_code == 200
            written.append(2)


def _grow(served: Served) -> None:
    """``EXTRA_RUNS`` more runs of the demo cohort's first workload (its comparison group)."""
    cohort = json.loads(resources.files("api.demo_data").joinpath(COHORT_FILE).read_text())
    ingester = served.home.key("ingester")
    envelopes = [
        ingestion_envelope(synthetic_manifests(cohort["cohort"][0], i), ingester)
        for i in range(EXTRA_RUNS)
    ]
    refused = [r for r in served.ledger.append_many(envelopes) if isinstance(r, Exception)]
    assert refused == []


def test_reads_answer_under_a_flood_of_writes_from_fresh_keys(served: Served) -> None:
    _grow(served)
    c = served.client
    seed = c.get(f"/v1/runs/{SEED}").json()
    [summary] = c.get("/v1/operations").json()  # the demo's one operation
    operation, group_runs = summary["operation"], summary["runs"]
    attested_before = seed["attestationCount"]
    grown = max(c.get("/v1/groups").json(), key=lambda g: int(g["runs"]))["comparisonKey"]
    records = c.get("/feeds/records.atom").text.count("<entry")
    assert records > 0

    def search(client: httpx.Client, i: int) -> None:
        reply = client.get("/v1/search", params={"q": operation, "perPage": 50 - i})
        assert reply.status_code == 200, reply.text[:300]
        groups = reply.json()["items"]
        assert seed["comparisonKey"] in {g["comparisonKey"] for g in groups}
        assert all(0 < g["matchingRuns"] <= g["runs"] for g in groups)

    def lookup(client: httpx.Client, i: int) -> None:
        reply = client.get(f"/v1/runs/{SEED[7 : 7 + 8 + i]}")  # a prefix: resolved by the views
        assert reply.status_code == 200, reply.text[:300]
        assert reply.json()["digest"] == SEED
        assert reply.json()["attestationCount"] >= attested_before

    def operation_page(client: httpx.Client, i: int) -> None:
        reply = client.get(f"/v1/operations/{operation}")
        assert reply.status_code == 200, reply.text[:300]
        assert sum(g["runs"] for g in reply.json()["groups"]) == group_runs

    def feed(client: httpx.Client, i: int) -> None:
        reply = client.get("/feeds/records.atom", params={"limit": 50 - i})
        assert reply.status_code == 200, reply.text[:300]
        assert reply.text.count("<entry") == records  # attestations make no record

    def export(client: httpx.Client, i: int) -> None:
        # The grown group's: one claim per run, all read in the export's one snapshot.
        reply = client.get("/v1/bundle", params={"cohort": grown})
        assert reply.status_code == 200, reply.text[:300]
        report = verify_bundle_lines(
            reply.text.splitlines(),
            VerificationPolicy(trust_root=served.ledger.trust_root),
            workers=1,
        )
        assert report.verified, report.findings

    reads: list[Callable[[httpx.Client, int], None]] = [
        search,
        lookup,
        operation_page,
        feed,
    ]
    with live_server(create_app(served.ledger, CONFIG)) as server:
        stop = threading.Event()
        written: list[int] = []
        flood = ThreadPoolExecutor(WRITERS)
        writers = [
            flood.submit(_flood, server.url, seed["name"], stop, written) for _ in range(WRITERS)
        ]
        try:
            while not written:  # the flood is under way before the reads start
                assert not any(w.done() for w in writers), [w.exception() for w in writers]
                threading.Event().wait(0.05)
            at_start = len(written)

            def one(job: tuple[Callable[[httpx.Client, int], None], int]) -> Any:
                with httpx.Client(base_url=server.url, timeout=120) as client:
                    job[0](client, job[1])

            jobs = [(read, i) for i in range(READS_PER_KIND) for read in reads]
            jobs += [(export, i) for i in range(EXPORTS)]
            with ThreadPoolExecutor(READERS) as pool:
                outcomes = [f.exception() for f in [pool.submit(one, job) for job in jobs]]
            during = len(written) - at_start
        finally:
            stop.set()
            flood.shutdown(wait=True)
        for writer in writers:
            assert writer.exception() is None
    failed = [
        f"{job[0].__name__}: {exc}"[:300] for job, exc in zip(jobs, outcomes, strict=True) if exc
    ]
    assert failed == [], f"{len(failed)} of {len(jobs)} reads failed, e.g. {failed[:3]}"
    assert during >= len(jobs) // 4  # writes kept landing while the reads ran
