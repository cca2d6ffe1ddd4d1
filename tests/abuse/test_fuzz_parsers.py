"""Property tests: the strict parsers accept or refuse cleanly, whatever they are given.

For each parser the contract a caller relies on: it returns, or raises the project's clean
rejection (a DomainError subclass, which the API answers as 4xx problem+json and the CLI as
``error[<code>]``); never another exception, never a hang. Inputs are random, and mutations
of real documents: the seed run's manifests, statements of every predicate type, and a
signed envelope. Signatures: any change to a signed byte is refused.
"""

from __future__ import annotations

import base64
import copy
import json
from datetime import timedelta
from typing import Any

import pytest
from fuzz_support import fuzz, fuzz_long, json_values, mutated_bytes, mutated_json
from hypothesis import given
from hypothesis import strategies as st
from ruamel.yaml import YAML

from api.demo import seed_manifests
from domain.documents import parse_document, parse_json, parse_yaml
from domain.errors import DomainError
from domain.manifests.manifest_set import check_manifest_set
from domain.manifests.registry import validate_manifest
from domain.statements import Role, parse_predicate, parse_statement
from domain.timestamps import utc_now
from ledger.signing.authoring import (
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
    key_revocation_envelope,
    lifecycle_envelope,
    rerun_claim_envelope,
    rerun_envelope,
    rerun_request_envelope,
)
from ledger.signing.dsse import Envelope, SignatureError, parse_envelope, verify_envelope
from ledger.signing.keys import SigningKey

KEY = SigningKey.generate()
RUN = "sha256:" + "ab" * 32
MANIFESTS = seed_manifests()
MANIFEST_JSON = json.dumps(MANIFESTS, indent=1).encode()


def _yaml(value: Any) -> bytes:
    import io

    out = io.StringIO()
    YAML(typ="safe", pure=True).dump(value, out)
    return out.getvalue().encode()


MANIFEST_YAML = _yaml(MANIFESTS["run"])


def _statement(envelope: dict[str, Any]) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))
    return value


def _envelopes() -> list[dict[str, Any]]:
    later = utc_now() + timedelta(hours=1)
    device = {
        "product": "NVIDIA B200",
        "architecture": "sm_100",
        "gpuUuidHash": "a" * 64,
        "backend": "cuda",
    }
    result = {
        "jobId": "00000000-0000-4000-8000-000000000000",
        "nonce": "0" * 64,
        "cases": [
            {
                "case": "c",
                "status": "passed",
                "latencyNs": {
                    "median": 2.0,
                    "mean": 2.0,
                    "p05": 1.0,
                    "p95": 3.0,
                    "minimum": 1.0,
                    "maximum": 3.0,
                    "mad": 0.5,
                    "ci95": [1.5, 2.5],
                },
            }
        ],
        "summary": {
            "allCorrect": True,
            "medianNs": 2.0,
            "samples": 3,
            "samplesNs": [1.0, 2.0, 3.0],
        },
        "environment": device,
        "calibration": {"copyBandwidthBytesPerS": 7.0e12},
    }
    return [
        ingestion_envelope(MANIFESTS, KEY),
        attestation_envelope(RUN, "run", KEY, type_="reproduced", body="b", observed_ns=5),
        lifecycle_envelope(RUN, "run", KEY, action="supersede", reason="r", superseded_by=RUN),
        key_registration_envelope(KEY.public, [Role.ATTESTER], KEY, label="k", valid_until=later),
        key_revocation_envelope(KEY.public, KEY, reason="r"),
        rerun_request_envelope(
            RUN,
            "run",
            KEY,
            artifact_digest=RUN,
            workload_digest=RUN,
            product="NVIDIA B200",
            architecture="sm_100",
            expires_at=later,
        ),
        rerun_claim_envelope(RUN, "run", KEY, job_id=str(result["jobId"]), device=device),
        rerun_envelope(RUN, "run", KEY, result=result),
    ]


ENVELOPES = _envelopes()
STATEMENTS = [_statement(e) for e in ENVELOPES]


