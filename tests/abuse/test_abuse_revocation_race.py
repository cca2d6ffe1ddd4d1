"""A revocation racing writes across two API processes on one PostgreSQL database (issue 13 §9).

Two `kernelindex serve` processes share the database. Through one, an attester floods
attestations; through the other, its key is revoked mid-flood. Before the fix, events were
admitted *after* the revocation (the key was checked once per group, outside the commit),
and `audit` and `verify` then refused them: the ledger had acknowledged what its own
verifier rejects. Now the signer's key is read again under the event table's lock, so in log
order every admitted event of the key comes before its revocation — trial after trial.
"""

from __future__ import annotations

import io
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from api.demo import build_demo
from benchmarks.http.server import ServerProcess
from domain.statements import Role
from ledger.audit import audit_ledger
from ledger.history import key_history, run_history
from ledger.home import LedgerHome
from ledger.ids import principal_id, run_id
from ledger.signing.authoring import (
    attestation_envelope,
    key_registration_envelope,
    key_revocation_envelope,
)
from ledger.signing.keys import SigningKey
from ledger.verify import Outcome, VerificationPolicy, outcome_of, verify_bundle_lines
from projections.export import export_runs

SEED = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
NAME = "sol-submission-38823"
TRIALS = int(os.environ.get("KERNELINDEX_RACE_TRIALS", "6"))
FLOODERS = 4
PER_FLOODER = 25


def _flood(url: str, key: SigningKey, start: threading.Event, tag: str) -> list[int]:
    """Post attestations by ``key`` as fast as the server answers; the statuses."""
    statuses = []
    with httpx.Client(base_url=url, trust_env=False, timeout=60.0) as client:
        start.wait()
        for i in range(PER_FLOODER):
            envelope = attestation_envelope(SEED, NAME, key, type_="note", body=f"{tag} {i}")
            statuses.append(client.post(f"/v1/runs/{SEED}/attestations", json=envelope).status_code)
    return statuses


@pytest.mark.postgres
def test_no_event_is_admitted_after_its_keys_revocation(db_url: str, tmp_path: Path) -> None:
    if not db_url.startswith("postgresql"):
        pytest.skip("two server processes share one database only on PostgreSQL")
    home = LedgerHome.at(tmp_path / "home", db_url)
    ledger, _ = build_demo(home)
    admin = home.key("admin")
    env = {
        **os.environ,
        "KERNELINDEX_HOME": str(home.path),
        "KERNELINDEX_DB": db_url,
        "KERNELINDEX_KEY_PASSPHRASE": "",
    }
    command = [sys.executable, "-m", "api.cli"]
    args = ["serve", "--log-format", "console"]
    flooded, revoked = (
        ServerProcess(args, tmp_path / "a.log", command=command, env=env),
        ServerProcess(args, tmp_path / "b.log", command=command, env=env),
    )
    keys = [SigningKey.generate() for _ in range(TRIALS)]
    admitted_after = []
    refused = 0
    with flooded as a, revoked as b:
        for trial, key in enumerate(keys):
            ledger.append(key_registration_envelope(key.public, [Role.ATTESTER], key))
            start = threading.Event()
            with ThreadPoolExecutor(FLOODERS) as pool:
                floods = [
                    pool.submit(_flood, a.url, key, start, f"trial {trial} flooder {n}")
                    for n in range(FLOODERS)
                ]
                start.set()
                time.sleep(0.05 + 0.02 * trial)  # mid-flood, at a different moment each trial
                revocation = key_revocation_envelope(key.public, admin, reason=f"trial {trial}")
                reply = httpx.post(
                    f"{b.url}/v1/keys/{key.key_id}/revocations", json=revocation, timeout=60
                )
                assert reply.status_code == 201, reply.text
                revoked_at = int(reply.json()["position"])
                statuses = [s for f in floods for s in f.result()]
            assert set(statuses) <= {201, 403}, statuses
            refused += statuses.count(403)
            stored = ledger.stored_records(run_id(SEED), events=["Run.Attested"])
            for record in stored:
                signer = json.loads(record.state)["signer"]
                if signer == key.key_id and record.position > revoked_at:
                    admitted_after.append((trial, record.position, revoked_at))
    assert not admitted_after, f"admitted after their key's revocation: {admitted_after}"
    assert refused > 0, "no trial raced: every write landed before its revocation"
    # What the ledger acknowledged, its verifiers accept: audit, the run's and keys' histories.
    report = audit_ledger(home.open())
    assert report.verified, report.findings[:5]
    assert all(h.ok for h in run_history(ledger, SEED))
    for key in keys:
        history = key_history(ledger, key.key_id)
        assert [h.event for h in history] == ["Principal.Registered", "Principal.Revoked"]
        assert all(h.ok for h in history)
    assert ledger.event_count(principal_id(keys[0].key_id)) == 2
    # ... and the flooded run's bundle (every flooder's key events with it) verifies offline.
    out = io.StringIO()
    export_runs(ledger, out, [SEED])
    bundle = verify_bundle_lines(
        out.getvalue().splitlines(), VerificationPolicy(trust_root=ledger.trust_root), workers=1
    )
    assert outcome_of(bundle) is Outcome.VERIFIED, bundle.findings[:5]
    assert bundle.passed["complete"] >= TRIALS
    ledger.close()
