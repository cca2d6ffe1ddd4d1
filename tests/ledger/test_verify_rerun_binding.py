"""Issue 32, offline: a bundle whose rerun measured code other than the run's, or code the
bundle does not carry, or a workload the run's digests do not rebuild (its undigested
reference swapped), or was signed by a key registered for a test backend, does not prove the
run verified, whatever its claim says.

The run rerun here is a direct submission of the SOL-ExecBench rmsnorm fixture (14 cases):
its implementation pins the solution, and its workload artifact rebuilds its suite, as a
run must for a job to be bound to it (real code, where the world's cohort has stand-ins).

Each bundle is forged past admission the only way a signed bundle can be: by a ledger that
admitted what today's admission refuses (an older ledger, or an operator who skipped the
check: here, admission's check switched off while the envelopes are appended), then exported
with the log key, its claim saying "verified".
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete

import ledger.admission as admission
from domain.evidence import EvidenceLevel
from domain.importers.records import Artifact, referencing, rerun_artifacts, workload_artifact
from domain.manifests.manifest_set import check_manifest_set
from domain.rerun_binding import DeviceClass
from domain.statements import PredicateType, Role
from domain.timestamps import format_time
from ledger.application import Ledger
from ledger.signing.authoring import (
    ingestion_envelope,
    key_registration_envelope,
    rerun_claim_envelope,
    rerun_request_envelope,
)
from ledger.signing.keys import SigningKey
from ledger.store.artifacts import ArtifactStore, artifacts
from ledger.submission import prepare_submission
from ledger.verification_report import Report
from ledger.verify import Expectation, Outcome, VerificationPolicy, outcome_of, verify_bundle_lines
from projections.export import export_runs
from tests.paths import FIXTURES
from tests.projections.projection_world import B200, SM100, Job, World, rerun_result
from tests.unchecked_signing import signed_as_given, unchecked_rerun_envelope

Records = list[dict[str, Any]]


FIXTURE = FIXTURES / "sol-execbench" / "triton-rmsnorm"
CLAIMED_NS = 50_000


@dataclass(frozen=True)
class Submitted:
    """The submission run in the world, with its manifests as ingested."""

    run: str
    name: str
    manifests: dict[str, Any]
    solution: str
    workload: str


def _files() -> dict[str, bytes]:
    return {
        "definition.json": (FIXTURE / "definition.json").read_bytes(),
        "workload.jsonl": (FIXTURE / "workload.jsonl").read_bytes(),
        "solution.json": (FIXTURE / "solution_triton.json").read_bytes(),
    }


def _submit(w: World, forge: Callable[[dict[str, Any]], list[Artifact]] | None = None) -> Submitted:
    """The fixture submitted on the B200 with its artifacts stored; ``forge`` rewrites the
    manifests' undigested references (and returns what else to store) before it is signed."""
    prepared = prepare_submission(
        _files(), latency_ns=CLAIMED_NS, product=B200, architecture=SM100, observed_at=w.clock.now
    )
    manifests = copy.deepcopy(prepared.manifests)
    extra = forge(manifests) if forge is not None else []
    ArtifactStore(w.ledger.store).put_many([prepared.solution, prepared.workload, *extra])
    w.append(ingestion_envelope(manifests, w.keys.ingester, now=w.clock.now))
    assert check_manifest_set(manifests).run_digest == prepared.run_digest
    workload = rerun_artifacts(manifests).workload  # the reference, swapped or not
    assert workload is not None
    return Submitted(
        prepared.run_digest, prepared.run_name, manifests, prepared.solution.digest, workload
    )


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    # Offline verification is the subject, not storage: one backend is enough.
    w = World.create(f"sqlite:///{tmp_path / 'ledger.db'}")
    w.ingest()
    yield w
    w.close()


def _bundle(w: World, run: str, claimed: str | None = "verified") -> Records:
    """The run's bundle as its ledger exports it, its claim saying ``claimed``."""
    out = io.StringIO()
    exporter = Ledger(w.db_url, w.root, clock=w.clock, log_key=w.keys.log)
    export_runs(exporter, out, [run])
    exporter.close()
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    for record in records:
        if claimed is not None and record["type"] == "claim" and record["run"] == run:
            record["evidence"]["level"] = claimed
    return records


def _verify(w: World, records: Records, run: str, min_level: EvidenceLevel | None = None) -> Report:
    lines = [json.dumps(r) + "\n" for r in records]
    expect = Expectation(run, min_level=min_level) if min_level is not None else None
    policy = VerificationPolicy(trust_root=w.root, expect=expect)
    return verify_bundle_lines(lines, policy, workers=1)


def _failed(report: Report, check: str, words: str) -> None:
    assert outcome_of(report) is Outcome.FAILED, report.to_json()
    reasons = [f.reason for f in report.findings if f.check == check]
    assert any(words in r for r in reasons), report.to_json()


