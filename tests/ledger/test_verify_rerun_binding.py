"""Issue 32, offline: a bundle whose rerun measured code other than the run's, or code the
bundle does not carry, or was signed by a key registered for a test backend, does not prove
the run verified, whatever its claim says.

Each bundle is forged past admission the only way a signed bundle can be: by a ledger that
admitted what today's admission refuses (an older ledger, or an operator who skipped the
check: here, admission's check switched off while the envelopes are appended), then exported
with the log key, its claim saying "verified".
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete

import ledger.admission as admission
from domain.evidence import EvidenceLevel
from domain.importers.records import rerun_artifacts
from domain.rerun_binding import DeviceClass
from domain.statements import PredicateType, Role
from domain.timestamps import format_time
from ledger.application import Ledger
from ledger.signing.authoring import (
    key_registration_envelope,
    rerun_claim_envelope,
    rerun_request_envelope,
)
from ledger.signing.keys import SigningKey
from ledger.store.artifacts import artifacts
from ledger.verification_report import Report
from ledger.verify import Expectation, Outcome, VerificationPolicy, outcome_of, verify_bundle_lines
from projections.export import export_runs
from tests.projections.projection_world import (
    B200,
    MANIFESTS,
    NAMES,
    RUN_21613,
    SEED,
    SM100,
    Job,
    World,
    rerun_result,
)
from tests.unchecked_signing import signed_as_given, unchecked_rerun_envelope

Records = list[dict[str, Any]]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    # Offline verification is the subject, not storage: one backend is enough.
    w = World.create(f"sqlite:///{tmp_path / 'ledger.db'}")
    w.ingest()
    yield w
    w.close()


def _bundle(w: World, claimed: str | None = "verified") -> Records:
    """The seed's bundle as its ledger exports it, its claim saying ``claimed``."""
    out = io.StringIO()
    exporter = Ledger(w.db_url, w.root, clock=w.clock, log_key=w.keys.log)
    export_runs(exporter, out, [SEED])
    exporter.close()
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    for record in records:
        if claimed is not None and record["type"] == "claim" and record["run"] == SEED:
            record["evidence"]["level"] = claimed
    return records


def _verify(w: World, records: Records, min_level: EvidenceLevel | None = None) -> Report:
    lines = [json.dumps(r) + "\n" for r in records]
    expect = Expectation(SEED, min_level=min_level) if min_level is not None else None
    policy = VerificationPolicy(trust_root=w.root, expect=expect)
    return verify_bundle_lines(lines, policy, workers=1)


def _failed(report: Report, check: str, words: str) -> None:
    assert outcome_of(report) is Outcome.FAILED, report.to_json()
    reasons = [f.reason for f in report.findings if f.check == check]
    assert any(words in r for r in reasons), report.to_json()


def _request(w: World, solution: str, workload: str) -> Job:
    job = Job(SEED, "12345678-1234-4234-8234-123456789abc", "ab" * 32, B200, SM100)
    w.append(
        rerun_request_envelope(
            SEED,
            NAMES[SEED],
            w.keys.admin,
            artifact_digest=solution,
            workload_digest=workload,
            product=B200,
            architecture=SM100,
            expires_at=w.clock.now.replace(year=w.clock.now.year + 1),
            job_id=job.job_id,
            nonce=job.nonce,
            now=w.clock.now,
        )
    )
    return job


def _measure(w: World, job: Job, agent: SigningKey) -> None:
    """A claim and a passing cuda result on the B200, as a GPU agent signs them."""
    device = {"product": B200, "architecture": SM100, "gpuUuidHash": "c" * 64, "backend": "cuda"}
    w.append(
        rerun_claim_envelope(
            SEED, NAMES[SEED], agent, job_id=job.job_id, device=device, now=w.clock.now
        )
    )
    result = rerun_result(job, gpu_hash="c" * 64)
    w.append(unchecked_rerun_envelope(SEED, NAMES[SEED], agent, result=result, now=w.clock.now))


def test_an_honest_bound_rerun_verifies_offline(world: World) -> None:
    """The control: the run's own, stored code, measured by a GPU key, proves verified."""
    code = rerun_artifacts(MANIFESTS[SEED])
    assert code.solution is not None and code.workload is not None
    _measure(world, _request(world, code.solution, code.workload), world.keys.agents[0])
    report = _verify(world, _bundle(world), EvidenceLevel.VERIFIED)
    assert outcome_of(report) is Outcome.VERIFIED, report.to_json()


