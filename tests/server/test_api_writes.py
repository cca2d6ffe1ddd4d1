"""Signed writes over HTTP, on SQLite and PostgreSQL: receipts, proofs and every refusal.

A refused write answers problem+json with a stable type and appends nothing (the tree size
is unchanged); an accepted one answers 201 with a leaf index and an inclusion proof that
verifies against the root it names, for the very envelope that was sent.
"""

from __future__ import annotations

import base64
import copy
import json
from datetime import timedelta
from typing import Any

import pytest
from rerun_results import rerun_request, submitted_run
from served_app import TEST_CONFIG, Served, serve
from test_api_reads import SEED, problem_of

from api.demo import seed_manifests
from api.server.config import ServerConfig
from domain.errors import CanonicalizationError
from domain.event_names import EventName
from domain.manifests.canonical_form import manifest_digest
from domain.statements import Role
from domain.timestamps import utc_now
from ledger.aggregates import Run
from ledger.home import LedgerHome
from ledger.proofs.log_entries import LogEntry
from ledger.proofs.merkle import verify_inclusion
from ledger.signing.authoring import (
    attachment_envelope,
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
    key_revocation_envelope,
    lifecycle_envelope,
    rerun_request_envelope,
)
from ledger.signing.dsse import PAYLOAD_TYPE, pae, sign_envelope
from ledger.signing.keys import SigningKey
from projections.run_views import _HANDLERS

SEED_NAME = "sol-submission-38823"


def tree_size(served: Served) -> int:
    size: int = served.client.get("/health").json()["treeSize"]
    return size


def check_receipt(reply: Any, envelope: dict[str, Any], status: int = 201) -> dict[str, Any]:
    """The receipt proves the sent envelope is leaf N of the tree whose root it names."""
    assert reply.status_code == status, reply.text
    receipt: dict[str, Any] = reply.json()
    entry = LogEntry(
        receipt["position"],
        receipt["aggregateId"],
        receipt["version"],
        f"ledger.aggregates:{receipt['event']}",
        envelope,
        receipt["receivedAt"],
    )
    proof = receipt["log"]
    verify_inclusion(
        entry.leaf_hash(),
        proof["leafIndex"],
        proof["treeSize"],
        [base64.b64decode(h) for h in proof["hashes"]],
        base64.b64decode(proof["rootHash"]),
    )
    return receipt


def register_attester(served: Served, key: SigningKey) -> dict[str, Any]:
    envelope = key_registration_envelope(key.public, [Role.ATTESTER], key, label="alice")
    return check_receipt(served.client.post("/v1/keys", json=envelope), envelope)


def test_attestation_round_trip_with_receipt_and_duplicate(served: Served) -> None:
    c = served.client
    alice = SigningKey.generate()
    registered = register_attester(served, alice)
    assert registered["event"] == "Principal.Registered"
    envelope = attestation_envelope(SEED, SEED_NAME, alice, type_="reproduced", body="same mean")
    first = c.post(f"/v1/runs/{SEED}/attestations", json=envelope)
    receipt = check_receipt(first, envelope)
    assert first.headers["location"] == f"/v1/runs/{SEED}/history"
    assert receipt["duplicate"] is False and receipt["event"] == "Run.Attested"

    again = c.post(f"/v1/runs/{SEED}/attestations", json=envelope)
    original = check_receipt(again, envelope, status=200)
    assert original["duplicate"] is True
    assert original["position"] == receipt["position"]

    history = c.get(f"/v1/runs/{SEED}/history").json()["events"]
    assert [e["event"] for e in history].count("Run.Attested") == 2
    mine = history[-1]
    assert mine["signer"] == alice.key_id and mine["role"] == "attester" and mine["verified"]
    # Attestations never move evidence or rank.
    record = c.get(f"/v1/runs/{SEED}").json()
    assert record["standings"]["source-native"]["rank"] == 3
    assert [r["type"] for r in record["replications"]] == ["reproduced"]


