"""Reads trust admission's schema check (issue 33): history, ``show`` and the run page
re-verify the ledger's own stored events without validating their manifests again
(``domain.manifests.canonical_form.admitted_manifest_digest``), and still show an event
edited behind the ledger's back as failing; admission, audit and the offline verifier keep
the schema gate.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_session import Cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from served_app import Served, serve
from sqlalchemy import create_engine, text
from unchecked_signing import signed_as_given

from domain.errors import DomainError, ManifestError
from domain.manifests import canonical_form, registry
from domain.manifests.canonical_form import admitted_manifest_digest, manifest_digest
from domain.statements import (
    IngestionPredicate,
    PredicateType,
    Role,
    parse_predicate,
    parse_statement,
)
from domain.timestamps import format_time, utc_now
from ledger import history_reads
from ledger.aggregates import run_id
from ledger.application import Ledger
from ledger.authority.content import check_ingestion
from ledger.event_verification import verify_event
from ledger.home import LedgerHome
from ledger.signing.authoring import ingestion_envelope, key_registration_envelope
from ledger.signing.dsse import parse_envelope
from ledger.signing.keys import SigningKey
from ledger.signing.trust import TrustRoot

SEED_RUN = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"

# ------------------------------------------------------- one digest, with or without the gate

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [at]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*at, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            found += _paths(child, (*at, i))
    return found


@st.composite
def _damaged(draw: st.DrawFn, documents: list[dict[str, Any]]) -> Any:
    """One of ``documents`` with one place replaced, deleted, or given an extra field."""
    document = copy.deepcopy(draw(st.sampled_from(documents)))
    path = draw(st.sampled_from(_paths(document)))
    if not path:
        return draw(_JSON)
    parent = document
    for step in path[:-1]:
        parent = parent[step]
    how = draw(st.sampled_from(["replace", "delete", "add"]))
    if how == "delete" and isinstance(parent, dict):
        del parent[path[-1]]
    elif how == "add" and isinstance(parent[path[-1]], dict):
        parent[path[-1]][draw(st.text(max_size=6))] = draw(_JSON)
    else:
        parent[path[-1]] = draw(_JSON)
    return document


def _seed_documents(seed_path: Path) -> list[dict[str, Any]]:
    manifests = json.loads(seed_path.read_text("utf-8"))
    return [d for d in manifests.values() if isinstance(d, dict)]


def test_admitted_documents_digest_as_admission_digests_them(seed_path: Path) -> None:
    documents = _seed_documents(seed_path)
    assert len(documents) >= 3
    for document in documents:
        assert admitted_manifest_digest(document) == manifest_digest(document)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_without_the_gate_a_digest_is_admissions_or_a_domain_error(
    seed_path: Path, data: st.DataObject
) -> None:
    """Wherever admission's digest succeeds, a read's is the same; a damaged document read
    without the gate is refused with a domain error (a failed check), never a crash."""
    document = data.draw(_damaged(_seed_documents(seed_path)))
    try:
        expected: str | None = manifest_digest(document)
    except DomainError:
        expected = None
    try:
        found: str | None = admitted_manifest_digest(document)
    except DomainError:
        found = None
    if expected is not None:
        assert found == expected


# ------------------------------------------------------------- the boundary of the shortcut


def _forged_ingestion(seed_path: Path, key: SigningKey) -> dict[str, Any]:
    """An ingestion whose run manifest breaks the schema (an unknown field) but whose
    digests were computed by the canonical form, signed by a valid ingester key: what only
    someone holding that key and writing the database past admission could store."""
    manifests = json.loads(seed_path.read_text("utf-8"))
    honest = parse_envelope(ingestion_envelope(manifests, key)).statement()
    predicate = copy.deepcopy(honest.predicate)
    predicate["manifests"]["run"]["spec"]["bogus"] = 1
    digest = admitted_manifest_digest(predicate["manifests"]["run"])
    name = predicate["manifests"]["run"]["metadata"]["name"]
    forged: dict[str, Any] = signed_as_given(name, digest, PredicateType.INGESTION, predicate, key)
    return forged


def test_admission_and_the_verifier_keep_the_gate_a_read_relies_on_it(
    seed_path: Path, db_url: str
) -> None:
    admin, ingester, log = (SigningKey.generate() for _ in range(3))
    root = TrustRoot(
        origin="test.kernelindex/log",
        admin_keys=(admin.public,),
        log_key=log.public,
        created_at=format_time(utc_now()),
    )
    ledger = Ledger(db_url, root, log_key=log)
    ledger.append(key_registration_envelope(admin.public, [Role.ADMIN], admin))
    ledger.append(key_registration_envelope(ingester.public, [Role.INGESTER], admin))
    forged = _forged_ingestion(seed_path, ingester)
    statement = parse_statement(json.loads(base64.b64decode(forged["payload"])))
    predicate = parse_predicate(statement, stored=True)
    assert isinstance(predicate, IngestionPredicate)

    with pytest.raises(ManifestError, match="bogus"):
        check_ingestion(statement, predicate)
    check_ingestion(statement, predicate, admitted=True)
    with pytest.raises(DomainError):
        ledger.append(forged)  # admission refuses it

    def checked(*, admitted: bool) -> dict[str, bool]:
        result = verify_event(
            position=10,
            version=1,
            event="Run.Ingested",
            aggregate_id=run_id(statement.subject_digest),
            envelope_json=forged,
            received_at=format_time(utc_now()),
            keys=ledger.key_state,
            trust_root=root,
            admitted=admitted,
        )
        return {c.name: c.ok for c in result.checks}

    # The offline verifier's (and audit's) re-verification: the manifests check fails.
    assert checked(admitted=False)["manifests"] is False
    # A read of the ledger's own log trusts admission for the schema, and only for it.
    assert all(checked(admitted=True).values())


# --------------------------------------------- an edit behind the ledger's back, on a read


def _edit_run(edit: Callable[[dict[str, Any]], None]) -> Callable[[str], None]:
    """Edit the seed run's stored ingestion's run manifest in the database (its signature
    kept)."""

    def apply(db_url: str) -> None:
        engine = create_engine(db_url)
        with engine.begin() as conn:
            row = conn.execute(
                text("select id, state from kernelindex_events where originator_id = :a"),
                {"a": run_id(SEED_RUN).bytes if db_url.startswith("sqlite") else run_id(SEED_RUN)},
            ).first()
            assert row is not None
            state = json.loads(bytes(row.state))
            statement = json.loads(base64.b64decode(state["envelope"]["payload"]))
            assert statement["predicateType"].endswith("ingestion/v1"), statement["predicateType"]
            edit(statement["predicate"]["manifests"]["run"])
            payload = json.dumps(statement).encode()
            state["envelope"]["payload"] = base64.b64encode(payload).decode()
            conn.execute(
                text("update kernelindex_events set state = :s where id = :i"),
                {"s": json.dumps(state).encode(), "i": row.id},
            )
        engine.dispose()

    return apply


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(run: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for step in parents:
            run = run[step]
        run[last] = value

    return edit


EDITS: dict[str, tuple[Callable[[dict[str, Any]], None], bool]] = {
    # name: (the edit, whether the manifests check fails too)
    "claim-changed": (_set("spec.timing.latencyNs.mean", 1), True),
    "unknown-field": (_set("spec.bogus", 1), True),
    "spec-removed": (lambda run: run.pop("spec"), True),
    "metadata-not-an-object": (_set("metadata", 5), True),
    "duration-unreadable": (_set("spec.timing.latencyNs.mean", "fast"), True),
    "renamed": (_set("metadata.name", "renamed"), True),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_an_edited_manifest_fails_on_history_and_show(
    edit: str, tmp_path: Path, db_url: str, seed_path: Path
) -> None:
    cli = Cli(tmp_path / "home", db_url)
    cli("init")
    cli("ingest", seed_path)
    change, manifests_fail = EDITS[edit]
    _edit_run(change)(db_url)

    listed = cli("history", SEED_RUN, "--json", ok=False)
    assert listed.exit_code == 1
    (event,) = json.loads(listed.stdout)["events"]
    checks = {c["name"]: c for c in event["checks"]}
    assert event["verified"] is False
    assert checks["signature"]["ok"] is False
    assert checks["manifests"]["ok"] is not manifests_fail, checks["manifests"]
    assert "FAILED" in cli("history", SEED_RUN, ok=False).stdout
    assert not cli.json("show", SEED_RUN)["shownEventsVerified"]


# ------------------------------------------------------------------- the run page's reads


@pytest.fixture
def served(db_url: str, tmp_path: Path) -> Iterator[Served]:
    yield from serve(LedgerHome.at(tmp_path / "home", db_url))


def test_the_run_page_its_record_and_history_validate_no_manifest(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cold read (no verification kept, no digest memoised) re-verifies the run's events
    and validates none of their manifests; what it shows is verified."""
    monkeypatch.setattr(history_reads, "VERIFICATIONS", history_reads.VerificationCache())
    monkeypatch.setattr(canonical_form, "_DIGESTS", {})
    validated: list[object] = []
    validate = registry.validate_manifest

    def counted(document: object) -> Any:
        validated.append(document)
        return validate(document)

    monkeypatch.setattr(canonical_form, "validate_manifest", counted)
    page = served.client.get(f"/runs/{SEED_RUN}")
    assert page.status_code == 200 and "shown here verified" in page.text
    record = served.client.get(f"/v1/runs/{SEED_RUN}")
    assert record.status_code == 200 and record.json()["shownEventsVerified"] is True
    events = served.client.get(f"/runs/{SEED_RUN}/history")
    assert events.status_code == 200 and "✗ Some events fail verification" not in events.text
    assert validated == []


@pytest.mark.parametrize("edit", ["unknown-field", "spec-removed", "claim-changed"])
def test_an_edited_manifest_fails_on_the_run_page(edit: str, served: Served, db_url: str) -> None:
    _edit_run(EDITS[edit][0])(db_url)
    events = served.client.get(f"/runs/{SEED_RUN}/history")
    assert events.status_code == 200
    assert "✗ Some events fail verification" in events.text
    assert "<code>signature</code>" in events.text and "<code>manifests</code>" in events.text
    record = served.client.get(f"/v1/runs/{SEED_RUN}")
    assert record.status_code == 200 and record.json()["shownEventsVerified"] is False
    page = served.client.get(f"/runs/{SEED_RUN}")
    assert page.status_code == 200 and "shown here verified" not in page.text
