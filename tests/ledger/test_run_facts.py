"""Issue 34 on small data: what an import signs of the source (its publication time and own
name), and a run's identity read from its own record until an import attaches the manifest."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from api.cli.service import service_over
from api.service.run_facts import FROM_MANIFEST, FROM_SOURCE_RECORD, SIGNED, SNAPSHOT
from domain.canonical import canonical_json
from domain.importers.identity import identity_from_run
from domain.importers.kernelindex_catalog import map_kernelindex_catalog
from domain.importers.records import Artifact, ImportRecord, Rejection
from domain.manifests.manifest_set import check_manifest_set
from domain.statement_models.ingestion import IngestionPredicate
from domain.statements import Role, validate_part
from domain.timestamps import format_time, utc_now
from ledger.application import Ledger
from ledger.history import run_history
from ledger.importing import Importer
from ledger.signing.authoring import key_registration_envelope
from ledger.signing.keys import SigningKey
from ledger.signing.trust import TrustRoot

REPO = Path(__file__).resolve().parents[2]
COHORT = REPO / "api" / "demo_data" / "sol-056-cohort.json"
SEED = REPO / "conformance" / "fixtures" / "seed" / "run-38823.manifest.json"


@pytest.fixture
def setup(db_url: str) -> tuple[Ledger, SigningKey, SigningKey]:
    admin, ingester, log = (SigningKey.generate() for _ in range(3))
    root = TrustRoot("test/facts", (admin.public,), log.public, format_time(utc_now()))
    ledger = Ledger(db_url, root, log_key=log)
    ledger.append(key_registration_envelope(admin.public, [Role.ADMIN], admin))
    ledger.append(key_registration_envelope(ingester.public, [Role.INGESTER], admin))
    return ledger, ingester, admin


def _record(manifests: dict[str, Any], **facts: Any) -> ImportRecord:
    native = manifests["run"]["spec"]["sourceNative"]
    return ImportRecord(
        source=native["source"],
        external_id=native["externalId"],
        manifests=manifests,
        snapshot=Artifact(canonical_json(manifests["run"]), "application/json", "row"),
        **facts,
    )


def _cohort() -> list[dict[str, Any]]:
    return list(json.loads(COHORT.read_text())["cohort"])


def test_an_import_signs_the_sources_publication_time_and_name_and_the_record_shows_them(
    setup: Any,
) -> None:
    ledger, ingester, admin = setup
    manifests = copy.deepcopy(_cohort()[0])
    record = _record(
        manifests, published_at="2026-08-15T02:09:57.573Z", source_name="NVIDIA SOL-ExecBench"
    )
    assert Importer(ledger, ingester, admin).run([record]).new == 1
    digest = check_manifest_set(manifests).run_digest
    [ingested] = run_history(ledger, digest)
    assert ingested.ok and ingested.predicate is not None
    assert ingested.predicate["publishedAt"] == "2026-08-15T02:09:57.573Z"
    assert ingested.predicate["sourceName"] == "NVIDIA SOL-ExecBench"
    with service_over(ledger) as service:
        facts = service.runs.record(digest).provenance
    assert (facts.source, facts.source_name) == ("sol-execbench", "NVIDIA SOL-ExecBench")
    assert facts.published_at == "2026-08-15T02:09:57.573Z" and facts.published_stated_by == SIGNED
    assert facts.admitted_at == ingested.received_at != facts.published_at
    assert facts.observed_at == manifests["run"]["spec"]["observedAt"]


def test_a_run_signed_without_them_stays_valid_and_names_its_source_from_the_catalogs_list(
    setup: Any,
) -> None:
    ledger, ingester, admin = setup
    manifests = copy.deepcopy(_cohort()[1])
    Importer(ledger, ingester, admin).run([_record(manifests)])
    digest = check_manifest_set(manifests).run_digest
    [ingested] = run_history(ledger, digest)
    assert ingested.ok and "publishedAt" not in (ingested.predicate or {})
    with service_over(ledger) as service:
        facts = service.runs.record(digest).provenance
    assert facts.published_at is None and facts.source_name == "NVIDIA SOL-ExecBench"


def test_the_ingestion_predicate_refuses_a_publication_time_that_is_no_time() -> None:
    base = {
        "issuedAt": "2026-08-15T02:09:57.573Z",
        "source": "sol-execbench",
        "fetchedAt": "2026-08-15T02:09:57.573Z",
        "manifests": {"run": {}, "protocol": {}, "environment": {}},
    }
    assert validate_part(IngestionPredicate, base).publishedAt is None
    with pytest.raises(ValueError, match="publishedAt"):
        validate_part(IngestionPredicate, base | {"publishedAt": "15 August 2026"})


def _catalog(published: object) -> list[bytes]:
    """A one-run export: its source row, its run row (the cohort's first run, as the public
    catalog lists it) stating ``published``."""
    manifests = _cohort()[0]
    members = {k: manifests[k] for k in ("run", "protocol", "environment")}
    run_row: dict[str, Any] = {
        "id": "run-1",
        "runDigest": check_manifest_set(members).run_digest,
        "sourceId": "source-1",
        "status": "passed",
        "manifest": members,
    }
    if published is not None:
        run_row["publishedAt"] = published
    source = {"id": "source-1", "slug": "sol-execbench", "name": "NVIDIA SOL-ExecBench"}
    return [
        json.dumps({"table": "sources", "row": source}).encode(),
        json.dumps({"table": "benchmark_runs", "row": run_row}).encode(),
    ]


def test_the_catalog_mapper_carries_the_rows_publication_time_and_its_sources_name() -> None:
    [record] = list(map_kernelindex_catalog(_catalog("2026-08-15T02:09:57.573Z")))
    assert isinstance(record, ImportRecord), record
    assert record.published_at == "2026-08-15T02:09:57.573Z"
    assert record.source_name == "NVIDIA SOL-ExecBench"
    [undated] = list(map_kernelindex_catalog(_catalog(None)))
    assert isinstance(undated, ImportRecord) and undated.published_at is None
    [refused] = list(map_kernelindex_catalog(_catalog("yesterday")))
    assert isinstance(refused, Rejection) and "publishedAt" in refused.reason


def test_a_catalog_run_signed_before_ingestions_carried_it_shows_its_rows_publication_time(
    setup: Any,
) -> None:
    """Data already signed stays as it is: the time is read from the catalog row the signed
    ingestion names by digest (its stored snapshot), and said to be read there."""
    ledger, ingester, admin = setup
    [record] = list(map_kernelindex_catalog(_catalog("2026-08-15T02:09:57.573Z")))
    assert isinstance(record, ImportRecord)
    older = dataclasses.replace(record, published_at=None, source_name=None)
    assert Importer(ledger, ingester, admin).run([older]).new == 1
    digest = check_manifest_set(record.manifests).run_digest
    [ingested] = run_history(ledger, digest)
    assert "publishedAt" not in (ingested.predicate or {})
    with service_over(ledger) as service:
        facts = service.runs.record(digest).provenance
    assert facts.published_at == "2026-08-15T02:09:57.573Z"
    assert facts.published_stated_by == SNAPSHOT
    assert facts.source_name == "NVIDIA SOL-ExecBench"


def test_the_seeds_identity_is_read_from_its_own_record_in_its_sources_form() -> None:
    run = json.loads(SEED.read_text())["run"]
    stated = identity_from_run(run)
    assert stated is not None
    assert (stated.implementation, stated.project, stated.revision) == (
        "Geometric",
        "Geometric",
        "submission-38823",
    )
    assert stated.fields["implementation.metadata.name"] == "sol-submission-38823"
    other = copy.deepcopy(run)
    other["spec"]["sourceNative"]["source"] = "direct"
    assert identity_from_run(other) is None


def test_a_run_without_its_implementation_says_who_from_its_record_until_an_import_attaches_it(
    setup: Any,
) -> None:
    """What the run's record says agrees with the manifest its source's importer writes, and
    an import of the source attaches that manifest (ingester-signed) to the held run."""
    ledger, ingester, admin = setup
    full = copy.deepcopy(_cohort()[0])
    bare = {k: v for k, v in full.items() if k != "implementation"}
    digest = check_manifest_set(full).run_digest
    Importer(ledger, ingester, admin).run([_record(bare)])
    with service_over(ledger) as service:
        before = service.runs.record(digest).identity
    assert before.stated_by == FROM_SOURCE_RECORD
    implementation = full["implementation"]
    author = implementation["metadata"]["authors"][0]["name"]
    version = implementation["spec"]["projectRevision"]["version"]
    assert (before.implementation, before.project, before.revision) == (author, author, version)
    assert before.source_record_fields == {
        "implementation.metadata.name": implementation["metadata"]["name"],
        "implementation.metadata.title": implementation["metadata"]["title"],
        "implementation.metadata.authors[0].name": author,
        "implementation.spec.projectRevision.version": version,
    }
    summary = Importer(ledger, ingester, admin).run([_record(full)])
    assert (summary.unchanged, summary.attached) == (1, 1)
    with service_over(ledger) as service:
        after = service.runs.record(digest).identity
    assert after.stated_by == FROM_MANIFEST and after.source_record_fields == {}
    assert (after.implementation, after.project, after.revision) == (
        implementation["metadata"]["title"],
        author,
        version,
    )
