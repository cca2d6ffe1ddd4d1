"""The statement models became msgspec Structs (issue 36): for any statement or predicate,
valid or mutated (wrong types, bools for numbers, strings for numbers, unknown fields,
nulls, a final newline in a pattern field, control characters, timestamps that are none,
over-long text, NaN), the Structs accept exactly what the pydantic models accepted, with
equal field values, whether admitting a new predicate or reading a stored one. The pydantic
models are kept as the oracle in ``tests/domain/pydantic_statement_oracle.py``."""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from domain.manifests.models.schema_errors import first_non_json
from domain.statements import (
    STORED,
    PredicateType,
    StatementError,
    build_predicate,
    make_statement,
    parse_statement,
)
from tests.domain import pydantic_statement_oracle as oracle

T = "2026-08-15T02:09:57.573Z"
UUID = "0a0a0a0a-1111-4222-8333-444455556666"
DIGEST = "sha256:" + "ab" * 32
KEY = "A" * 43 + "="

VALID: dict[PredicateType, list[dict[str, Any]]] = {
    PredicateType.INGESTION: [
        {
            "issuedAt": T,
            "source": "sol-execbench",
            "externalId": "run 1",
            "fetchedAt": T,
            "manifests": {
                "run": {"a": 1},
                "protocol": {},
                "environment": {"b": [1, "x"]},
                "implementation": {},
                "workload": None,
            },
            "sourceNative": {"k": "v"},
            "snapshotDigest": DIGEST,
            "publishedAt": "2026-08-01T00:00:00+02:00",
            "sourceName": "SOL ExecBench",
        },
        {
            "issuedAt": T,
            "source": "x",
            "fetchedAt": T,
            "manifests": {"run": {}, "protocol": {}, "environment": {}},
        },
    ],
    PredicateType.ATTACHMENT: [
        {"issuedAt": T, "manifests": {"implementation": {"x": 1}}},
        {"issuedAt": T, "manifests": {"workload": {}, "implementation": None}},
    ],
    PredicateType.ATTESTATION: [
        {
            "issuedAt": T,
            "type": "issue_report",
            "body": "multi\r\nline\ttext, ünïcode ok",
            "observedNs": 5,
            "environmentSummary": "an H100",
            "evidenceUrl": "https://ex.ample/%E2%80%AE",
            "reason": "license",
        },
        {"issuedAt": T, "type": "note", "body": "x"},
    ],
    PredicateType.KEY: [
        {
            "issuedAt": T,
            "action": "register",
            "keyId": DIGEST,
            "publicKey": KEY,
            "roles": ["agent"],
            "validFrom": T,
            "validUntil": T,
            "reason": "new agent",
            "label": "lab box",
            "devices": [
                {"backend": "cuda", "product": "NVIDIA H100", "architecture": "sm_90"},
                {"backend": "cuda", "product": "NVIDIA B200", "architecture": "sm_100"},
            ],
        },
        {
            "issuedAt": T,
            "action": "register",
            "keyId": DIGEST,
            "publicKey": KEY,
            "roles": ["ingester", "attester"],
        },
        {"issuedAt": T, "action": "revoke", "keyId": DIGEST, "publicKey": KEY},
    ],
    PredicateType.LIFECYCLE: [
        {"issuedAt": T, "action": "supersede", "reason": "newer", "supersededBy": DIGEST},
        {"issuedAt": T, "action": "retract", "reason": "wrong"},
    ],
    PredicateType.RERUN_REQUEST: [
        {
            "issuedAt": T,
            "jobId": UUID,
            "nonce": "0" * 64,
            "runDigest": DIGEST,
            "artifactDigest": DIGEST,
            "workloadDigest": DIGEST,
            "requirements": {"product": "NVIDIA H100", "architecture": "sm_90"},
            "expiresAt": T,
        }
    ],
    PredicateType.RERUN_CLAIM: [
        {
            "issuedAt": T,
            "jobId": UUID,
            "runDigest": DIGEST,
            "leaseSeconds": 600,
            "device": {
                "product": "NVIDIA H100",
                "architecture": "sm_90",
                "gpuUuidHash": "a" * 64,
                "backend": "cuda",
            },
        }
    ],
    PredicateType.RERUN: [
        {
            "issuedAt": T,
            "jobId": UUID,
            "nonce": "5e" * 32,
            "protocol": "kernelindex-rerun-v1",
            "cases": [
                {
                    "case": "c0",
                    "status": "passed",
                    "maxAbsError": 0.0,
                    "maxRelError": 1e-6,
                    "latencyNs": {
                        "median": 10.0,
                        "mean": 11.0,
                        "p05": 9.0,
                        "p95": 12,
                        "minimum": 8.0,
                        "maximum": 13.0,
                        "mad": 0.5,
                        "ci95": [9.5, 10.5],
                    },
                    "samples": 3,
                    "defences": [
                        {"name": "sandbox", "outcome": "passed", "checks": 2},
                        {"name": "side-stream", "outcome": "skipped"},
                    ],
                    "timerCrossCheck": {
                        "timer": "cuda-events",
                        "reference": "CLOCK_MONOTONIC_RAW around the synchronised call",
                        "calls": 1,
                        "timedNs": 1.0,
                        "wallNs": 1.5,
                        "ratio": 1.5,
                        "otherThreadsCpuNs": 0,
                        "outcome": "passed",
                    },
                    "stoppedBy": "rse",
                    "floorNs": 2.0,
                },
                {
                    "case": "c1",
                    "status": "incorrect",
                    "reason": "output-mismatch",
                    "round": "secret",
                },
            ],
            "summary": {
                "allCorrect": False,
                "medianNs": 2.0,
                "meanNs": 2.0,
                "ci95Ns": [1.0, 3.0],
                "samples": 3,
                "samplesNs": [1.0, 2.0, 3.0],
            },
            "environment": {
                "product": "NVIDIA H100",
                "architecture": "sm_90",
                "gpuUuidHash": "a" * 64,
                "backend": "cuda",
                "driver": "550.54",
                "cuda": "12.4",
                "clocks": {"sm.start": 1980.0, "memory.timed.max": 2619},
                "temperatureC": {"start": 40.0},
            },
            "calibration": {"copyNs": 1.5, "launchNs": -2},
            "outcome": "completed",
            "build": {
                "solutionKind": "python",
                "language": "pytorch, triton",
                "runtime": {"torch": "2.4.0", "cuda.runtime": "12.4"},
                "flags": ["-O3"],
            },
        },
        {
            "issuedAt": T,
            "jobId": UUID,
            "nonce": "5e" * 32,
            "protocol": "kernelindex-rerun-v1",
            "cases": [{"case": "c", "status": "error", "reason": "job-failed"}],
            "summary": {"allCorrect": False, "samples": 0},
            "environment": {
                "product": "cpu",
                "architecture": "x86_64",
                "gpuUuidHash": "b" * 64,
                "backend": "cpu-test",
            },
            "calibration": {},
            "outcome": "failed",
            "failure": "agent-fault",
            "build": {"solutionKind": "cuda_cpp"},
        },
    ],
}