def test_refused_writes_answer_problems_and_append_nothing(served: Served) -> None:
    c = served.client
    alice = SigningKey.generate()
    register_attester(served, alice)
    before = tree_size(served)
    good = attestation_envelope(SEED, SEED_NAME, alice, type_="note", body="fine")
    url = f"/v1/runs/{SEED}/attestations"

    stranger = SigningKey.generate()
    unknown = attestation_envelope(SEED, SEED_NAME, stranger, type_="note", body="who am I")
    problem_of(c.post(url, json=unknown), 403, "unknown-key")
    unnamed = copy.deepcopy(good)  # optional in DSSE, required in this ledger's profile
    del unnamed["signatures"][0]["keyid"]
    problem_of(c.post(url, json=unnamed), 400, "malformed-request")

    tampered = copy.deepcopy(good)
    sig = base64.b64decode(tampered["signatures"][0]["sig"])
    tampered["signatures"][0]["sig"] = base64.b64encode(bytes([sig[0] ^ 1]) + sig[1:]).decode()
    problem_of(c.post(url, json=tampered), 403, "bad-signature")

    retraction = lifecycle_envelope(SEED, SEED_NAME, alice, action="retract", reason="mine")
    problem_of(c.post(f"/v1/runs/{SEED}/lifecycle", json=retraction), 403, "wrong-role")

    problem_of(c.post("/v1/keys", json=good), 422, "wrong-endpoint")
    other = "sha256:" + "0" * 64
    problem_of(c.post(f"/v1/runs/{other}/attestations", json=good), 422, "wrong-endpoint")

    payload = json.loads(base64.b64decode(good["payload"]))
    payload["predicate"]["type"] = "disputed"
    bad_type = alice_signed(alice, payload)
    problem_of(c.post(url, json=bad_type), 422, "schema-violation")

    unknown_run = attestation_envelope(other, "ghost", alice, type_="note", body="x")
    problem_of(c.post(f"/v1/runs/{other}/attestations", json=unknown_run), 404, "unknown-run")

    # A time that matches RFC 3339's pattern but leaves years 1-9999 in UTC: refused by
    # name, not a 5xx (it used to escape as OverflowError and fail the writer's group).
    payload = json.loads(base64.b64decode(good["payload"]))
    payload["predicate"]["issuedAt"] = "0001-01-01T00:00:00+01:00"
    problem = problem_of(c.post(url, json=alice_signed(alice, payload)), 422, "schema-violation")
    assert "is not a valid date-time" in problem["detail"]

    body = json.dumps(good)
    duplicated_key = body[:-1] + ', "payloadType": "application/vnd.in-toto+json"}'
    problem_of(
        c.post(url, content=duplicated_key, headers={"content-type": "application/json"}),
        400,
        "malformed-document",
    )
    problem_of(
        c.post(url, content=b"{not json", headers={"content-type": "application/json"}),
        400,
        "malformed-request",
    )
    problem_of(c.post(url, json={"payloadType": 1}), 400, "malformed-request")
    problem_of(c.post(url, json=[1, 2]), 400, "malformed-request")
    not_b64 = dict(good, payload="!!!")
    problem_of(c.post(url, json=not_b64), 400, "malformed-envelope")
    problem_of(c.delete(url), 405, "method-not-allowed")

    assert tree_size(served) == before
    assert c.post(url, json=good).status_code == 201
    assert tree_size(served) == before + 1


def alice_signed(key: SigningKey, statement: dict[str, Any]) -> dict[str, Any]:
    return sign_envelope(statement, key)


def test_revocation_takes_effect_on_the_next_request(served: Served) -> None:
    c = served.client
    alice = SigningKey.generate()
    register_attester(served, alice)
    revoke = key_revocation_envelope(alice.public, alice, reason="laptop lost")
    receipt = check_receipt(c.post(f"/v1/keys/{alice.key_id}/revocations", json=revoke), revoke)
    assert receipt["event"] == "Principal.Revoked"
    assert c.get(f"/v1/keys/{alice.key_id}").json()["status"] == "revoked"
    late = attestation_envelope(SEED, SEED_NAME, alice, type_="note", body="after revoking")
    problem_of(c.post(f"/v1/runs/{SEED}/attestations", json=late), 403, "revoked-key")
    problem_of(
        c.post(f"/v1/keys/{'sha256:' + '5' * 64}/revocations", json=revoke), 422, "wrong-endpoint"
    )


