"""The JSON read API over the demo ledger, on SQLite and PostgreSQL: what a client sees."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from decoded_events import decode_counter
from served_app import Served

from domain.statements import Role
from ledger.proofs.merkle import verify_consistency, verify_inclusion
from ledger.signing.trust import TrustRoot
from ledger.verify import VerificationPolicy, verify_bundle_lines

SEED = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
NAME = "sol-submission-38823"
PROBLEM = "application/problem+json"


def problem_of(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body: dict[str, Any] = response.json()
    assert body["type"] == f"https://kernelindex.dev/problems/{code}"
    assert body["status"] == status
    assert body["code"] == code
    assert body["detail"]
    assert body["requestId"] == response.headers["x-request-id"]
    return body


def test_run_listing_filters_and_pages(served: Served) -> None:
    c = served.client
    everything = c.get("/v1/runs", params={"limit": 200}).json()
    assert everything["next"] is None
    digests = [r["digest"] for r in everything["items"]]
    assert SEED in digests and len(digests) == 4  # the seed, its group of 3, one other
    seed = next(r for r in everything["items"] if r["digest"] == SEED)
    assert seed["gpu"] == "NVIDIA B200" and seed["source"] == "sol-execbench"

    # Cursor pagination walks the same runs, one page at a time, in ingestion order.
    walked: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 1} | ({"cursor": cursor} if cursor else {})
        page = c.get("/v1/runs", params=params).json()
        walked += [r["digest"] for r in page["items"]]
        cursor = page["next"]
        if cursor is None:
            break
    assert walked == digests

    key = seed["comparisonKey"]
    assert len(c.get("/v1/runs", params={"comparisonKey": key}).json()["items"]) == 3
    assert c.get("/v1/runs", params={"source": "gpumode"}).json()["items"] == []
    assert len(c.get("/v1/runs", params={"gpu": "NVIDIA B200"}).json()["items"]) == 4
    level = seed["evidenceLevel"]
    by_level = c.get("/v1/runs", params={"level": level}).json()["items"]
    assert SEED in [r["digest"] for r in by_level]
    problem_of(c.get("/v1/runs", params={"level": "legendary"}), 400, "malformed-request")
    problem_of(c.get("/v1/runs", params={"cursor": "garbage!"}), 404, "not-found")
    problem_of(c.get("/v1/runs", params={"limit": 0}), 400, "malformed-request")


def test_run_record_has_every_section_of_the_run_page(served: Served) -> None:
    record = served.client.get("/v1/runs/7e18c26c").json()
    assert record["digest"] == SEED
    assert record["primary"] == {
        "metric": "latency",
        "statistic": "mean",
        "unit": "ns",
        "value": 1750693,
        "latencyNs": 1750693,
    }
    assert record["standings"]["source-native"]["label"] == (
        "Rank 3 of 3 in its comparison group · source-native comparison"
    )
    assert record["evidence"]["level"] in {"reported", "reproducible"}
    assert record["evidence"]["reasons"]
    assert record["compareWithFirst"]["ratio"] > 1
    assert record["sourceNativeMetrics"]["sol_score"] == 0.559752
    assert record["identity"]["manifestDigests"]["run"] == SEED
    assert set(record["identity"]["manifestDigests"]) >= {"run", "protocol", "environment"}
    assert record["correctness"]["status"] == "passed"
    assert record["workload"]["cases"] > 0
    assert record["measurements"]["timing"]["primaryStatistic"] == "mean"
    assert record["protocolManifest"]["kind"] == "BenchmarkProtocol"
    assert record["environmentManifest"]["spec"]["hardware"]["product"] == "NVIDIA B200"
    assert [n["type"] for n in record["notes"]] == ["environment_note"]
    assert record["replications"] == []
    assert record["canonicalManifest"].startswith('{"apiVersion":"kernelindex.dev/v1alpha1"')
    citation = record["citation"]
    assert citation["digest"] == SEED
    assert citation["permalink"].endswith(f"/runs/{SEED}")
    assert len(citation["accessed"]) == 10
    # The source under its own name (as the catalog names it), not its slug.
    assert citation["value"] == "mean latency 1.751 ms"
    assert citation["source"] == "NVIDIA SOL-ExecBench"
    bibtex = citation["bibtex"]
    assert bibtex.startswith("@misc{kernelindex-7e18c26ca3b6,") and bibtex.endswith("}")
    assert f"url = {{{citation['permalink']}}}" in bibtex and SEED in bibtex
    assert bibtex.count("{") == bibtex.count("}")


def test_run_references_that_do_not_resolve(served: Served) -> None:
    c = served.client
    problem_of(c.get("/v1/runs/sha256:" + "0" * 64), 404, "not-found")
    problem_of(c.get("/v1/runs/ffffffff"), 404, "not-found")
    assert "(a prefix needs 4+ hex)" in problem_of(c.get("/v1/runs/7e"), 404, "not-found")["detail"]
    problem_of(c.get("/v1/runs/not-hex!"), 404, "not-found")
    problem_of(c.get("/v1/runs/" + "a" * 301), 400, "malformed-request")
    # The same references as the CLI's: a name, the source's id, source#id, a prefix.
    for reference in ("sol-submission-38823", "38823", "sol-execbench%2338823", SEED[:12]):
        assert c.get(f"/v1/runs/{reference}").json()["digest"] == SEED, reference
    problem_of(c.get("/v1/nothing/here"), 404, "not-found")


def test_history_carries_envelopes_signers_and_leaves(served: Served) -> None:
    history = served.client.get(f"/v1/runs/{SEED}/history").json()
    assert history["allVerified"] is True
    events = history["events"]
    assert [e["event"] for e in events] == ["Run.Ingested", "Run.Attested"]
    assert [e["role"] for e in events] == ["ingester", "attester"]
    for e in events:
        assert e["verified"] is True
        assert e["envelope"]["payloadType"] == "application/vnd.in-toto+json"
        assert e["signer"].startswith("sha256:")
        assert isinstance(e["leafIndex"], int)
        assert e["says"]
    assert events[1]["says"].startswith("environment_note: Demo attestation")
    # What each event changed: ingestion set the level; the attestation changed nothing.
    assert events[0]["changed"]["evidence"]["from"] is None
    level = served.client.get(f"/v1/runs/{SEED}").json()["evidence"]["level"]
    assert events[0]["changed"]["evidence"]["to"] == level
    assert events[1]["changed"] == {}


def test_groups_leaderboards_and_compare(served: Served) -> None:
    c = served.client
    groups = c.get("/v1/groups").json()
    assert sorted(g["runs"] for g in groups) == [1, 3]
    assert {g["gpu"] for g in groups} == {"NVIDIA B200"}
    key = next(g["comparisonKey"] for g in groups if g["runs"] == 3)
    board = c.get(f"/v1/leaderboards/{key}").json()
    assert board["view"] == "source-native"
    ranks = [e["rank"] for e in board["entries"]]
    assert ranks == [1, 2, 3]
    assert board["entries"][2]["run"] == SEED
    assert board["entries"][0]["ratioToFirst"] == 1.0
    verified = c.get(f"/v1/leaderboards/{key}", params={"view": "verified"}).json()
    assert verified["entries"] == []  # nothing has been rerun
    problem_of(c.get(f"/v1/leaderboards/{key}", params={"view": "best"}), 400, "malformed-request")
    problem_of(c.get("/v1/leaderboards/sha256:" + "1" * 64), 404, "not-found")
    problem_of(c.get("/v1/leaderboards/not-a-key"), 404, "not-found")
    problem_of(c.get("/v1/leaderboards/sha256:" + "a" * 65), 400, "malformed-request")

    first = board["entries"][0]["run"]
    compared = c.get("/v1/compare", params={"a": SEED, "b": first}).json()
    assert compared["a"] == SEED and compared["b"] == first and compared["ratio"] > 1
    assert compared["differences"]
    problem_of(c.get("/v1/compare", params={"a": SEED}), 400, "malformed-request")


def test_keys_and_their_history(served: Served) -> None:
    c = served.client
    page = c.get("/v1/keys").json()
    assert page["next"] is None
    labels = {k["label"]: k for k in page["items"]}
    first = c.get("/v1/keys", params={"limit": 2}).json()
    rest = c.get("/v1/keys", params={"limit": 50, "cursor": first["next"]}).json()
    assert [k["keyId"] for k in first["items"] + rest["items"]] == [
        k["keyId"] for k in page["items"]
    ]
    assert set(labels) == {"admin", "ingester", "log", "demo"}
    assert labels["demo"]["roles"] == ["attester"] and labels["demo"]["status"] == "active"
    one = c.get(f"/v1/keys/{labels['admin']['keyId']}").json()
    assert one == labels["admin"]
    history = c.get(f"/v1/keys/{labels['demo']['keyId']}/history").json()
    assert [e["event"] for e in history["events"]] == ["Principal.Registered"]
    problem_of(c.get("/v1/keys/sha256:" + "2" * 64), 404, "not-found")


def test_log_checkpoint_proofs_and_entries_verify(served: Served) -> None:
    c = served.client
    root = TrustRoot.from_json(c.get("/v1/trust-root").json())
    assert root.origin == served.ledger.trust_root.origin
    checkpoint = c.get("/v1/log/checkpoint").json()
    size = checkpoint["size"]
    assert checkpoint["note"].startswith(root.origin + "\n" + str(size) + "\n")
    root_hash = base64.b64decode(checkpoint["rootHash"])

    entries = c.get("/v1/log/entries", params={"start": 0}).json()
    assert [e["leafIndex"] for e in entries] == list(range(size))
    for entry in entries:
        proof = c.get("/v1/log/proofs/inclusion", params={"leaf": entry["leafIndex"]}).json()
        verify_inclusion(
            base64.b64decode(entry["leafHash"]),
            entry["leafIndex"],
            proof["treeSize"],
            [base64.b64decode(h) for h in proof["hashes"]],
            root_hash,
        )
    consistency = c.get("/v1/log/proofs/consistency", params={"old": 3, "new": size}).json()
    verify_consistency(
        3,
        size,
        [base64.b64decode(h) for h in consistency["hashes"]],
        base64.b64decode(consistency["root1"]),
        root_hash,
    )
    problem_of(c.get("/v1/log/proofs/inclusion", params={"leaf": size}), 404, "not-found")
    problem_of(c.get("/v1/log/proofs/inclusion", params={"leaf": -1}), 400, "malformed-request")
    problem_of(
        c.get("/v1/log/proofs/consistency", params={"old": size, "new": 2}), 404, "not-found"
    )


def test_bundle_export_verifies_offline(served: Served) -> None:
    c = served.client
    response = c.get("/v1/bundle", params={"run": "7e18c26c"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/x-ndjson")
    report = verify_bundle_lines(
        response.text.splitlines(),
        VerificationPolicy(trust_root=served.ledger.trust_root),
        workers=1,
    )
    assert report.verified, report.findings
    key = c.get("/v1/runs/7e18c26c").json()["comparisonKey"]
    cohort = c.get("/v1/bundle", params={"cohort": key})
    assert cohort.status_code == 200 and cohort.text.count('"type":"claim"') == 3
    problem_of(c.get("/v1/bundle"), 404, "not-found")


def test_artifacts_and_health(served: Served) -> None:
    c = served.client
    problem_of(c.get("/v1/artifacts/sha256:" + "3" * 64), 404, "not-found")
    health = c.get("/health")
    assert health.status_code == 200
    assert health.json()["status"] == "ok" and health.json()["treeSize"] >= 9
    mine = c.get("/health", headers={"X-Request-ID": "client-chosen-id-42"})
    assert mine.headers["x-request-id"] == "client-chosen-id-42"
    odd = c.get("/health", headers={"X-Request-ID": "bad id with spaces"})
    assert odd.headers["x-request-id"] != "bad id with spaces"


def test_openapi_document_describes_the_json_api(served: Served) -> None:
    schema = served.client.get("/schema/openapi.json").json()
    assert schema["openapi"].startswith("3.1")
    paths = set(schema["paths"])
    assert {
        "/v1/runs",
        "/v1/runs/{digest}",
        "/v1/runs/{digest}/history",
        "/v1/runs/{digest}/attestations",
        "/v1/keys",
        "/v1/leaderboards/{key}",
        "/v1/log/checkpoint",
        "/v1/log/proofs/inclusion",
        "/v1/log/proofs/consistency",
        "/v1/bundle",
        "/health",
    } <= paths
    body = schema["paths"]["/v1/runs/{digest}/attestations"]["post"]["requestBody"]
    assert "application/json" in body["content"]


# ---------------------------------------------------- reads that do not grow (issue 13 §7)


def test_a_flooded_runs_history_and_record_come_a_page_at_a_time(served: Served) -> None:
    """Anyone may attest: 120 notes on the seed run. The record shows the newest 20 and the
    count; the history comes in pages of at most the limit, whose union is every event."""
    from ledger.signing.authoring import attestation_envelope, key_registration_envelope
    from ledger.signing.keys import SigningKey

    c = served.client
    keys = [SigningKey.generate() for _ in range(6)]
    for key in keys:
        served.ledger.append(key_registration_envelope(key.public, [Role.ATTESTER], key))
    served.ledger.append_many(
        [
            attestation_envelope(
                SEED, "sol-submission-38823", keys[i % 6], type_="note", body=f"{i}"
            )
            for i in range(120)
        ]
    )
    record = c.get(f"/v1/runs/{SEED}").json()
    total = record["events"]
    assert record["attestationCount"] == total - 1 and len(record["attestations"]) == 20
    assert record["shownEventsVerified"] and record["eventsShown"] == 21
    assert len(record["notes"]) + len(record["replications"]) == 20
    seen: list[int] = []
    start: int | None = 1
    while start is not None:
        page = c.get(f"/v1/runs/{SEED}/history", params={"start": start, "limit": 25}).json()
        assert page["total"] == total and page["start"] == start and len(page["events"]) <= 25
        assert page["allVerified"]
        seen += [e["version"] for e in page["events"]]
        start = page["next"]
    assert seen == list(range(1, total + 1))
    default = c.get(f"/v1/runs/{SEED}/history").json()
    assert len(default["events"]) == 50 and default["next"] == 51
    problem_of(c.get(f"/v1/runs/{SEED}/history", params={"limit": 501}), 400, "malformed-request")
    html = c.get(f"/runs/{SEED}/history", params={"start": 51}).text
    assert 'rel="next"' in html and 'rel="first"' in html and "Events 51–100 of" in html


def test_reads_that_compare_with_a_flooded_run_decode_no_more_of_it(
    served: Served, monkeypatch: Any
) -> None:
    """Anyone may flood a group's #1 with notes: the record and page of another run of the
    group (which compare it with #1) and a comparison naming #1 decode as many stored events
    after 120 notes on #1 as before. (They replayed all of #1's events to read its manifests:
    a quiet run's record took 33 ms next to a #1 with 2,000 notes, against 6 ms.)"""
    from ledger.signing.authoring import attestation_envelope, key_registration_envelope
    from ledger.signing.keys import SigningKey

    c = served.client
    seed = c.get(f"/v1/runs/{SEED}").json()
    board = c.get(f"/v1/leaderboards/{seed['comparisonKey']}").json()
    digests = [e["run"] for e in board["entries"]]
    first, other = digests[0], digests[1]
    served.settle_views()
    measure = decode_counter(served.ledger.mapper, monkeypatch)
    reads = (
        f"/v1/runs/{other}",
        f"/runs/{other}",
        f"/v1/comparisons?runs={other},{first}",
    )

    def read(path: str) -> None:
        reply = c.get(path)
        assert reply.status_code == 200, (path, reply.text[:300])

    def cost() -> list[int]:
        return [measure(lambda path=path: read(path))[0] for path in reads]

    first_name = c.get(f"/v1/runs/{first}").json()["name"]
    assert c.get(f"/v1/runs/{other}").json()["compareWithFirst"]["b"] == first
    before = cost()
    keys = [SigningKey.generate() for _ in range(6)]
    for key in keys:
        served.ledger.append(key_registration_envelope(key.public, [Role.ATTESTER], key))
    served.ledger.append_many(
        [
            attestation_envelope(first, first_name, keys[i % 6], type_="note", body=f"{i}")
            for i in range(120)
        ]
    )
    cost()  # the views fold the notes in: a catch-up's cost, once, not a read's
    assert cost() == before


# ------------------------------------------------------------------ issue 13 §8


def test_cursors_are_exactly_the_ones_issued(served: Served) -> None:
    """A cursor of 20 digits overflowed the database's integer (a 500); non-ASCII digits
    decoded to the same position as ASCII ones. Only the API's own tokens are accepted."""
    c = served.client

    def token(text: str) -> str:
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")

    page = c.get("/v1/runs", params={"limit": 1}).json()
    assert c.get("/v1/runs", params={"cursor": page["next"], "limit": 1}).status_code == 200
    for bad in ("p" + "9" * 20, "p" + "\u0661\u0662", "p007", "p-1", "p 1", "p1\n"):
        problem_of(c.get("/v1/runs", params={"cursor": token(bad)}), 404, "not-found")
    problem_of(c.get("/v1/runs", params={"cursor": token("p1") + "="}), 404, "not-found")


def test_the_citation_never_reflects_the_clients_host_header(served: Served) -> None:
    reply = served.client.get(f"/v1/runs/{SEED}", headers={"Host": "evil.example"})
    citation = reply.json()["citation"]
    assert "evil.example" not in json.dumps(citation)
    assert citation["permalink"] == f"/runs/{SEED}"  # no public URL configured here
    page = served.client.get(f"/runs/{SEED}", headers={"Host": "evil.example"}).text
    assert "evil.example" not in page


def test_every_response_carries_the_security_headers(served: Served) -> None:
    paths = ("/", f"/runs/{SEED}", f"/v1/runs/{SEED}", "/v1/nothing", "/static/style.css")
    for path in (*paths, "/static/search.js", "/search?q=b200"):
        headers = served.client.get(path).headers
        assert headers["x-content-type-options"] == "nosniff", path
        csp = headers["content-security-policy"]
        assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp, path
        # Only the site's own script files run (search suggestions): no inline script, no eval.
        assert "script-src 'self';" in csp and "unsafe" not in csp, path
        assert headers["referrer-policy"] == "no-referrer"
    assert "style=" not in served.client.get(f"/runs/{SEED}").text  # the CSP forbids it
    for page in ("/", "/search?q=b200"):
        scripts = re.findall(r"<script[^>]*>", served.client.get(page).text)
        assert scripts == ['<script src="/static/search.js" defer>'], page


def test_search_over_http_matches_the_cli(served: Served) -> None:
    c = served.client
    found = c.get("/v1/search", params={"q": "B200 v1.1 decoder"}).json()
    assert [g["comparisonKey"] for g in found["items"]] == [
        c.get(f"/v1/runs/{SEED}").json()["comparisonKey"]
    ]
    assert found["total"] == 1 and found["pages"] == 1 and found["next"] is None
    nothing = c.get("/v1/search", params={"q": "no-such-kernel"}).json()
    assert (nothing["items"], nothing["total"]) == ([], 0)
    assert c.get("/v1/search", params={"q": "B200 metadata"}).json()["items"] == []  # a key
    problem_of(c.get("/v1/search", params={"q": "x" * 301}), 400, "malformed-request")
