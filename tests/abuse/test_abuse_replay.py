"""Replays and misdirected envelopes, on SQLite and PostgreSQL.

A signed envelope is a bearer of one statement about one subject: sent again it is the same
event (200, the original receipt, nothing new); sent to another run's or another kind's
endpoint, with its payload swapped, or as a rerun result for a job it was not made for, it
is refused with a stable problem code and nothing is appended.
"""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

from abuse_support import (
    SEED,
    SEED_NAME,
    Served,
    appended,
    problem_of,
    register,
)
from rerun_results import ON_B200, device, rerun_request, submitted_run
from rerun_results import result as result_of

from domain.statements import Role
from ledger.signing.authoring import (
    attestation_envelope,
    key_registration_envelope,
    rerun_claim_envelope,
    rerun_envelope,
)
from ledger.signing.keys import SigningKey
from tests.unchecked_signing import unchecked_rerun_envelope


def other_run(served: Served, than: str = SEED) -> dict[str, Any]:
    """A second run of the demo ledger (run B), as the API lists it."""
    items = served.client.get("/v1/runs", params={"limit": 200}).json()["items"]
    run: dict[str, Any] = next(r for r in items if r["digest"] not in {SEED, than})
    return run


def of(job: dict[str, Any]) -> tuple[str, str]:
    """The digest and name of a job's run."""
    return job["runDigest"], job["runName"]


def test_a_replayed_envelope_is_the_same_event_with_the_original_receipt(served: Served) -> None:
    c = served.client
    alice = SigningKey.generate()
    register(served, alice, [Role.ATTESTER])
    envelope = attestation_envelope(SEED, SEED_NAME, alice, type_="reproduced", body="same")
    url = f"/v1/runs/{SEED}/attestations"
    first = c.post(url, json=envelope)
    assert first.status_code == 201, first.text
    after_first = appended(served)
    original = first.json()
    for _ in range(3):
        again = c.post(url, json=envelope)
        assert again.status_code == 200, again.text
        receipt = again.json()
        assert receipt["duplicate"] is True
        for field in ("position", "envelopeDigest", "receivedAt", "subjectDigest", "signer"):
            assert receipt[field] == original[field], field
        assert receipt["log"]["leafIndex"] == original["log"]["leafIndex"]
    # Key-order or whitespace changes do not make it a new envelope either.
    reordered = {k: envelope[k] for k in reversed(list(envelope))}
    assert c.post(url, json=reordered).json()["position"] == original["position"]
    assert appended(served) == after_first
    # Replaying what the public record holds: the seed's own ingestion, as history shows it.
    history = c.get(f"/v1/runs/{SEED}/history").json()["events"]
    ingestion = history[0]["envelope"]
    replay = c.post("/v1/runs", json=ingestion)
    assert replay.status_code == 200 and replay.json()["duplicate"] is True, replay.text
    assert replay.json()["position"] == history[0]["position"]
    assert appended(served) == after_first
    events = c.get(f"/v1/runs/{SEED}/history").json()["events"]
    assert [e["event"] for e in events].count("Run.Attested") == 2  # the demo's, and this one


def test_an_envelope_sent_to_another_endpoint_is_refused(served: Served) -> None:
    c = served.client
    alice = SigningKey.generate()
    register(served, alice, [Role.ATTESTER])
    run_b = other_run(served)
    envelope = attestation_envelope(SEED, SEED_NAME, alice, type_="note", body="about A")
    before = appended(served)
    # Run A's attestation at run B's endpoint (B exists: only the subject is wrong).
    problem_of(
        c.post(f"/v1/runs/{run_b['digest']}/attestations", json=envelope), 422, "wrong-endpoint"
    )
    for url in (
        f"/v1/runs/{SEED}/lifecycle",
        f"/v1/runs/{SEED}/rerun-requests",
        f"/v1/runs/{SEED}/reruns",
        "/v1/runs",
        "/v1/keys",
        f"/v1/keys/{alice.key_id}/revocations",
    ):
        problem_of(c.post(url, json=envelope), 422, "wrong-endpoint")
    # A statement about run B signed and posted to B is fine, but not its subject renamed to A.
    for_b = attestation_envelope(run_b["digest"], SEED_NAME, alice, type_="note", body="x")
    problem_of(
        c.post(f"/v1/runs/{run_b['digest']}/attestations", json=for_b), 422, "subject-mismatch"
    )
    assert appended(served) == before
    assert c.post(f"/v1/runs/{SEED}/attestations", json=envelope).status_code == 201