def test_admin_writes_ingest_rerun_request_and_retract(served: Served) -> None:
    c = served.client
    home = served.home
    manifests = seed_manifests()
    manifests["run"]["metadata"]["name"] = "sol-submission-38823-copy"
    manifests["run"]["spec"]["observedAt"] = "2026-08-23T00:00:00.000Z"  # digests cover spec
    ingestion = ingestion_envelope(manifests, home.key("ingester"))
    receipt = check_receipt(c.post("/v1/runs", json=ingestion), ingestion)
    new_run = receipt["subjectDigest"]
    assert c.get(f"/v1/runs/{new_run}").json()["name"] == "sol-submission-38823-copy"
    # The same run from a different envelope is a conflict, not a second run.
    again = ingestion_envelope(manifests, home.key("ingester"), external_id="other")
    assert problem_of(c.post("/v1/runs", json=again), 409, "already-exists")["position"] > 0
    # An attester may not ingest.
    alice = SigningKey.generate()
    register_attester(served, alice)
    problem_of(c.post("/v1/runs", json=ingestion_envelope(manifests, alice)), 403, "wrong-role")

    run = c.get(f"/v1/runs/{SEED}").json()
    request = rerun_request_envelope(
        SEED,
        SEED_NAME,
        home.key("admin"),
        artifact_digest=run["implementationDigest"],
        workload_digest=run["workloadDigest"],
        product="NVIDIA B200",
        architecture="sm_100",
        expires_at=utc_now() + timedelta(hours=1),
    )
    url = f"/v1/runs/{SEED}/rerun-requests"
    # The seed names no code (its source published none): no job can measure it (issue 32).
    problem_of(c.post(url, json=request), 422, "unbound-job")
    digest, name = submitted_run(served)
    own = rerun_request(served, digest, name)
    reply = c.post(f"/v1/runs/{digest}/rerun-requests", json=own)
    assert check_receipt(reply, own)["event"] == "Run.RerunRequested"
    mine = rerun_request_envelope(
        SEED,
        SEED_NAME,
        alice,
        artifact_digest=run["implementationDigest"],
        workload_digest=run["workloadDigest"],
        product="NVIDIA B200",
        architecture="sm_100",
        expires_at=utc_now() + timedelta(hours=1),
    )
    problem_of(c.post(url, json=mine), 403, "wrong-role")

    key = run["comparisonKey"]
    retract = lifecycle_envelope(SEED, SEED_NAME, home.key("admin"), action="retract", reason="x")
    check_receipt(c.post(f"/v1/runs/{SEED}/lifecycle", json=retract), retract)
    board = c.get(f"/v1/leaderboards/{key}").json()["entries"]
    assert SEED not in [e["run"] for e in board]
    assert c.get(f"/v1/runs/{SEED}").json()["retracted"] is True
    last = c.get(f"/v1/runs/{SEED}/history").json()["events"][-1]
    assert last["event"] == "Run.Retracted"
    assert last["changed"]["ranking"] == "left the rankings"


def test_oversized_bodies_are_refused_before_parsing(tmp_path: Any) -> None:
    config = ServerConfig(**(TEST_CONFIG.__dict__ | {"max_body_bytes": 4096}))
    for served in serve(LedgerHome.at(tmp_path / "home"), config):
        before = tree_size(served)
        huge = {"payloadType": "x", "payload": "A" * 10_000, "signatures": []}
        problem_of(served.client.post("/v1/runs", json=huge), 413, "too-large")
        assert tree_size(served) == before


@pytest.mark.parametrize("limit", ["key", "address"])
def test_rate_limits_answer_429_with_retry_after(tmp_path: Any, limit: str) -> None:
    settings = (
        {"key_rate": 0.01, "key_burst": 2}
        if limit == "key"
        else {
            "address_rate": 0.01,
            "address_burst": 3,
        }
    )
    config = ServerConfig(**(TEST_CONFIG.__dict__ | settings))
    for served in serve(LedgerHome.at(tmp_path / "home"), config):
        alice = SigningKey.generate()
        register_attester(served, alice) if limit == "key" else None
        url = f"/v1/runs/{SEED}/attestations"
        replies = [
            served.client.post(
                url, json=attestation_envelope(SEED, SEED_NAME, alice, type_="note", body=f"{i}")
            )
            for i in range(4)
        ]
        statuses = [r.status_code for r in replies]
        assert statuses[-1] == 429, statuses
        limited = problem_of(replies[-1], 429, "rate-limited")
        assert int(replies[-1].headers["retry-after"]) >= 1
        assert "retry" in limited["detail"]


def test_bodies_naming_someone_elses_key_do_not_spend_their_rate(tmp_path: Any) -> None:
    config = ServerConfig(**(TEST_CONFIG.__dict__ | {"key_rate": 0.01, "key_burst": 2}))
    for served in serve(LedgerHome.at(tmp_path / "home"), config):
        alice = SigningKey.generate()
        junk = {
            "payloadType": "x",
            "payload": "AA==",
            "signatures": [{"keyid": alice.key_id, "sig": "AA=="}],
        }
        for _ in range(5):
            problem_of(served.client.post("/v1/keys", json=junk), 400, "malformed-envelope")
        register_attester(served, alice)  # her own writes still go through