# Values a field may be changed to: every type, the vocabulary's words and free text, and
# strings at or just past a bound.
WORDS = [
    "",
    "x",
    "free text",
    "passed",
    "failed",
    "skipped",
    "incorrect",
    "note",
    "issue_report",
    "license",
    "register",
    "revoke",
    "retract",
    "agent",
    "admin",
    "cuda",
    "cpu-test",
    "sm_90",
    "build-failed",
    "reward-hack:sandbox",
    "sandbox",
    "my-defence",
    "perf_counter_ns",
    "CLOCK_MONOTONIC_RAW around the synchronised call",
    "pytorch",
    "pytorch, cobol",
    "agent-fault",
    "completed",
    "sm.start",
    "kernelindex-rerun-v1",
    "https://ex.ample/x",
    "http://ex.ample/x",
    "https://",
    T,
    "2026-02-30T00:00:00Z",
    "2026-08-15 02:09:57Z",
    DIGEST,
    "ab" * 32,
    UUID,
    KEY,
    "A" * 42 + "B=",
    "rse",
    "secret",
    "two words",
    "-O3 -g",
]
LENGTHS = [43, 50, 51, 60, 61, 64, 100, 101, 200, 201, 500, 501, 2000, 2001]
SCALARS: list[Any] = [
    None,
    True,
    False,
    0,
    1,
    -1,
    5,
    30,
    29,
    21600,
    21601,
    2**53 - 1,
    2**53,
    1.5,
    5.0,
    -0.5,
    1e308,
    float("nan"),
    float("inf"),
    "5",
    "1.5",
    "NaN",
    [],
    [1.0, 2.0],
    [2.0, 1.0],
    ["x"],
    {},
    {"x": 1},
]
FIELD_NAMES = ["extra", "type_", "_type", "issuedAt", "reason", "checks", "detail", "failure"]


def _paths(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield at
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*at, index))


def _tweaks(value: Any) -> list[Any]:
    """Changes of this value near what it is: a final newline, a hidden character, a space,
    its type's neighbours."""
    if isinstance(value, str):
        return [
            value + "\n",
            "\n" + value,
            value + "\u202e",
            value + "\x00",
            value + "\x07",
            " " + value,
            value.upper(),
            value[:-1],
        ]
    if isinstance(value, bool):
        return [int(value), str(value).lower()]
    if isinstance(value, int):
        return [float(value), -value - 1, str(value), value + 1, bool(value)]
    if isinstance(value, float) and math.isfinite(value):
        return [int(value), -value - 1.0, str(value), value * 1e300]
    return []