def test_a_signature_made_for_another_statement_does_not_verify(served: Served) -> None:
    c = served.client
    alice, bob = SigningKey.generate(), SigningKey.generate()
    register(served, alice, [Role.ATTESTER])
    register(served, bob, [Role.ATTESTER])
    url = f"/v1/runs/{SEED}/attestations"
    mild = attestation_envelope(SEED, SEED_NAME, alice, type_="note", body="looks fine")
    harsh = attestation_envelope(SEED, SEED_NAME, alice, type_="could_not_reproduce", body="no")
    before = appended(served)
    # Alice's signature over "looks fine" carried by the payload "could not reproduce".
    swapped = dict(mild, payload=harsh["payload"])
    problem_of(c.post(url, json=swapped), 403, "bad-signature")
    # Bob's statement with Alice's signature (and her key id) on it.
    by_bob = attestation_envelope(SEED, SEED_NAME, bob, type_="note", body="bob")
    problem_of(c.post(url, json=dict(by_bob, signatures=mild["signatures"])), 403, "bad-signature")
    # Alice's signature relabelled as Bob's: the key id is only a hint, the key must verify.
    relabelled = copy.deepcopy(mild)
    relabelled["signatures"][0]["keyid"] = bob.key_id
    problem_of(c.post(url, json=relabelled), 403, "bad-signature")
    # A good signature next to a forged one does not launder the forged statement: an
    # envelope carries exactly one signature.
    both = dict(harsh, signatures=[*by_bob["signatures"], *harsh["signatures"]])
    both["payload"] = base64.b64encode(base64.b64decode(harsh["payload"]) + b" ").decode()
    problem_of(c.post(url, json=both), 400, "malformed-envelope")
    assert appended(served) == before


# ------------------------------------------------------------------------------ reruns


def _request_job(served: Served) -> dict[str, Any]:
    """A job for a submitted run (the same one each time): the demo's seed names no code,
    so no job can measure it (issue 32)."""
    c = served.client
    run, name = submitted_run(served)
    request = rerun_request(served, run, name)
    reply = c.post(f"/v1/runs/{run}/rerun-requests", json=request)
    assert reply.status_code == 201, reply.text
    job_id = json.loads(base64.b64decode(request["payload"]))["predicate"]["jobId"]
    job: dict[str, Any] = c.get(f"/v1/jobs/{job_id}").json()
    return job


def _claim(
    served: Served, agent: SigningKey, job: dict[str, Any], path_job: str | None = None
) -> Any:
    envelope = rerun_claim_envelope(
        job["runDigest"], job["runName"], agent, job_id=job["jobId"], device=device()
    )
    return served.client.post(f"/v1/jobs/{path_job or job['jobId']}/claims", json=envelope)


def test_a_rerun_result_cannot_be_replayed_to_another_job(served: Served) -> None:
    c = served.client
    agent = SigningKey.generate()
    register(served, agent, [Role.AGENT], signer=served.home.key("admin"))
    first = _request_job(served)
    assert _claim(served, agent, first).status_code == 201
    result = rerun_envelope(*of(first), agent, result=result_of(first))
    reruns = f"/v1/runs/{first['runDigest']}/reruns"
    assert c.post(reruns, json=result).status_code == 201
    second = _request_job(served)
    assert second["jobId"] != first["jobId"]
    before = appended(served)

    # The same envelope again is the first job's result again: a duplicate, not job 2's.
    replay = c.post(reruns, json=result)
    assert replay.status_code == 200 and replay.json()["duplicate"] is True
    still = c.get(f"/v1/jobs/{second['jobId']}").json()
    assert still["hasResult"] is False and still["claimant"] is None
    # Job 1's claim at job 2's endpoint.
    problem_of(_claim(served, agent, first, path_job=second["jobId"]), 422, "wrong-endpoint")
    # Re-signed for job 2, before claiming it, and with job 1's nonce after claiming it.
    early = rerun_envelope(*of(first), agent, result=result_of(second))
    problem_of(c.post(reruns, json=early), 422, "rerun-rejected")
    assert appended(served) == before
    assert _claim(served, agent, second).status_code == 201
    before = appended(served)
    stale = result_of(second, nonce=first["nonce"])
    problem_of(
        c.post(reruns, json=rerun_envelope(*of(first), agent, result=stale)),
        422,
        "rerun-rejected",
    )
    # Job 1's result posted to another run's rerun endpoint.
    run_b = other_run(served, first["runDigest"])
    problem_of(c.post(f"/v1/runs/{run_b['digest']}/reruns", json=result), 422, "wrong-endpoint")
    assert appended(served) == before
    kinds = [e["event"] for e in c.get(f"/v1/runs/{first['runDigest']}/history").json()["events"]]
    assert kinds.count("Run.RerunRecorded") == 1


# ------------------------------------------------------------- issue 13 §6: replays by a
# signature added, dropped or made up; stale claims; results that do not match their claim