def test_an_ingester_attaches_a_workload_over_http_and_nothing_else_does(served: Served) -> None:
    """POST /v1/runs/{digest}/manifests: the run joins its group; refusals append nothing."""
    c = served.client
    home = served.home
    manifests = seed_manifests()  # the run manifest alone names the workload by digest
    manifests["run"]["metadata"]["name"] = "sol-submission-38823-bare"
    manifests["run"]["spec"]["observedAt"] = "2026-08-24T00:00:00.000Z"
    ingestion = ingestion_envelope(manifests, home.key("ingester"))
    bare = check_receipt(c.post("/v1/runs", json=ingestion), ingestion)["subjectDigest"]
    before = c.get(f"/v1/runs/{bare}").json()
    assert before["comparisonKey"] is None
    seed = served.ledger.run(SEED)
    assert seed is not None
    workload = copy.deepcopy(seed.manifests()["workload"])
    url = f"/v1/runs/{bare}/manifests"
    wrong = copy.deepcopy(workload)
    wrong["spec"]["cases"] = wrong["spec"]["cases"][:1]
    name = "sol-submission-38823-bare"
    problem_of(
        c.post(
            url, json=attachment_envelope(bare, name, {"workload": wrong}, home.key("ingester"))
        ),
        422,
        "digest-mismatch",
    )
    alice = SigningKey.generate()
    register_attester(served, alice)
    size = tree_size(served)
    problem_of(
        c.post(url, json=attachment_envelope(bare, name, {"workload": workload}, alice)),
        403,
        "wrong-role",
    )
    assert tree_size(served) == size
    attach = attachment_envelope(bare, name, {"workload": workload}, home.key("ingester"))
    receipt = check_receipt(c.post(url, json=attach), attach)
    assert receipt["event"] == "Run.ManifestsAttached"
    after = c.get(f"/v1/runs/{bare}").json()
    assert after["comparisonKey"] == c.get(f"/v1/runs/{SEED}").json()["comparisonKey"]
    assert after["evidence"] == before["evidence"]
    # The record's workload section shows the attached manifest.
    assert before["workload"] is None
    assert after["workload"]["manifest"] == workload
    # On the attestation endpoint it is refused: each endpoint takes its own statement.
    again = attachment_envelope(bare, name, {"workload": workload}, home.key("ingester"))
    problem_of(c.post(f"/v1/runs/{bare}/attestations", json=again), 422, "wrong-endpoint")


