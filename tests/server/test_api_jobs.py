"""The rerun job protocol over HTTP, on SQLite and PostgreSQL: request, list, claim, result,
and every refusal; only a claimant's completed GPU measurement moves evidence."""

from __future__ import annotations

import base64
import copy
import json
from datetime import timedelta
from typing import Any

from decoded_events import decode_counter
from rerun_results import (
    B200,
    CLAIMED,
    ON_B200,
    ON_CPU_TEST,
    SAMPLE,
    SM100,
    device,
    rerun_request,
    result,
    submitted_run,
)
from served_app import Served
from test_api_reads import problem_of
from test_api_writes import check_receipt

from domain.importers.records import referencing, rerun_artifacts, workload_artifact
from domain.manifests.manifest_set import check_manifest_set
from domain.rerun_binding import DeviceClass
from domain.statements import PredicateType, Role
from domain.timestamps import format_time, utc_now
from ledger.signing.authoring import (
    ingestion_envelope,
    key_registration_envelope,
    rerun_claim_envelope,
    rerun_envelope,
    rerun_request_envelope,
)
from ledger.signing.keys import SigningKey
from ledger.store.artifacts import ArtifactStore
from ledger.submission import prepare_submission, read_submission_folder, submit_solution
from tests.unchecked_signing import signed_as_given

# The run the jobs are for: submitted with its code (the demo's seed names none).
RUN: dict[int, tuple[str, str]] = {}


def the_run(served: Served) -> tuple[str, str]:
    """(digest, name) of the run this test's jobs are for."""
    if id(served.ledger) not in RUN:
        RUN.clear()  # a new test's ledger
        RUN[id(served.ledger)] = submitted_run(served)
    return RUN[id(served.ledger)]


def register_agent(served: Served, devices: Any = ON_B200) -> SigningKey:
    agent = SigningKey.generate()
    admin = served.home.key("admin")
    envelope = key_registration_envelope(
        agent.public, [Role.AGENT], admin, label="agent", devices=devices
    )
    check_receipt(served.client.post("/v1/keys", json=envelope), envelope)
    return agent


def setup(served: Served, product: str = B200, arch: str = SM100) -> tuple[Any, ...]:
    c = served.client
    run, name = the_run(served)
    agents = [register_agent(served) for _ in range(2)]
    request = rerun_request(served, run, name, product, arch)
    check_receipt(c.post(f"/v1/runs/{run}/rerun-requests", json=request), request)
    jobs = c.get("/v1/jobs", params={"product": product, "architecture": arch}).json()
    assert len(jobs) == 1
    return agents, jobs[0]


def claim(served: Served, agent: SigningKey, job: dict[str, Any], **kw: Any) -> Any:
    run, name = the_run(served)
    envelope = rerun_claim_envelope(
        run, name, agent, job_id=job["jobId"], device=kw.pop("device", device()), **kw
    )
    return served.client.post(f"/v1/jobs/{job['jobId']}/claims", json=envelope)


def post_result(served: Served, agent: SigningKey, value: dict[str, Any]) -> Any:
    run, name = the_run(served)
    envelope = rerun_envelope(run, name, agent, result=value)
    return served.client.post(f"/v1/runs/{run}/reruns", json=envelope)


def level(served: Served) -> str:
    run, _ = the_run(served)
    return str(served.client.get(f"/v1/runs/{run}").json()["evidence"]["level"])