def test_someone_elses_statement_cannot_become_a_new_event(served: Served) -> None:
    """Duplicates are recognised by what was signed and by whom, not by envelope bytes: a
    junk signature added (or the signatures reordered) is refused outright, a made-up
    signature under the signer's own key id is refused, and nothing is appended."""
    c = served.client
    alice, mallory = SigningKey.generate(), SigningKey.generate()
    register(served, alice, [Role.ATTESTER])
    register(served, mallory, [Role.ATTESTER])
    url = f"/v1/runs/{SEED}/attestations"
    envelope = attestation_envelope(SEED, SEED_NAME, alice, type_="could_not_reproduce", body="x")
    first = c.post(url, json=envelope)
    assert first.status_code == 201
    before = appended(served)
    junk = {"keyid": mallory.key_id, "sig": base64.b64encode(b"\0" * 64).decode()}
    for signatures in (
        [*envelope["signatures"], junk],
        [junk, *envelope["signatures"]],
        [*envelope["signatures"], *envelope["signatures"]],
    ):
        problem_of(
            c.post(url, json=dict(envelope, signatures=signatures)), 400, "malformed-envelope"
        )
    made_up = dict(envelope, signatures=[{"keyid": alice.key_id, "sig": junk["sig"]}])
    problem_of(c.post(url, json=made_up), 403, "bad-signature")
    # Mallory signing Alice's statement is Mallory's own (new) attestation, signed by her.
    by_mallory = c.post(url, json=dict(envelope, signatures=_resigned(envelope, mallory)))
    assert by_mallory.status_code == 201 and by_mallory.json()["signer"] == mallory.key_id
    assert appended(served) == tuple(n + 1 for n in before)
    again = c.post(url, json=envelope)
    assert again.status_code == 200 and again.json()["position"] == first.json()["position"]


def _resigned(envelope: dict[str, Any], key: SigningKey) -> list[dict[str, str]]:
    from ledger.signing.dsse import pae

    payload = base64.b64decode(envelope["payload"])
    sig = key.sign(pae(envelope["payloadType"], payload))
    return [{"keyid": key.key_id, "sig": base64.b64encode(sig).decode()}]


def test_a_lapsed_claim_reposted_renews_nothing_and_a_stale_one_is_refused(
    served: Served,
) -> None:
    from datetime import timedelta

    from domain.timestamps import utc_now

    c = served.client
    agent = SigningKey.generate()
    # Valid since an hour ago (an admin may vouch for that), so only the claim is stale.
    hour_ago = utc_now() - timedelta(hours=1)
    registration = key_registration_envelope(
        agent.public,
        [Role.AGENT],
        served.home.key("admin"),
        valid_from=hour_ago,
        devices=ON_B200,
    )
    assert c.post("/v1/keys", json=registration).status_code == 201
    job = _request_job(served)
    url = f"/v1/jobs/{job['jobId']}/claims"
    claim = rerun_claim_envelope(*of(job), agent, job_id=job["jobId"], device=device())
    first = c.post(url, json=claim)
    assert first.status_code == 201
    lease = c.get(f"/v1/jobs/{job['jobId']}").json()["leaseUntil"]
    before = appended(served)
    replay = c.post(url, json=claim)
    assert replay.status_code == 200 and replay.json()["duplicate"] is True
    assert c.get(f"/v1/jobs/{job['jobId']}").json()["leaseUntil"] == lease
    assert appended(served) == before
    old = rerun_claim_envelope(
        *of(job),
        agent,
        job_id=job["jobId"],
        device=device(),
        now=utc_now() - timedelta(minutes=30),
    )
    body = problem_of(c.post(url, json=old), 422, "bad-timestamp")
    assert "too late" in body["detail"]
    assert appended(served) == before


def test_a_result_must_come_from_the_claimed_device_and_agree_with_its_cases(
    served: Served,
) -> None:
    c = served.client
    agent = SigningKey.generate()
    register(served, agent, [Role.AGENT], signer=served.home.key("admin"))
    job = _request_job(served)
    assert _claim(served, agent, job).status_code == 201  # on GPU "a"*64
    reruns = f"/v1/runs/{job['runDigest']}/reruns"
    before = appended(served)
    elsewhere = result_of(job)
    elsewhere["environment"] = elsewhere["environment"] | {"gpuUuidHash": "b" * 64}
    body = problem_of(
        c.post(reruns, json=rerun_envelope(*of(job), agent, result=elsewhere)),
        422,
        "rerun-rejected",
    )
    assert "the claim named" in body["detail"]
    lying = result_of(job)
    lying["cases"] = [{"case": "case-0", "status": "incorrect"}]  # summary still allCorrect
    body = problem_of(
        c.post(reruns, json=unchecked_rerun_envelope(*of(job), agent, result=lying)),
        422,
        "schema-violation",
    )
    assert "allCorrect" in body["detail"]
    assert appended(served) == before
    assert c.get(f"/v1/runs/{job['runDigest']}").json()["evidence"]["level"] != "verified"