def test_the_ledgers_own_failure_judging_an_envelope_answers_422_and_stores_nothing(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a verdict on the envelope (it is not "malformed"), not a 500 from what a client
    sent: 422 unprocessable-envelope, the envelope not stored, and the ledger's traceback in
    its log."""
    alice = SigningKey.generate()
    register_attester(served, alice)
    before = tree_size(served)

    def broken(self: Any, signed: Any) -> None:
        raise ZeroDivisionError("a bug of ours")

    monkeypatch.setattr(Run, "attest", broken)
    envelope = attestation_envelope(SEED, SEED_NAME, alice, type_="note", body="x")
    reply = served.client.post(f"/v1/runs/{SEED}/attestations", json=envelope)
    problem = problem_of(reply, 422, "unprocessable-envelope")
    assert "could not judge this envelope (ZeroDivisionError)" in problem["detail"]
    assert tree_size(served) == before


def test_a_fold_that_fails_answers_a_server_fault_not_the_readers(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Should admission and the folds ever disagree about an admitted event, reads say the
    views have stopped and where (500 views-stalled), not that the reader sent something
    wrong (the fold's own refusal answered 422), and never answer from views that silently
    stopped. Once the fold works again the views catch up, nothing lost."""
    c = served.client
    alice = SigningKey.generate()
    register_attester(served, alice)
    counted = {r["digest"]: r["attestations"] for r in c.get("/v1/runs").json()["items"]}

    def refuse(views: Any, event: Any) -> None:
        raise CanonicalizationError("a fold's own refusal")

    monkeypatch.setitem(_HANDLERS, EventName.RUN_ATTESTED, refuse)
    envelope = attestation_envelope(SEED, SEED_NAME, alice, type_="note", body="stalls")
    receipt = check_receipt(c.post(f"/v1/runs/{SEED}/attestations", json=envelope), envelope)
    for path in ("/v1/runs", f"/v1/runs/{SEED}", "/v1/groups"):
        body = problem_of(c.get(path), 500, "views-stalled")
        assert f"position {receipt['position'] - 1}" in body["detail"]
        assert "a fold's own refusal" in body["detail"]
    monkeypatch.undo()
    runs = c.get("/v1/runs")
    assert runs.status_code == 200, runs.text
    after = {r["digest"]: r["attestations"] for r in runs.json()["items"]}
    assert after == counted | {SEED: counted[SEED] + 1}


def test_a_lone_surrogate_in_a_signed_statement_is_refused_and_reads_go_on(
    served: Served,
) -> None:
    """A signer's own JSON may escape a lone surrogate (``"\\ud800"``) where no model looks
    (``predicate.sourceNative``). It was admitted, and the store's reader (msgspec) refuses
    it: every fold stopped, for every run, for good. Now admission refuses it by name."""
    c = served.client
    home = served.home
    manifests = seed_manifests()
    manifests["run"]["metadata"]["name"] = "sol-submission-38823-surrogate"
    manifests["run"]["spec"]["observedAt"] = "2026-08-24T00:00:00.000Z"  # a run of its own
    envelope = ingestion_envelope(manifests, home.key("ingester"))
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"].setdefault("sourceNative", {})["note"] = "\ud800"
    payload = json.dumps(statement).encode()  # the signer's bytes: "\ud800" stays escaped
    assert b"\\ud800" in payload
    signature = home.key("ingester").sign(pae(PAYLOAD_TYPE, payload))
    hostile = dict(
        envelope,
        payload=base64.b64encode(payload).decode(),
        signatures=[{**envelope["signatures"][0], "sig": base64.b64encode(signature).decode()}],
    )
    before = tree_size(served)
    problem = problem_of(c.post("/v1/runs", json=hostile), 400, "malformed-envelope")
    assert "lone surrogate U+D800" in problem["detail"]
    assert tree_size(served) == before
    assert c.get(f"/v1/runs/{SEED}").status_code == 200
    assert c.get(f"/v1/runs/{SEED}/history").status_code == 200


@pytest.mark.parametrize(
    ("manifest", "field"),
    [("run", ("metadata", "title")), ("environment", ("spec", "hardware", "product"))],
    ids=["run title", "product"],
)
def test_nul_in_manifest_text_is_refused_and_reads_go_on(
    served: Served, manifest: str, field: tuple[str, ...]
) -> None:
    """An honest client could sign a run titled "evil\\x00title": the manifest models take
    any text. Admitted, the fold copied it into a text column PostgreSQL refuses, and every
    view stopped for every run, for good (SQLite stored it). Now admission refuses it."""
    c = served.client
    manifests = seed_manifests()
    manifests["run"]["metadata"]["name"] = "sol-submission-38823-nul"
    manifests["run"]["spec"]["observedAt"] = "2026-08-25T00:00:00.000Z"  # a run of its own
    target = manifests[manifest]
    for key in field[:-1]:
        target = target[key]
    target[field[-1]] = "evil\x00text"
    if manifest == "environment":  # the run names its environment by digest
        manifests["run"]["spec"]["environmentDigest"] = manifest_digest(manifests["environment"])
    envelope = ingestion_envelope(manifests, served.home.key("ingester"))
    before = tree_size(served)
    problem = problem_of(c.post("/v1/runs", json=envelope), 400, "malformed-envelope")
    assert "U+0000 (NUL)" in problem["detail"]
    assert tree_size(served) == before
    assert c.get(f"/v1/runs/{SEED}").status_code == 200
    assert c.get("/v1/groups").status_code == 200


def test_a_worker_answers_an_ingestions_bad_signature_without_the_writer(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stateless checks run in the server's worker (``ledger.admission_checks``): an
    ingestion whose signature does not verify under the key its key id names is answered
    there, 403 bad-signature as the writer answers it, nothing stored; the writer gets the
    envelopes that pass, with the worker's signature verdict."""
    service = served.app.state.service
    sent: list[Any] = []
    submit = service.writer.submit

    def counted(envelope: Any) -> Any:
        sent.append(envelope)
        return submit(envelope)

    monkeypatch.setattr(service.writer, "submit", counted)
    manifests = seed_manifests()
    manifests["run"]["metadata"]["name"] = "sol-submission-38823-forged"
    manifests["run"]["spec"]["observedAt"] = "2026-08-23T00:00:00.000Z"
    ingester = served.home.key("ingester")
    forged = ingestion_envelope(manifests, SigningKey.generate())
    forged["signatures"][0]["keyid"] = ingester.key_id
    before = tree_size(served)
    problem_of(served.client.post("/v1/runs", json=forged), 403, "bad-signature")
    assert tree_size(served) == before and sent == []
    genuine = ingestion_envelope(manifests, ingester)
    check_receipt(served.client.post("/v1/runs", json=genuine), genuine)
    assert len(sent) == 1 and sent[0].verdict is not None
    assert sent[0].verdict.key_sha256 == ingester.key_id
