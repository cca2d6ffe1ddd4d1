"""The served OpenAPI document tells the truth: it is valid, every success has a typed body,
every operation lists the problem+json refusals it can send, and real replies of the demo
ledger (reads, writes and refusals, on SQLite and PostgreSQL) fit the schema documented for
their status and media type."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012
from rerun_results import ON_B200, device, rerun_request, submitted_run
from served_app import Served
from test_api_reads import SEED
from test_api_writes import SEED_NAME

from api.demo import seed_manifests
from domain.statements import Role
from ledger.signing.authoring import (
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
    rerun_claim_envelope,
)
from ledger.signing.keys import SigningKey

PROBLEM_JSON = "application/problem+json"
PROBLEM_REF = "#/components/schemas/Problem"
DOC = "urn:kernelindex:openapi"  # the document's id when resolving $refs into it
METHODS = ("get", "post", "put", "patch", "delete")


def document(served: Served) -> dict[str, Any]:
    doc: dict[str, Any] = served.client.get("/schema/openapi.json").json()
    return doc


def operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, op)
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if method in METHODS
    ]


def resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        node: Any = doc
        for part in schema["$ref"].removeprefix("#/").split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        schema = node
    return schema


def is_json(media: str) -> bool:
    """One JSON document (a bundle's application/x-ndjson is a stream of them)."""
    return media == "application/json" or media.endswith("+json")


def pointer(*parts: str) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


# --------------------------------------------------------------------- the document itself


def test_the_served_document_is_valid_openapi_3_1(served_sqlite: Served) -> None:
    doc = document(served_sqlite)
    assert doc["openapi"].startswith("3.1")
    validate(doc)


def test_every_success_has_a_typed_body(served_sqlite: Served) -> None:
    doc = document(served_sqlite)
    for path, method, op in operations(doc):
        successes = {s: r for s, r in op["responses"].items() if s.startswith("2")}
        assert successes, f"{method} {path}"
        for status, reply in successes.items():
            where = f"{method.upper()} {path} {status}"
            assert reply.get("content"), where
            for media, body in reply["content"].items():
                assert body.get("schema"), f"{where} {media}: no schema"
                if not is_json(media):
                    continue
                schema = resolve(doc, body["schema"])
                # A JSON body is a model with fields, or a list of models: never the bare
                # object (dict[str, Any]) the document used to say for every reply.
                if schema.get("type") == "array":
                    schema = resolve(doc, schema["items"])
                assert schema.get("type") == "object" and schema.get("properties"), where
    # Writes document both receipts: a new event (201) and the original of a duplicate (200).
    attest = doc["paths"]["/v1/runs/{digest}/attestations"]["post"]["responses"]
    assert attest["200"]["content"] == attest["201"]["content"]
    assert "Location" in attest["201"]["headers"]
    comparisons = doc["paths"]["/v1/comparisons"]["get"]["responses"]["200"]["content"]
    assert set(comparisons) == {"application/json", "text/csv", "text/markdown"}


def test_figures_are_numbers_not_integer_or_number(served_sqlite: Served) -> None:
    """``int | float`` fields are "number": a oneOf of integer and number fails on integers."""
    text = served_sqlite.client.get("/schema/openapi.json").text
    assert '{"type":"integer"},{"type":"number"}' not in text.replace(" ", "")
    record = document(served_sqlite)["components"]["schemas"]["PrimaryMeasurement"]
    assert {"type": "number"} in record["properties"]["value"]["oneOf"]


def test_every_operation_lists_its_refusals_as_problem_json(served_sqlite: Served) -> None:
    doc = document(served_sqlite)
    problem = doc["components"]["schemas"]["Problem"]
    assert set(problem["required"]) == {"type", "title", "status", "detail", "code"}
    assert set(problem["properties"]) == {
        "type",
        "title",
        "status",
        "detail",
        "instance",
        "code",
        "requestId",
        "position",
    }
    for path, method, op in operations(doc):
        where = f"{method.upper()} {path}"
        refusals = {int(s): r for s, r in op["responses"].items() if int(s) >= 400}
        for status, reply in refusals.items():
            assert reply["content"] == {PROBLEM_JSON: {"schema": {"$ref": PROBLEM_REF}}}, (
                f"{where} {status}"
            )
            assert reply["description"].split(": ")[1], f"{where} {status}: no codes named"
        # Every request meets the rate limit, the store and, at worst, a server fault.
        assert {429, 500, 503} <= set(refusals), where
        assert "Retry-After" in refusals[429]["headers"], where
        if op.get("parameters") or "requestBody" in op:
            assert 400 in refusals, where
        if "requestBody" in op:  # a signed write
            assert {400, 403, 404, 408, 409, 413, 415, 422, 507} <= set(refusals), where
        else:
            assert not {403, 408, 409, 413, 415, 507} & set(refusals), where
        if "{" in path:  # a resource named in the path may not exist
            assert 404 in refusals, where
    responses = doc["paths"]
    assert set(responses["/health"]["get"]["responses"]) == {"200", "400", "429", "500", "503"}
    assert (
        "ambiguous-reference"
        in responses["/v1/runs/{digest}"]["get"]["responses"]["400"]["description"]
    )
    assert "wrong-role" in responses["/v1/runs"]["post"]["responses"]["403"]["description"]


# ------------------------------------------------------------- real replies fit the document


def template_of(doc: dict[str, Any], method: str, path: str) -> str | None:
    """The documented path a request's path matches (literal segments before parameters)."""
    matches = [
        template
        for template, item in doc["paths"].items()
        if method in item
        and re.fullmatch(re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)), path)
    ]
    return min(matches, key=lambda t: t.count("{")) if matches else None


