"""Hostile request bodies: too big, too deep, huge numbers, bad bytes, wrong media types.

Every one answers a clear 4xx problem+json (never a 500) and appends nothing, on SQLite and
PostgreSQL; a good write right after each batch still goes through, so the refusals did not
wedge the writer.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

from abuse_support import (
    SEED,
    SEED_NAME,
    Served,
    appended,
    problem_of,
    register,
    signed_bytes,
)

from api.server.config import MIB
from domain.statements import Role
from ledger.signing.authoring import attestation_envelope
from ledger.signing.keys import SigningKey

ATTEST = f"/v1/runs/{SEED}/attestations"
JSON = {"content-type": "application/json"}


def statement(key: SigningKey, **predicate: Any) -> dict[str, Any]:
    """The statement of a valid attestation by ``key``, with predicate fields replaced."""
    envelope = attestation_envelope(SEED, SEED_NAME, key, type_="note", body="abuse")
    value: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))
    value["predicate"] |= predicate
    return value


def test_bodies_over_the_cap_answer_413_before_parsing(served: Served) -> None:
    before = appended(served)
    cap = served.app.state.config.max_body_bytes
    assert cap == 2 * MIB  # the documented default
    junk = b'{"payloadType":"' + b"A" * cap + b'"}'
    problem_of(served.client.post(ATTEST, content=junk, headers=JSON), 413, "too-large")
    # The same without a Content-Length (chunked): the cap is enforced while streaming.

    def chunks() -> Iterator[bytes]:
        for _ in range(3 * cap // 65536):
            yield b"A" * 65536

    problem_of(served.client.post(ATTEST, content=chunks(), headers=JSON), 413, "too-large")
    assert appended(served) == before


def test_deeply_nested_bodies_answer_4xx_not_500(served: Served) -> None:
    alice = SigningKey.generate()
    register(served, alice, [Role.ATTESTER])
    before = appended(served)
    c = served.client
    deep = b"[" * 100_000 + b"]" * 100_000
    problem_of(c.post(ATTEST, content=deep, headers=JSON), 400, "malformed-request")
    inside = b'{"payloadType":' + deep + b',"payload":"","signatures":[]}'
    problem_of(c.post(ATTEST, content=inside, headers=JSON), 400, "malformed-request")
    # Nested just past the domain's 64 levels but shallow enough for the decoder.
    shallow = b'{"payloadType":"x","payload":"","signatures":' + b"[" * 80 + b"]" * 80 + b"}"
    problem_of(c.post(ATTEST, content=shallow, headers=JSON), 400, "malformed-request")
    # The signed statement itself nested 100k deep: well signed, by a registered key.
    envelope = signed_bytes(deep, alice)
    problem_of(c.post(ATTEST, json=envelope), 400, "malformed-envelope")
    job = "/v1/jobs/00000000-0000-4000-8000-000000000000/claims"
    assert c.post(job, json=envelope).status_code in (400, 404)
    assert appended(served) == before


BODY_NUMBERS = [
    b"1" + b"0" * 100_000,  # past every integer width, and Python's 4300-digit limit
    b"-" + b"9" * 5000,
    b"1e999999",  # overflows a double
    b"123456789012345678901234567890",  # past 2^64
]
PAYLOAD_NUMBERS = [
    "1" + "0" * 5000,  # Python refuses to parse ints past 4300 digits (ValueError)
    "1e999999",  # inf
    "9007199254740993",  # past 2^53: not exactly representable as a JSON number
]


def test_huge_number_literals_answer_400(served: Served) -> None:
    alice = SigningKey.generate()
    register(served, alice, [Role.ATTESTER])
    before = appended(served)
    for literal in BODY_NUMBERS:
        body = b'{"payloadType":' + literal + b',"payload":"","signatures":[]}'
        reply = served.client.post(ATTEST, content=body, headers=JSON)
        problem_of(reply, 400, "malformed-request")
    # Inside the signed statement: the envelope is fine, the payload is not.
    for literal in PAYLOAD_NUMBERS:
        text = json.dumps(statement(alice, observedNs=0))
        text = text.replace('"observedNs": 0', f'"observedNs": {literal}')
        reply = served.client.post(ATTEST, json=signed_bytes(text.encode(), alice))
        assert 400 <= reply.status_code < 500, (literal[:20], reply.text[:300])
        assert reply.json()["code"] in {"malformed-envelope", "schema-violation"}
    assert appended(served) == before


def test_bytes_that_are_not_utf8_answer_400(served: Served) -> None:
    alice = SigningKey.generate()
    register(served, alice, [Role.ATTESTER])
    before = appended(served)
    c = served.client
    good = json.dumps(attestation_envelope(SEED, SEED_NAME, alice, type_="note", body="x"))
    for bad in (
        b"\xff\xfe" + good.encode(),
        good.encode().replace(b"payloadType", b"payload\xc3Type"),
    ):
        problem_of(c.post(ATTEST, content=bad, headers=JSON), 400, "malformed-request")
    latin1 = json.dumps(statement(alice, body="caf\u00e9"), ensure_ascii=False).encode("latin-1")
    problem_of(c.post(ATTEST, json=signed_bytes(latin1, alice)), 400, "malformed-envelope")
    assert appended(served) == before


MEDIA_TYPES = [
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/xml",
    "application/octet-stream",
]


def test_writes_in_another_media_type_answer_415(served: Served) -> None:
    alice = SigningKey.generate()
    register(served, alice, [Role.ATTESTER])
    before = appended(served)
    good = json.dumps(attestation_envelope(SEED, SEED_NAME, alice, type_="note", body="x"))
    for media_type in MEDIA_TYPES:
        reply = served.client.post(ATTEST, content=good, headers={"content-type": media_type})
        body = problem_of(reply, 415, "unsupported-media-type")
        assert "application/json" in body["detail"]
    assert appended(served) == before
    # The very same body as JSON (with a charset) is accepted.
    typed = served.client.post(
        ATTEST, content=good, headers={"content-type": "application/json; charset=utf-8"}
    )
    assert typed.status_code == 201, typed.text
    assert appended(served) == (before[0] + 1, before[1] + 1)