def test_job_loop_claim_then_result_verifies_the_run(served: Served) -> None:
    (first, second), job = setup(served)
    c = served.client
    assert c.get("/v1/jobs", params={"product": "NVIDIA H100"}).json() == []
    assert c.get(f"/v1/jobs/{job['jobId']}").json()["artifactDigest"] == job["artifactDigest"]

    claimed = claim(served, first, job)
    assert claimed.status_code == 201, claimed.text
    assert claimed.json()["job"]["claimant"] == first.key_id
    # Held: not open to another agent, still listed for the holder.
    assert c.get("/v1/jobs", params={"agent": second.key_id}).json() == []
    assert len(c.get("/v1/jobs", params={"agent": first.key_id}).json()) == 1
    problem_of(claim(served, second, job), 422, "rerun-rejected")
    problem_of(post_result(served, second, result(job)), 422, "rerun-rejected")
    problem_of(post_result(served, first, result(job, nonce="0" * 64)), 422, "rerun-rejected")
    wrong_hw = result(job)
    wrong_hw["environment"] = wrong_hw["environment"] | {"architecture": "sm_90"}
    # Not a device the key is registered for, before it is not the job's hardware.
    problem_of(post_result(served, first, wrong_hw), 403, "device-not-bound")
    assert level(served) == "reported"

    value = result(job)
    envelope = rerun_envelope(*the_run(served), first, result=value)
    check_receipt(c.post(f"/v1/runs/{the_run(served)[0]}/reruns", json=envelope), envelope)
    assert level(served) == "verified"
    replay = c.post(f"/v1/runs/{the_run(served)[0]}/reruns", json=envelope)
    assert replay.status_code == 200 and replay.json()["duplicate"] is True
    problem_of(post_result(served, first, result(job)), 422, "rerun-rejected")  # one result
    problem_of(claim(served, second, job), 422, "rerun-rejected")  # closed
    assert c.get("/v1/jobs").json() == []
    history = c.get(f"/v1/runs/{the_run(served)[0]}/history").json()["events"]
    kinds = [e["event"] for e in history]
    assert kinds[-3:] == ["Run.RerunRequested", "Run.RerunClaimed", "Run.RerunRecorded"]
    assert history[-1]["changed"]["evidence"] == {
        "from": "reported",
        "to": "verified",
        "reasons": history[-1]["changed"]["evidence"]["reasons"],
    }


def test_claims_that_do_not_fit_the_job_are_refused(served: Served) -> None:
    (agent, _), job = setup(served)
    problem_of(claim(served, agent, job, device=device(arch="sm_90")), 403, "device-not-bound")
    # A key registered for both is refused for the job's hardware instead.
    both = register_agent(served, (*ON_B200, DeviceClass("cuda", B200, "sm_90")))
    problem_of(claim(served, both, job, device=device(arch="sm_90")), 422, "rerun-rejected")
    attester = SigningKey.generate()
    register = key_registration_envelope(attester.public, [Role.ATTESTER], attester)
    check_receipt(served.client.post("/v1/keys", json=register), register)
    problem_of(claim(served, attester, job), 403, "wrong-role")
    problem_of(post_result(served, agent, result(job)), 422, "rerun-rejected")  # no claim
    problem_of(
        served.client.post(
            "/v1/jobs/00000000-0000-4000-8000-000000000000/claims",
            json=rerun_claim_envelope(
                *the_run(served),
                agent,
                job_id="00000000-0000-4000-8000-000000000000",
                device=device(),
            ),
        ),
        404,
        "not-found",
    )


def test_cpu_test_backend_and_failed_jobs_never_move_evidence(served: Served) -> None:
    (_, other), job = setup(served)
    # A key registered for the CPU double claims with it; the result comes from that device.
    agent = register_agent(served, ON_CPU_TEST)
    assert claim(served, agent, job, device=device(backend="cpu-test")).status_code == 201
    cpu = result(job)
    cpu["environment"] = cpu["environment"] | {"backend": "cpu-test"}
    assert post_result(served, agent, cpu).status_code == 201
    assert level(served) == "reported"

    (_, _), second_job = setup_again(served)
    assert claim(served, other, second_job).status_code == 201
    failed = result(second_job, outcome="failed", failure="backend-unavailable")
    failed["summary"] = {"allCorrect": False, "samples": 0}
    failed["cases"] = [{"case": "case-0", "status": "error", "reason": "build-failed"}]
    assert post_result(served, other, failed).status_code == 201
    assert level(served) == "reported"
    last = served.client.get(f"/v1/runs/{the_run(served)[0]}/history").json()["events"][-1]
    assert "job FAILED: backend-unavailable" in last["says"]


def setup_again(served: Served) -> tuple[tuple[None, None], dict[str, Any]]:
    """A second job on the same run (the agents from setup stay registered)."""
    request = rerun_request(served, *the_run(served))
    check_receipt(
        served.client.post(f"/v1/runs/{the_run(served)[0]}/rerun-requests", json=request), request
    )
    jobs = served.client.get("/v1/jobs").json()
    return (None, None), next(j for j in jobs if j["claimant"] is None)


def test_a_claim_posted_for_another_job_is_refused(served: Served) -> None:
    (agent, _), job = setup(served)
    setup_again(served)
    other = next(j for j in served.client.get("/v1/jobs").json() if j["jobId"] != job["jobId"])
    envelope = rerun_claim_envelope(*the_run(served), agent, job_id=other["jobId"], device=device())
    reply = served.client.post(f"/v1/jobs/{job['jobId']}/claims", json=envelope)
    problem_of(reply, 422, "wrong-endpoint")