def clean(call: Any, *args: Any) -> Any:
    """Run a parser: its value, or None when it refused with a DomainError (anything else
    propagates and fails the property)."""
    try:
        return call(*args)
    except DomainError as exc:
        assert exc.code and exc.message  # a stable code and a reason for the user
        return None


def test_the_starting_documents_are_valid() -> None:
    """Mutations start from documents every parser accepts (else the fuzzing proves little)."""
    assert parse_json(MANIFEST_JSON) == MANIFESTS
    assert parse_yaml(MANIFEST_YAML) == MANIFESTS["run"]
    check_manifest_set(MANIFESTS)
    for statement in STATEMENTS:
        parse_predicate(parse_statement(statement))
    for envelope in ENVELOPES:
        assert verify_envelope(parse_envelope(envelope), {KEY.key_id: KEY.public}.get) == KEY.key_id


# ----------------------------------------------------------------- documents (JSON, YAML)


@fuzz
@given(st.binary(max_size=300) | mutated_bytes(MANIFEST_JSON) | mutated_bytes(MANIFEST_YAML))
def test_document_parsers_accept_or_refuse_cleanly(data: bytes) -> None:
    for parse in (parse_json, parse_yaml, parse_document):
        value = clean(parse, data)
        if value is not None and parse is parse_json:
            # What is accepted is plain JSON that reads back the same.
            assert json.loads(json.dumps(value, allow_nan=False)) == value


@pytest.mark.parametrize(
    "document",
    [
        b"[" * 100_000,
        b"[" * 100_000 + b"]" * 100_000,
        b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
        b"- " * 50_000 + b"x",
        b"a: &a ["
        + b"*a, " * 1000
        + b"]\nb: &b ["
        + b"*a, " * 1000
        + b"]\nc: ["
        + b"*b, " * 1000
        + b"]",
        b"1" + b"0" * 5000,  # past Python's 4300-digit int limit: ValueError, not a refusal
        b'{"n": ' + b"9" * 5000 + b"}",
        b"n: " + b"9" * 5000,
        b"n: 0x" + b"f" * 5000,
        b"1e99999",
        b"\xef\xbb\xbf{}",
    ],
    ids=[
        "open",
        "deep",
        "deep-objects",
        "deep-yaml",
        "laughs",
        "int",
        "int-in-object",
        "yaml-int",
        "yaml-hex",
        "inf",
        "bom",
    ],
)
def test_hostile_documents_are_refused_cleanly(document: bytes) -> None:
    for parse in (parse_json, parse_yaml, parse_document):
        clean(parse, document)


# ----------------------------------------------------------------------------- manifests


@fuzz
@given(mutated_json(MANIFESTS).filter(lambda m: isinstance(m, dict)))
def test_manifest_sets_accept_or_refuse_cleanly(manifests: Any) -> None:
    # check_manifest_set takes a mapping (its callers check that); everything inside is fair.
    checked = clean(check_manifest_set, manifests)
    if checked is not None:
        assert checked.run_digest.startswith("sha256:")


@fuzz
@given(
    st.sampled_from(["run", "protocol", "environment"]).flatmap(
        lambda m: mutated_json(MANIFESTS[m])
    )
    | json_values
)
def test_single_manifests_accept_or_refuse_cleanly(manifest: Any) -> None:
    clean(validate_manifest, manifest)


# ---------------------------------------------------------------------------- statements


@fuzz
@given(st.sampled_from(STATEMENTS).flatmap(mutated_json))
def test_statements_and_predicates_accept_or_refuse_cleanly(value: Any) -> None:
    statement = clean(parse_statement, value)
    if statement is not None:
        # What every reader of an accepted statement reads (an empty digest object passed,
        # and reading its digest raised KeyError: found by an attack review).
        assert statement.subject_digest.startswith("sha256:")
        assert statement.subject_name
        clean(parse_predicate, statement)


@pytest.mark.parametrize("digest", [{}, {"sha512": "ab" * 64}, {"sha256": "AB" * 32}, []])
def test_a_subject_digest_other_than_one_sha256_is_refused(digest: Any) -> None:
    statement = copy.deepcopy(STATEMENTS[1])
    statement["subject"][0]["digest"] = digest
    with pytest.raises(DomainError):
        parse_statement(statement)