def check_reply(doc: dict[str, Any], reply: Any) -> None:
    request = reply.request
    check(doc, request.method, request.url.path, reply.status_code, reply.headers, reply.text)


def check(
    doc: dict[str, Any], method: str, path: str, status: int, headers: Any, text: str
) -> None:
    """The reply's status and media type are documented for its operation and its body
    validates against the schema documented for them ($refs resolved in the document)."""
    method = method.lower()
    template = template_of(doc, method, path)
    assert template is not None, f"{method} {path} is not a documented operation"
    where = f"{method.upper()} {template} -> {status}"
    documented = doc["paths"][template][method]["responses"]
    assert str(status) in documented, f"{where}: status not documented"
    content = documented[str(status)]["content"]
    media = headers["content-type"].split(";")[0].strip()
    assert media in content or "*/*" in content, f"{where}: {media} not documented"
    if not is_json(media):
        return
    registry = Registry().with_resource(
        DOC, Resource.from_contents(doc, default_specification=DRAFT202012)
    )
    schema_at = pointer("paths", template, method, "responses", str(status))
    schema_at += pointer("content", media, "schema")
    validator = Draft202012Validator({"$ref": f"{DOC}#{schema_at}"}, registry=registry)
    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator.iter_errors(json.loads(text))
    ]
    assert not errors, f"{where}: " + "; ".join(errors[:5])


def reads(served: Served) -> list[Any]:
    c = served.client
    replies = [c.get("/v1/runs", params={"limit": 200}), c.get("/v1/runs", params={"limit": 1})]
    runs = [r["digest"] for r in replies[0].json()["items"]]
    for run in runs:
        replies += [c.get(f"/v1/runs/{run}"), c.get(f"/v1/runs/{run}/history")]
    groups = c.get("/v1/groups")
    replies.append(groups)
    for group in groups.json():
        key = group["comparisonKey"]
        replies += [
            c.get(f"/v1/leaderboards/{key}"),
            c.get(f"/v1/leaderboards/{key}", params={"view": "verified", "minLevel": "reported"}),
            c.get("/v1/bundle", params={"cohort": key}),
        ]
    operations = c.get("/v1/operations")
    replies.append(operations)
    replies += [c.get(f"/v1/operations/{o['operation']}") for o in operations.json()]
    keys = c.get("/v1/keys")
    replies += [keys, c.get("/v1/keys", params={"limit": 1})]
    for key in keys.json()["items"]:
        replies += [c.get(f"/v1/keys/{key['keyId']}"), c.get(f"/v1/keys/{key['keyId']}/history")]
    jobs = c.get("/v1/jobs")
    replies += [jobs, *(c.get(f"/v1/jobs/{j['jobId']}") for j in jobs.json())]
    size = c.get("/v1/log/checkpoint").json()["size"]
    replies += [
        c.get("/v1/search", params={"q": "B200 v1.1"}),
        c.get("/v1/comparisons", params={"runs": ",".join(runs[:3])}),
        c.get("/v1/comparisons", params={"runs": ",".join(runs[:3]), "format": "csv"}),
        c.get("/v1/compare", params={"a": SEED, "b": runs[0]}),
        c.get("/v1/trust-root"),
        c.get("/v1/log/checkpoint"),
        c.get("/v1/log/proofs/inclusion", params={"leaf": 0}),
        c.get("/v1/log/proofs/consistency", params={"old": 1}),
        c.get("/v1/log/entries", params={"start": 0, "end": size}),
        c.get("/v1/bundle", params={"run": SEED}),
        c.get("/health"),
    ]
    return replies