def test_polling_jobs_of_a_flooded_run_decodes_no_more_of_it(
    served: Served, monkeypatch: Any
) -> None:
    """Anyone may flood a run with notes; its jobs are polled by every agent, often. A poll
    (open jobs, one job) reads a run's job events, never its attestations: it decodes as many
    stored events after 120 notes on the run as before (it replayed the whole run per job)."""
    from ledger.signing.authoring import attestation_envelope

    (agent, _), job = setup(served)
    assert claim(served, agent, job).status_code == 201
    c = served.client
    served.settle_views()
    measure = decode_counter(served.ledger.mapper, monkeypatch)
    polls = ("/v1/jobs", f"/v1/jobs?agent={agent.key_id}", f"/v1/jobs/{job['jobId']}")

    def poll(path: str) -> Any:
        reply = c.get(path)
        assert reply.status_code == 200, (path, reply.text[:300])
        return reply.json()

    def cost() -> list[tuple[int, Any]]:
        return [measure(lambda path=path: poll(path)) for path in polls]

    before = cost()
    assert before[0][1] == [] and before[1][1][0]["claimant"] == agent.key_id
    attester = SigningKey.generate()
    served.ledger.append(key_registration_envelope(attester.public, [Role.ATTESTER], attester))
    served.ledger.append_many(
        [
            attestation_envelope(*the_run(served), attester, type_="note", body=f"{i}")
            for i in range(120)
        ]
    )
    cost()  # the views fold the notes in: a catch-up's cost, once, not a poll's
    assert cost() == before  # the same answers, from the same few events


# ------------------------------------------------- issue 32: keys bound to devices, jobs to code


def _events(served: Served) -> int:
    return int(served.ledger.store.last_position())


def test_a_claim_for_a_device_the_key_is_not_bound_to_is_refused(served: Served) -> None:
    """A key registered for the CPU test double (one that has run untrusted code) cannot
    claim a GPU job as a cuda device, nor a key registered for another GPU: 403 with the
    key's classes named, nothing stored, the job still open."""
    _, job = setup(served)
    before = _events(served)
    for devices in (ON_CPU_TEST, (DeviceClass("cuda", "NVIDIA H100", "sm_90"),)):
        agent = register_agent(served, devices)
        before = _events(served)
        body = problem_of(claim(served, agent, job), 403, "device-not-bound")
        assert "may not claim or report NVIDIA B200 (sm_100, backend cuda)" in body["detail"]
        assert devices[0].label() in body["detail"]
        assert _events(served) == before
    assert served.client.get(f"/v1/jobs/{job['jobId']}").json()["claimant"] is None


def test_a_result_from_a_test_backend_key_leaves_the_level(served: Served) -> None:
    """A test-backend key measures on its backend only, and that never moves evidence; the
    cuda result it might sign is refused."""
    _, job = setup(served)
    agent = register_agent(served, ON_CPU_TEST)
    start = level(served)
    assert claim(served, agent, job, device=device(backend="cpu-test")).status_code == 201
    before = _events(served)
    problem_of(post_result(served, agent, result(job)), 403, "device-not-bound")  # "cuda"
    assert _events(served) == before
    cpu = result(job)
    cpu["environment"] = cpu["environment"] | {"backend": "cpu-test"}
    assert post_result(served, agent, cpu).status_code == 201
    assert level(served) == start