# ----------------------------------------------------------------------------- envelopes


def _open(data: bytes) -> str | None:
    """Everything the API does to a posted body, short of the store."""
    value = clean(parse_json, data)
    envelope = clean(parse_envelope, value) if value is not None else None
    if envelope is None:
        return None
    statement = clean(envelope.statement)
    if statement is not None:
        clean(parse_predicate, statement)
    return clean(verify_envelope, envelope, {KEY.key_id: KEY.public}.get)  # type: ignore[no-any-return]


@fuzz
@given(
    st.sampled_from(ENVELOPES).flatmap(mutated_json).map(lambda e: json.dumps(e).encode())
    | st.sampled_from([json.dumps(e).encode() for e in ENVELOPES]).flatmap(mutated_bytes)
)
def test_envelopes_accept_or_refuse_cleanly(data: bytes) -> None:
    signer = _open(data)
    if signer is not None:
        # Only the signed bytes under the right key verify: the payload must be one we made.
        payload = base64.b64decode(json.loads(data)["payload"])
        assert payload in {base64.b64decode(e["payload"]) for e in ENVELOPES}


@fuzz
@given(st.sampled_from(ENVELOPES), st.data())
def test_any_change_to_a_signed_byte_is_refused(
    envelope: dict[str, Any], data: st.DataObject
) -> None:
    payload = base64.b64decode(envelope["payload"])
    sig = base64.b64decode(envelope["signatures"][0]["sig"])
    which = data.draw(st.sampled_from(["payload", "sig"]))
    original = payload if which == "payload" else sig
    changed = data.draw(mutated_bytes(original).filter(lambda b: b != original))
    tampered = copy.deepcopy(envelope)
    if which == "payload":
        tampered["payload"] = base64.b64encode(changed).decode()
    else:
        tampered["signatures"][0]["sig"] = base64.b64encode(changed).decode()
    with pytest.raises(SignatureError):
        verify_envelope(parse_envelope(tampered), {KEY.key_id: KEY.public}.get)


def _signed(payload: bytes) -> Envelope:
    from abuse_support import signed_bytes

    return parse_envelope(signed_bytes(payload, KEY))


@pytest.mark.parametrize(
    "payload",
    [
        b"[" * 100_000 + b"]" * 100_000,
        json.dumps(STATEMENTS[1]).replace('"body": "b"', '"body": "b", "body": "c"').encode(),
        json.dumps(STATEMENTS[1])
        .replace('"observedNs": 5', '"observedNs": ' + "1" * 5000)
        .encode(),
        json.dumps(STATEMENTS[1]).replace('"observedNs": 5', '"observedNs": NaN').encode(),
    ],
    ids=["deep", "duplicate-key", "huge-int", "nan"],
)
def test_signed_payloads_are_read_as_strictly_as_documents(payload: bytes) -> None:
    """A statement is refused (EnvelopeError or another DomainError) when its payload is not
    a document parse_json accepts: nesting, duplicate keys (two readers would disagree about
    what was signed), numbers that do not read back, NaN."""
    with pytest.raises(DomainError):
        parse_json(payload)
    envelope = _signed(payload)
    with pytest.raises(DomainError):
        envelope.statement()


@pytest.mark.slow
@fuzz_long
@given(
    st.sampled_from(ENVELOPES).flatmap(mutated_json).map(lambda e: json.dumps(e).encode())
    | st.sampled_from([json.dumps(e).encode() for e in ENVELOPES]).flatmap(mutated_bytes)
    | st.sampled_from(STATEMENTS).flatmap(mutated_json).map(lambda s: json.dumps(s).encode())
)
def test_long_fuzz_of_envelopes_and_statements(data: bytes) -> None:
    _open(data)
    value = clean(parse_json, data)
    if isinstance(value, dict) and "_type" in value:
        statement = clean(parse_statement, value)
        if statement is not None:
            clean(parse_predicate, statement)