@st.composite
def mutated(draw: st.DrawFn, document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with one to three changes at any place in it."""
    doc = copy.deepcopy(document)
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        path = draw(st.sampled_from(list(_paths(doc))))
        parent: Any = doc
        for step in path[:-1]:
            parent = parent[step]
        current = parent[path[-1]] if path else doc
        kind = draw(st.sampled_from(["replace", "tweak", "drop", "add", "long"]))
        if kind == "add" and isinstance(current, dict):
            current[draw(st.sampled_from(FIELD_NAMES))] = copy.deepcopy(
                draw(st.sampled_from(SCALARS + WORDS))
            )
            continue
        if not path:
            continue
        if kind == "drop":
            if isinstance(parent, dict):
                del parent[path[-1]]
            else:
                parent.pop(path[-1])
            continue
        if kind == "tweak" and _tweaks(current):
            new: Any = draw(st.sampled_from(_tweaks(current)))
        elif kind == "long":
            new = draw(st.sampled_from(["a", "é", "A"])) * draw(st.sampled_from(LENGTHS))
        else:
            new = draw(st.sampled_from(SCALARS + WORDS))
        parent[path[-1]] = copy.deepcopy(new)  # a shared list or dict would loop
    return doc


def _same(old: Any, new: Any) -> bool:
    """Equal values (NaN equal to NaN: a manifest's free-form fields may hold one)."""
    if isinstance(old, float) and isinstance(new, float) and math.isnan(old):
        return math.isnan(new)
    if isinstance(old, dict) and isinstance(new, dict):
        return old.keys() == new.keys() and all(_same(old[k], new[k]) for k in old)
    if isinstance(old, list) and isinstance(new, list):
        return len(old) == len(new) and all(_same(a, b) for a, b in zip(old, new, strict=True))
    if isinstance(old, str) and isinstance(new, str):  # an enum member is its JSON string
        return old == new
    if isinstance(old, bool) or isinstance(new, bool):
        return old is new
    return (type(old) is type(new) and old == new) or (
        isinstance(old, int | float) and isinstance(new, int | float) and old == new
    )


def _oracle_predicate(predicate_type: PredicateType, fields: Any, stored: bool) -> Any:
    model = getattr(oracle, build_model_name(predicate_type))
    try:
        return model.model_validate(fields, context={STORED: True} if stored else None)
    except ValidationError:
        return None


def build_model_name(predicate_type: PredicateType) -> str:
    from domain.statements import PREDICATE_MODELS

    return PREDICATE_MODELS[predicate_type].__name__


def _struct_predicate(predicate_type: PredicateType, fields: Any, stored: bool) -> Any:
    try:
        return build_predicate(predicate_type, fields, stored=stored)
    except StatementError:
        return None


def _documents() -> st.SearchStrategy[tuple[PredicateType, dict[str, Any]]]:
    return st.sampled_from([(t, d) for t, docs in VALID.items() for d in docs])


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), _documents(), st.booleans())
def test_a_struct_accepts_exactly_what_the_pydantic_model_accepted(
    data: st.DataObject, typed: tuple[PredicateType, dict[str, Any]], stored: bool
) -> None:
    predicate_type, document = typed
    fields = data.draw(mutated(document))
    old = _oracle_predicate(predicate_type, fields, stored)
    new = _struct_predicate(predicate_type, fields, stored)
    event("accepted" if old is not None else "refused")  # both kinds must be common
    if first_non_json(fields) is not None:
        # A value JSON cannot say (NaN in a free-form manifest, say), which no reader ever
        # meets: refused before any schema (build_predicate), where pydantic's model took it.
        assert new is None, fields
        return
    assert (old is None) == (new is None), (fields, old, new)
    if old is not None:
        assert _same(old.model_dump(), msgspec.to_builtins(new)), fields


@pytest.mark.parametrize(
    ("predicate_type", "document"), [(t, d) for t, docs in VALID.items() for d in docs]
)
def test_every_example_is_valid_both_ways(
    predicate_type: PredicateType, document: dict[str, Any]
) -> None:
    """The examples the mutations start from are accepted (else the property proves little)."""
    for stored in (False, True):
        assert _oracle_predicate(predicate_type, document, stored) is not None
        assert _struct_predicate(predicate_type, document, stored) is not None


@settings(max_examples=500, deadline=None)
@given(st.data(), _documents())
def test_a_statement_struct_accepts_exactly_what_the_pydantic_statement_accepted(
    data: st.DataObject, typed: tuple[PredicateType, dict[str, Any]]
) -> None:
    predicate_type, document = typed
    statement = data.draw(
        mutated(make_statement("sol-run\u00e9", DIGEST, predicate_type, document))
    )
    try:
        old: Any = oracle.Statement.model_validate(statement)
    except ValidationError:
        old = None
    try:
        new: Any = parse_statement(statement)
    except StatementError:
        new = None
    assert (old is None) == (new is None), (statement, old, new)
    if old is not None:
        assert _same(old.model_dump(by_alias=True), msgspec.to_builtins(new))
        assert (old.subject_digest, old.subject_name) == (new.subject_digest, new.subject_name)


def test_a_nan_in_a_free_form_manifest_is_refused_though_pydantic_took_it() -> None:
    """CI's draw: NaN inside an attachment's implementation manifest (its fields are free
    form). No JSON text says NaN; the struct's road refuses it, as the property now asks."""
    fields = {
        "issuedAt": "2026-08-15T02:09:57.573Z",
        "manifests": {"implementation": {"x": 1, "extra": float("nan")}},
    }
    assert _oracle_predicate(PredicateType.ATTACHMENT, fields, False) is not None
    assert _struct_predicate(PredicateType.ATTACHMENT, fields, False) is None