def test_a_rerun_request_for_code_the_run_does_not_name_is_refused(served: Served) -> None:
    """Posted straight to the API, a request naming another run's solution or workload, an
    artifact nobody stored, or for a run that names no code (the demo's seed) is refused:
    422 unbound-job, nothing stored, no job offered to agents."""
    run, name = the_run(served)
    own = rerun_request(served, run, name)
    own_fields = json.loads(base64.b64decode(own["payload"]))["predicate"]
    other = submit_solution(
        served.ledger,
        served.home.key("ingester"),
        read_submission_folder(SAMPLE.parent / "silu_and_mul_bf16"),
        latency_ns=CLAIMED,
        product=B200,
        architecture=SM100,
    )
    admin = served.home.key("admin")

    def request(artifact: str, workload: str, on: tuple[str, str] = (run, name)) -> Any:
        envelope = rerun_request_envelope(
            *on,
            admin,
            artifact_digest=artifact,
            workload_digest=workload,
            product=B200,
            architecture=SM100,
            expires_at=utc_now() + timedelta(hours=1),
        )
        return served.client.post(f"/v1/runs/{on[0]}/rerun-requests", json=envelope)

    solution, workload = own_fields["artifactDigest"], own_fields["workloadDigest"]
    before = _events(served)
    cases = [  # (solution, workload) asked for; what the run's manifests name instead
        ((other.solution_digest, workload), solution),
        ((solution, other.workload_digest), workload),
        (("sha256:" + "ab" * 32, workload), solution),
    ]
    for (artifact, work), named in cases:
        body = problem_of(request(artifact, work), 422, "unbound-job")
        assert f"is not the run's own: its manifests name {named}" in body["detail"]
    seed = served.seed
    record = served.client.get(f"/v1/runs/{seed}").json()
    body = problem_of(
        request(
            record["implementationDigest"],
            record["workloadDigest"],
            on=(seed, record["name"]),
        ),
        422,
        "unbound-job",
    )
    assert "name no solution artifact" in body["detail"]
    assert _events(served) == before
    assert served.client.get("/v1/jobs").json() == []


def test_a_rerun_request_for_code_the_ledger_does_not_hold_is_refused(served: Served) -> None:
    """The run names its code, but the artifacts were never stored: no agent could fetch
    them, nor anyone check what was measured."""
    prepared = prepare_submission(
        read_submission_folder(SAMPLE.parent / "silu_and_mul_bf16"),
        latency_ns=CLAIMED,
        product=B200,
        architecture=SM100,
    )
    served.ledger.append(ingestion_envelope(prepared.manifests, served.home.key("ingester")))
    before = _events(served)
    envelope = rerun_request_envelope(
        prepared.run_digest,
        prepared.run_name,
        served.home.key("admin"),
        artifact_digest=prepared.solution.digest,
        workload_digest=prepared.workload.digest,
        product=B200,
        architecture=SM100,
        expires_at=utc_now() + timedelta(hours=1),
    )
    reply = served.client.post(f"/v1/runs/{prepared.run_digest}/rerun-requests", json=envelope)
    body = problem_of(reply, 422, "unbound-job")
    assert f"solution artifact {prepared.solution.digest} is not held" in body["detail"]
    assert _events(served) == before


def _forged_run(served: Served, forge: Any) -> tuple[Any, dict[str, dict[str, Any]], str]:
    """A submitted run whose undigested ``metadata.sourceRefs`` ``forge`` rewrote, ingested
    with every artifact stored: (the honest submission, its manifests, the run's digest)."""
    prepared = prepare_submission(
        read_submission_folder(SAMPLE.parent / "silu_and_mul_bf16"),
        latency_ns=CLAIMED,
        product=B200,
        architecture=SM100,
    )
    manifests = copy.deepcopy(prepared.manifests)
    stored = forge(manifests)
    ArtifactStore(served.ledger.store).put_many([prepared.solution, prepared.workload, *stored])
    served.ledger.append(ingestion_envelope(manifests, served.home.key("ingester")))
    assert check_manifest_set(manifests).run_digest == prepared.run_digest  # digests unchanged
    return prepared, manifests, prepared.run_digest


def _request_for(served: Served, prepared: Any, artifact: str, workload: str) -> Any:
    envelope = rerun_request_envelope(
        prepared.run_digest,
        prepared.run_name,
        served.home.key("admin"),
        artifact_digest=artifact,
        workload_digest=workload,
        product=B200,
        architecture=SM100,
        expires_at=utc_now() + timedelta(hours=1),
    )
    return served.client.post(f"/v1/runs/{prepared.run_digest}/rerun-requests", json=envelope)


def test_a_rerun_of_a_workload_reference_swapped_for_a_smaller_workload_is_refused(
    served: Served,
) -> None:
    """The workload manifest's artifact reference (metadata, in no digest) names a package
    holding one tiny workload instead of the run's four: the run's digests are the same, but
    the package does not rebuild the run's workload, so the job is refused: 422, nothing
    stored, no job offered."""
    tiny: list[Any] = []

    def swap_workload(manifests: dict[str, dict[str, Any]]) -> list[Any]:
        package = json.loads(
            read_submission_folder(SAMPLE.parent / "silu_and_mul_bf16")["workload.jsonl"]
            .decode()
            .splitlines()[0]
        )
        package["axes"] = dict.fromkeys(package["axes"], 1)
        definition = json.loads(
            read_submission_folder(SAMPLE.parent / "silu_and_mul_bf16")["definition.json"]
        )
        tiny.append(workload_artifact(definition, [package]))
        manifests["workload"] = referencing(manifests["workload"], tiny[0])
        return tiny

    prepared, manifests, _ = _forged_run(served, swap_workload)
    assert rerun_artifacts(manifests).workload == tiny[0].digest
    before = _events(served)
    body = problem_of(
        _request_for(served, prepared, prepared.solution.digest, tiny[0].digest),
        422,
        "unbound-job",
    )
    assert f"the workload artifact {tiny[0].digest}" in body["detail"]
    assert "does not describe the run's workload" in body["detail"]
    assert _events(served) == before
    assert served.client.get("/v1/jobs").json() == []