def test_a_forged_bundle_with_another_runs_code_does_not_verify_the_run(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    foreign = rerun_artifacts(MANIFESTS[RUN_21613])
    own = rerun_artifacts(MANIFESTS[SEED])
    assert foreign.solution is not None and own.workload is not None
    monkeypatch.setattr(admission, "check_job_code", lambda *_, **__: None)
    job = _request(world, foreign.solution, own.workload)
    _measure(world, job, world.keys.agents[0])
    monkeypatch.undo()
    report = _verify(world, _bundle(world), EvidenceLevel.VERIFIED)
    _failed(report, "expectation", "below the verified you asked for")
    _failed(report, "claim", "claims evidence level 'verified'")
    # Nor do the ledger's own views count it: its unforged claim says so.
    assert _claimed_level(world) == "reported"


def test_a_forged_bundle_whose_code_the_bundle_does_not_carry_does_not_verify(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run names the code, but the ledger never held it: the bundle cannot carry it."""
    own = rerun_artifacts(MANIFESTS[SEED])
    assert own.solution is not None and own.workload is not None
    with world.ledger.store.transaction(commit=True) as session:
        session.execute(delete(artifacts).where(artifacts.c.digest == own.solution))
    monkeypatch.setattr(admission, "check_job_code", lambda *_, **__: None)
    _measure(world, _request(world, own.solution, own.workload), world.keys.agents[0])
    monkeypatch.undo()
    records = _bundle(world)
    assert own.solution not in {r.get("digest") for r in records if r["type"] == "artifact"}
    report = _verify(world, records, EvidenceLevel.VERIFIED)
    _failed(report, "artifact", f"solution artifact {own.solution} is not held by the bundle")


def test_a_forged_bundle_with_a_test_backend_keys_gpu_result_does_not_verify(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key registered for the CPU double (say, one whose file a solution stole) signs a
    cuda result on the B200: its registration in the bundle, not the result, decides."""
    stolen = SigningKey.generate()
    world.append(
        key_registration_envelope(
            stolen.public,
            [Role.AGENT],
            world.keys.admin,
            devices=(DeviceClass("cpu-test"),),
            now=world.clock.now,
        )
    )
    code = rerun_artifacts(MANIFESTS[SEED])
    assert code.solution is not None and code.workload is not None
    job = _request(world, code.solution, code.workload)
    monkeypatch.setattr(admission, "check_device", lambda *_: None)
    _measure(world, job, stolen)
    monkeypatch.undo()
    report = _verify(world, _bundle(world), EvidenceLevel.VERIFIED)
    _failed(report, "expectation", "below the verified you asked for")
    _failed(report, "claim", "claims evidence level 'verified'")


def _claimed_level(w: World) -> str:
    claim = next(r for r in _bundle(w, claimed=None) if r["type"] == "claim")
    return str(claim["evidence"]["level"])


def test_an_older_ledgers_agent_key_without_device_classes_moves_nothing(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Registered before keys named their devices (admission's checks switched off here),
    an agent key is bound to none: the ledger's views and the verifier agree its GPU result
    counts for nothing, and the bundle as the ledger exports it verifies."""
    older = SigningKey.generate()
    monkeypatch.setattr(admission, "check_agent_registration", lambda *_: None)
    monkeypatch.setattr(admission, "check_device", lambda *_: None)
    world.append(unchecked_key_registration(older, world.keys.admin, now=world.clock.now))
    code = rerun_artifacts(MANIFESTS[SEED])
    assert code.solution is not None and code.workload is not None
    _measure(world, _request(world, code.solution, code.workload), older)
    monkeypatch.undo()
    assert _claimed_level(world) == "reported"
    as_exported = _verify(world, _bundle(world, claimed=None))
    assert outcome_of(as_exported) is Outcome.VERIFIED, as_exported.to_json()
    _failed(_verify(world, _bundle(world)), "claim", "claims evidence level 'verified'")


def unchecked_key_registration(key: SigningKey, admin: SigningKey, now: Any) -> dict[str, Any]:
    """An agent key's registration as an older client signed it: no device classes."""
    predicate = {
        "action": "register",
        "keyId": key.key_id,
        "publicKey": key.public.b64,
        "roles": ["agent"],
        "validFrom": format_time(now),
        "issuedAt": format_time(now),
    }
    return signed_as_given(key.key_id, key.key_id, PredicateType.KEY, predicate, admin)