def _request(w: World, run: Submitted, solution: str, workload: str) -> Job:
    job = Job(run.run, "12345678-1234-4234-8234-123456789abc", "ab" * 32, B200, SM100)
    w.append(
        rerun_request_envelope(
            run.run,
            run.name,
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


def _measure(w: World, run: Submitted, job: Job, agent: SigningKey) -> None:
    """A claim and a passing cuda result on the B200, as a GPU agent signs them."""
    device = {"product": B200, "architecture": SM100, "gpuUuidHash": "c" * 64, "backend": "cuda"}
    w.append(
        rerun_claim_envelope(
            run.run, run.name, agent, job_id=job.job_id, device=device, now=w.clock.now
        )
    )
    result = rerun_result(job, gpu_hash="c" * 64, ns=round(CLAIMED_NS * 1.02))
    w.append(unchecked_rerun_envelope(run.run, run.name, agent, result=result, now=w.clock.now))


def _claimed_level(w: World, run: str) -> str:
    claim = next(r for r in _bundle(w, run, claimed=None) if r["type"] == "claim")
    return str(claim["evidence"]["level"])


def test_an_honest_bound_rerun_verifies_offline(world: World) -> None:
    """The control: the run's own, stored code, measured by a GPU key, proves verified."""
    run = _submit(world)
    _measure(world, run, _request(world, run, run.solution, run.workload), world.keys.agents[0])
    report = _verify(world, _bundle(world, run.run), run.run, EvidenceLevel.VERIFIED)
    assert outcome_of(report) is Outcome.VERIFIED, report.to_json()


def test_a_forged_bundle_with_another_runs_code_does_not_verify_the_run(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _submit(world)
    foreign = json.dumps({"name": "another", "sources": []}).encode()
    other = Artifact(foreign, "application/json", "another.solution.json")
    ArtifactStore(world.ledger.store).put_many([other])
    monkeypatch.setattr(admission, "check_job_code", lambda *_, **__: None)
    _measure(world, run, _request(world, run, other.digest, run.workload), world.keys.agents[0])
    monkeypatch.undo()
    report = _verify(world, _bundle(world, run.run), run.run, EvidenceLevel.VERIFIED)
    _failed(report, "expectation", "below the verified you asked for")
    _failed(report, "claim", "claims evidence level 'verified'")
    # Nor do the ledger's own views count it: its unforged claim says so.
    assert _claimed_level(world, run.run) == "reported"


def _swap_workload(manifests: dict[str, Any]) -> list[Artifact]:
    """The workload manifest's reference (metadata: in no digest) swapped for a package of
    one tiny workload instead of the run's 14 (the review's repro)."""
    files = _files()
    definition = json.loads(files["definition.json"])
    first = json.loads(files["workload.jsonl"].decode().splitlines()[0])
    tiny = workload_artifact(definition, [first | {"axes": dict.fromkeys(first["axes"], 1)}])
    manifests["workload"] = referencing(manifests["workload"], tiny)
    return [tiny]


def test_a_forged_bundle_whose_workload_reference_was_swapped_does_not_verify(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same run digest, same group: but the carried workload does not rebuild the run's
    suite, so what the agent measured is not the run's workload. An older ledger admitted
    the job (admission's content check switched off here) and its views count the result
    (the fold sees digests only); the verifier reads the bytes and refuses the claim."""
    run = _submit(world, _swap_workload)
    monkeypatch.setattr(admission, "check_job_code", lambda *_, **__: None)
    _measure(world, run, _request(world, run, run.solution, run.workload), world.keys.agents[0])
    monkeypatch.undo()
    records = _bundle(world, run.run)
    report = _verify(world, records, run.run, EvidenceLevel.VERIFIED)
    _failed(report, "artifact", f"the workload artifact {run.workload}")
    _failed(report, "artifact", "does not describe the run's workload")


def test_a_forged_bundle_with_a_solution_reference_over_the_pinned_source_does_not_verify(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An extra reference on the implementation (in no digest) names another solution: the
    job that measured it is bound to nothing, in the ledger's views and offline."""
    other = Artifact(b'{"name": "other", "sources": []}', "application/json", "other.json")

    def add_reference(manifests: dict[str, Any]) -> list[Artifact]:
        metadata = manifests["implementation"].setdefault("metadata", {})
        metadata.setdefault("sourceRefs", []).append(
            {"url": "kernelindex:artifact/" + other.digest}
        )
        return [other]

    run = _submit(world, add_reference)
    monkeypatch.setattr(admission, "check_job_code", lambda *_, **__: None)
    job = _request(world, run, other.digest, run.workload)
    _measure(world, run, job, world.keys.agents[0])
    monkeypatch.undo()
    report = _verify(world, _bundle(world, run.run), run.run, EvidenceLevel.VERIFIED)
    _failed(report, "expectation", "below the verified you asked for")
    assert _claimed_level(world, run.run) == "reported"


def test_a_forged_bundle_whose_code_the_bundle_does_not_carry_does_not_verify(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run names the code, but the ledger never held it: the bundle cannot carry it."""
    run = _submit(world)
    with world.ledger.store.transaction(commit=True) as session:
        session.execute(delete(artifacts).where(artifacts.c.digest == run.solution))
    monkeypatch.setattr(admission, "check_job_code", lambda *_, **__: None)
    _measure(world, run, _request(world, run, run.solution, run.workload), world.keys.agents[0])
    monkeypatch.undo()
    records = _bundle(world, run.run)
    assert run.solution not in {r.get("digest") for r in records if r["type"] == "artifact"}
    report = _verify(world, records, run.run, EvidenceLevel.VERIFIED)
    _failed(report, "artifact", f"solution artifact {run.solution} is not held by the bundle")


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
    run = _submit(world)
    job = _request(world, run, run.solution, run.workload)
    monkeypatch.setattr(admission, "check_device", lambda *_: None)
    _measure(world, run, job, stolen)
    monkeypatch.undo()
    report = _verify(world, _bundle(world, run.run), run.run, EvidenceLevel.VERIFIED)
    _failed(report, "expectation", "below the verified you asked for")
    _failed(report, "claim", "claims evidence level 'verified'")


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
    run = _submit(world)
    _measure(world, run, _request(world, run, run.solution, run.workload), older)
    monkeypatch.undo()
    assert _claimed_level(world, run.run) == "reported"
    as_exported = _verify(world, _bundle(world, run.run, claimed=None), run.run)
    assert outcome_of(as_exported) is Outcome.VERIFIED, as_exported.to_json()
    _failed(
        _verify(world, _bundle(world, run.run), run.run),
        "claim",
        "claims evidence level 'verified'",
    )


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