def test_a_solution_reference_that_is_not_the_pinned_source_is_refused(served: Served) -> None:
    """The implementation pins its solution.json by a digested content digest; a reference
    in its metadata to another stored solution wins nothing: a job for either is refused
    (the run's own manifests disagree on its code), 422, nothing stored."""
    other = prepare_submission(
        read_submission_folder(SAMPLE), latency_ns=CLAIMED, product=B200, architecture=SM100
    ).solution

    def add_reference(manifests: dict[str, dict[str, Any]]) -> list[Any]:
        refs = manifests["implementation"].setdefault("metadata", {}).setdefault("sourceRefs", [])
        refs.append({"url": "kernelindex:artifact/" + other.digest})
        return [other]

    prepared, _, _ = _forged_run(served, add_reference)
    before = _events(served)
    for artifact in (other.digest, prepared.solution.digest):
        body = problem_of(
            _request_for(served, prepared, artifact, prepared.workload.digest),
            422,
            "unbound-job",
        )
        assert f"references the solution artifact {other.digest}" in body["detail"]
        assert "not the source it pins" in body["detail"]
    assert _events(served) == before
    assert served.client.get("/v1/jobs").json() == []


def test_an_agent_key_names_its_device_classes(served: Served) -> None:
    """Registered through the API: without device classes an agent key is refused; with
    them, the key's record shows them."""
    agent = SigningKey.generate()
    admin = served.home.key("admin")
    bare = {
        "action": "register",
        "keyId": agent.key_id,
        "publicKey": agent.public.b64,
        "roles": ["agent"],
        "validFrom": format_time(utc_now()),
        "issuedAt": format_time(utc_now()),
    }
    unbound = signed_as_given(agent.key_id, agent.key_id, PredicateType.KEY, bare, admin)
    before = _events(served)
    body = problem_of(served.client.post("/v1/keys", json=unbound), 422, "schema-violation")
    assert "names the device classes it may measure on" in body["detail"]
    mixed = bare | {"devices": [{"backend": "cpu-test"}, ON_B200[0].to_json()]}
    both = signed_as_given(agent.key_id, agent.key_id, PredicateType.KEY, mixed, admin)
    body = problem_of(served.client.post("/v1/keys", json=both), 422, "schema-violation")
    assert "never both" in body["detail"]
    assert _events(served) == before
    register_agent(served, ON_B200)
    registered = register_agent(served, ON_B200)
    record = served.client.get(f"/v1/keys/{registered.key_id}").json()
    assert record["devices"] == [
        {"backend": "cuda", "product": "NVIDIA B200", "architecture": "sm_100"}
    ]


def test_an_unbound_job_an_older_ledger_admitted_is_offered_to_no_agent(
    served: Served, monkeypatch: Any
) -> None:
    """A request admitted before jobs were bound to their run's code (admission's check
    switched off here) names another solution: its result could never count, so no agent
    is offered the job."""
    import ledger.admission as admission

    run, name = the_run(served)
    own = json.loads(base64.b64decode(rerun_request(served, run, name)["payload"]))["predicate"]
    monkeypatch.setattr(admission, "check_job_code", lambda *_, **__: None)
    old = rerun_request_envelope(
        run,
        name,
        served.home.key("admin"),
        artifact_digest="sha256:" + "cd" * 32,
        workload_digest=own["workloadDigest"],
        product=B200,
        architecture=SM100,
        expires_at=utc_now() + timedelta(hours=1),
    )
    served.ledger.append(old)
    monkeypatch.undo()
    job_id = json.loads(base64.b64decode(old["payload"]))["predicate"]["jobId"]
    assert served.client.get("/v1/jobs").json() == []
    problem_of(served.client.get(f"/v1/jobs/{job_id}"), 404, "not-found")
