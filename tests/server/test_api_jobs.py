"""The rerun job protocol over HTTP, on SQLite and PostgreSQL: request, list, claim, result,
and every refusal; only a claimant's completed GPU measurement moves evidence."""

from __future__ import annotations

from typing import Any

from decoded_events import decode_counter
from rerun_results import B200, SM100, device, rerun_request, result
from served_app import Served
from test_api_reads import SEED, problem_of
from test_api_writes import SEED_NAME, check_receipt

from domain.statements import Role
from ledger.signing.authoring import (
    key_registration_envelope,
    rerun_claim_envelope,
    rerun_envelope,
)
from ledger.signing.keys import SigningKey


def setup(served: Served, product: str = B200, arch: str = SM100) -> tuple[Any, ...]:
    c, home = served.client, served.home
    admin = home.key("admin")
    agents = [SigningKey.generate() for _ in range(2)]
    for agent in agents:
        envelope = key_registration_envelope(agent.public, [Role.AGENT], admin, label="agent")
        check_receipt(c.post("/v1/keys", json=envelope), envelope)
    request = rerun_request(served, SEED, SEED_NAME, product, arch)
    check_receipt(c.post(f"/v1/runs/{SEED}/rerun-requests", json=request), request)
    jobs = c.get("/v1/jobs", params={"product": product, "architecture": arch}).json()
    assert len(jobs) == 1
    return agents, jobs[0]


def claim(served: Served, agent: SigningKey, job: dict[str, Any], **kw: Any) -> Any:
    envelope = rerun_claim_envelope(
        SEED, SEED_NAME, agent, job_id=job["jobId"], device=kw.pop("device", device()), **kw
    )
    return served.client.post(f"/v1/jobs/{job['jobId']}/claims", json=envelope)


def post_result(served: Served, agent: SigningKey, value: dict[str, Any]) -> Any:
    envelope = rerun_envelope(SEED, SEED_NAME, agent, result=value)
    return served.client.post(f"/v1/runs/{SEED}/reruns", json=envelope)


def level(served: Served) -> str:
    return str(served.client.get(f"/v1/runs/{SEED}").json()["evidence"]["level"])


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
    problem_of(post_result(served, first, wrong_hw), 422, "rerun-rejected")
    assert level(served) == "reported"

    value = result(job)
    envelope = rerun_envelope(SEED, SEED_NAME, first, result=value)
    check_receipt(c.post(f"/v1/runs/{SEED}/reruns", json=envelope), envelope)
    assert level(served) == "verified"
    replay = c.post(f"/v1/runs/{SEED}/reruns", json=envelope)
    assert replay.status_code == 200 and replay.json()["duplicate"] is True
    problem_of(post_result(served, first, result(job)), 422, "rerun-rejected")  # one result
    problem_of(claim(served, second, job), 422, "rerun-rejected")  # closed
    assert c.get("/v1/jobs").json() == []
    history = c.get(f"/v1/runs/{SEED}/history").json()["events"]
    kinds = [e["event"] for e in history]
    assert kinds[-3:] == ["Run.RerunRequested", "Run.RerunClaimed", "Run.RerunRecorded"]
    assert history[-1]["changed"]["evidence"] == {
        "from": "reported",
        "to": "verified",
        "reasons": history[-1]["changed"]["evidence"]["reasons"],
    }


def test_claims_that_do_not_fit_the_job_are_refused(served: Served) -> None:
    (agent, _), job = setup(served)
    problem_of(claim(served, agent, job, device=device(arch="sm_90")), 422, "rerun-rejected")
    attester = SigningKey.generate()
    register = key_registration_envelope(attester.public, [Role.ATTESTER], attester)
    check_receipt(served.client.post("/v1/keys", json=register), register)
    problem_of(claim(served, attester, job), 403, "wrong-role")
    problem_of(post_result(served, agent, result(job)), 422, "rerun-rejected")  # no claim
    problem_of(
        served.client.post(
            "/v1/jobs/00000000-0000-4000-8000-000000000000/claims",
            json=rerun_claim_envelope(
                SEED,
                SEED_NAME,
                agent,
                job_id="00000000-0000-4000-8000-000000000000",
                device=device(),
            ),
        ),
        404,
        "not-found",
    )


def test_cpu_test_backend_and_failed_jobs_never_move_evidence(served: Served) -> None:
    (agent, other), job = setup(served)
    # The claim names the CPU double as its device; the result must come from that device.
    assert claim(served, agent, job, device=device(backend="cpu-test")).status_code == 201
    cpu = result(job)
    cpu["environment"] = cpu["environment"] | {"backend": "cpu-test"}
    assert post_result(served, agent, cpu).status_code == 201
    assert level(served) == "reported"

    (_, _), second_job = setup_again(served)
    assert claim(served, other, second_job).status_code == 201
    failed = result(second_job, outcome="failed", failure="nvcc: no kernel image for sm_100")
    failed["summary"] = {"allCorrect": False, "samples": 0}
    failed["cases"] = [{"case": "case-0", "status": "error", "reason": "build failed"}]
    assert post_result(served, other, failed).status_code == 201
    assert level(served) == "reported"
    last = served.client.get(f"/v1/runs/{SEED}/history").json()["events"][-1]
    assert "job FAILED: nvcc" in last["says"]


def setup_again(served: Served) -> tuple[tuple[None, None], dict[str, Any]]:
    """A second job on the same run (the agents from setup stay registered)."""
    request = rerun_request(served, SEED, SEED_NAME)
    check_receipt(served.client.post(f"/v1/runs/{SEED}/rerun-requests", json=request), request)
    jobs = served.client.get("/v1/jobs").json()
    return (None, None), next(j for j in jobs if j["claimant"] is None)


def test_a_claim_posted_for_another_job_is_refused(served: Served) -> None:
    (agent, _), job = setup(served)
    setup_again(served)
    other = next(j for j in served.client.get("/v1/jobs").json() if j["jobId"] != job["jobId"])
    envelope = rerun_claim_envelope(SEED, SEED_NAME, agent, job_id=other["jobId"], device=device())
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
    served.stop_follower()
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
            attestation_envelope(SEED, SEED_NAME, attester, type_="note", body=f"{i}")
            for i in range(120)
        ]
    )
    cost()  # the views fold the notes in: a catch-up's cost, once, not a poll's
    assert cost() == before  # the same answers, from the same few events