def refusals(served: Served) -> list[Any]:
    c = served.client
    url = f"/v1/runs/{SEED}/attestations"
    stranger = SigningKey.generate()
    unknown = attestation_envelope(SEED, SEED_NAME, stranger, type_="note", body="who am I")
    # The seed run again, from another envelope: it exists already.
    again = ingestion_envelope(seed_manifests(), served.home.key("ingester"), external_id="x")
    return [
        c.get("/v1/runs", params={"level": "legendary"}),  # 400
        c.get("/v1/runs", params={"cursor": "garbage!"}),  # 404
        c.get("/v1/runs/7e"),  # 404, a prefix too short
        c.get("/v1/runs/sha256:" + "0" * 64 + "/history"),
        c.get("/v1/leaderboards/sha256:" + "1" * 64),
        c.get("/v1/operations/no-such-operation"),
        c.get("/v1/comparisons", params={"runs": SEED}),  # 422: fewer than two
        c.get("/v1/keys/sha256:" + "2" * 64),
        c.get("/v1/jobs/00000000-0000-4000-8000-000000000000"),
        c.get("/v1/log/proofs/inclusion", params={"leaf": 10**6}),
        c.get("/v1/artifacts/sha256:" + "3" * 64),
        c.get("/v1/bundle"),
        c.post(url, json=unknown),  # 403
        c.post(url, json={"payloadType": 1}),  # 400
        c.post(url, content=b"x", headers={"content-type": "text/plain"}),  # 415
        c.post("/v1/keys", json=unknown),  # 422: not a key statement
        c.post("/v1/runs", json=again),  # 409, with the position it collides with
    ]


def writes(served: Served) -> list[Any]:
    c, admin = served.client, served.home.key("admin")
    alice, agent = SigningKey.generate(), SigningKey.generate()
    register = key_registration_envelope(alice.public, [Role.ATTESTER], alice, label="alice")
    replies = [c.post("/v1/keys", json=register), c.post("/v1/keys", json=register)]
    enrol = key_registration_envelope(
        agent.public, [Role.AGENT], admin, label="agent", devices=ON_B200
    )
    replies.append(c.post("/v1/keys", json=enrol))
    note = attestation_envelope(SEED, SEED_NAME, alice, type_="reproduced", body="same mean")
    replies.append(c.post(f"/v1/runs/{SEED}/attestations", json=note))
    run, name = submitted_run(served)  # the seed names no code: no job can measure it
    request = rerun_request(served, run, name)
    replies.append(check_reply_ok(c.post(f"/v1/runs/{run}/rerun-requests", json=request)))
    job = c.get("/v1/jobs").json()[0]
    claim = rerun_claim_envelope(run, name, agent, job_id=job["jobId"], device=device())
    replies.append(c.post(f"/v1/jobs/{job['jobId']}/claims", json=claim))
    return replies


def check_reply_ok(reply: Any) -> Any:
    assert reply.status_code in {200, 201}, reply.text
    return reply


def test_real_replies_fit_the_documented_schemas(served: Served) -> None:
    doc = document(served)
    written = writes(served)
    assert [r.status_code for r in written] == [201, 200, 201, 201, 201, 201]
    assert written[-1].json()["job"]["claimant"]  # the claim's receipt carries the job
    refused = refusals(served)
    statuses = {r.status_code for r in refused}
    assert {400, 403, 404, 409, 415, 422} <= statuses, statuses
    assert "position" in refused[-1].json()  # the extension field is documented too
    for reply in [*written, *reads(served), *refused]:
        check_reply(doc, reply)


def test_a_reply_that_does_not_fit_the_document_is_caught(served_sqlite: Served) -> None:
    """The check above can fail: a field of the wrong type, an undocumented status."""
    doc = document(served_sqlite)
    reply = served_sqlite.client.get("/health")
    check_reply(doc, reply)
    wrong = json.dumps(reply.json() | {"treeSize": "many"})
    with pytest.raises(AssertionError, match="treeSize"):
        check(doc, "GET", "/health", 200, reply.headers, wrong)
    with pytest.raises(AssertionError, match="status not documented"):
        check(doc, "GET", "/health", 404, reply.headers, reply.text)
    problem = served_sqlite.client.get("/v1/runs/ffffffff")
    check_reply(doc, problem)
    with pytest.raises(AssertionError, match="status"):  # a problem's status is an HTTP one
        check(
            doc,
            "GET",
            "/v1/runs/ffffffff",
            404,
            problem.headers,
            json.dumps({**problem.json(), "status": "404"}),
        )


def test_a_receipt_is_documented_down_to_its_inclusion_proof(served_sqlite: Served) -> None:
    """A receipt's proof is typed, not a bare object: a client can rely on its fields."""
    schemas = document(served_sqlite)["components"]["schemas"]
    log = schemas["Receipt"]["properties"]["log"]["oneOf"]
    assert {"$ref": "#/components/schemas/InclusionProof"} in log
    proof = schemas["InclusionProof"]
    assert set(proof["required"]) == {"leafIndex", "treeSize", "rootHash", "hashes"}
