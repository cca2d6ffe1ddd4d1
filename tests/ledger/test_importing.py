"""The import service: idempotent, supersedes changed source records, keeps the raw bytes,
reports bad records without writing any part of them. On SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from domain.canonical import canonical_json
from domain.importers.records import Artifact, ImportRecord, Rejection
from domain.manifests.manifest_set import check_manifest_set
from domain.statements import Role
from domain.timestamps import format_time, utc_now
from ledger.application import Ledger
from ledger.history import run_history
from ledger.importing import Importer
from ledger.signing.authoring import key_registration_envelope
from ledger.signing.keys import SigningKey
from ledger.signing.trust import TrustRoot
from ledger.store.artifacts import ArtifactError, ArtifactStore, artifacts

COHORT = Path(__file__).resolve().parents[2] / "api" / "demo_data" / "sol-056-cohort.json"


@pytest.fixture
def setup(db_url: str) -> tuple[Ledger, Importer, SigningKey]:
    admin, ingester, log = (SigningKey.generate() for _ in range(3))
    root = TrustRoot("test/import", (admin.public,), log.public, format_time(utc_now()))
    ledger = Ledger(db_url, root, log_key=log)
    ledger.append(key_registration_envelope(admin.public, [Role.ADMIN], admin))
    ledger.append(key_registration_envelope(ingester.public, [Role.INGESTER], admin))
    return ledger, Importer(ledger, ingester, admin), ingester


def records(edit: Any = None) -> list[ImportRecord]:
    cohort = json.loads(COHORT.read_text())["cohort"]
    result = []
    for original in cohort:
        manifests = copy.deepcopy(original)
        if edit is not None:
            edit(manifests)
        native = manifests["run"]["spec"]["sourceNative"]
        result.append(
            ImportRecord(
                source=native["source"],
                external_id=native["externalId"],
                manifests=manifests,
                snapshot=Artifact(canonical_json(manifests["run"]), "application/json", "row"),
                artifacts=(Artifact(b"__global__ void k() {}\n", "text/x-cuda", "kernel.cu"),),
            )
        )
    return result


def count(ledger: Ledger) -> int:
    return int(ledger.store.last_position())


def test_importing_twice_appends_nothing_the_second_time(setup: Any) -> None:
    ledger, importer, ingester = setup
    first = importer.run(records())
    assert (first.new, first.unchanged, first.superseded, first.events) == (3, 0, 0, 3)
    before = count(ledger)
    again = Importer(ledger, ingester, None).run(records())  # a fresh importer: index from events
    assert (again.new, again.unchanged, again.events) == (0, 3, 0)
    assert count(ledger) == before


def test_imported_run_has_one_ingestion_by_the_ingester_naming_its_snapshot(setup: Any) -> None:
    ledger, importer, ingester = setup
    batch = records()
    importer.run(batch)
    record = batch[0]
    digest = check_manifest_set(record.manifests).run_digest
    history = run_history(ledger, digest)
    assert [(h.event, h.signer, h.ok) for h in history] == [("Run.Ingested", ingester.key_id, True)]
    predicate = history[0].predicate or {}
    assert predicate["snapshotDigest"] == record.snapshot.digest
    assert predicate["externalId"] == record.external_id
    store = ArtifactStore(ledger.store)
    assert store.get(record.snapshot.digest).content == record.snapshot.content
    assert store.get(record.artifacts[0].digest).media_type == "text/x-cuda"


def test_a_changed_source_record_supersedes_the_old_run(setup: Any) -> None:
    ledger, importer, _ = setup
    importer.run(records())
    old = records()[0]

    def faster(manifests: dict[str, Any]) -> None:
        manifests["run"]["spec"]["timing"]["latencyNs"]["mean"] -= 1000

    changed = [r for r in records(faster) if r.external_id == old.external_id]
    summary = importer.run(changed)
    assert (summary.new, summary.superseded, summary.events) == (0, 1, 2)
    old_digest = check_manifest_set(old.manifests).run_digest
    new_digest = check_manifest_set(changed[0].manifests).run_digest
    old_run = ledger.run(old_digest)
    assert old_run is not None and old_run.superseded_by == new_digest
    assert [h.event for h in run_history(ledger, old_digest)] == ["Run.Ingested", "Run.Superseded"]
    # Importing the changed record again is a no-op.
    assert importer.run(changed).events == 0


def test_bad_records_are_reported_and_write_nothing(setup: Any) -> None:
    ledger, importer, _ = setup
    good = records()
    bad = copy.deepcopy(good[1])
    bad.manifests["run"]["spec"]["timing"]["latencyNs"]["mean"] = -5
    before = count(ledger)
    summary = importer.run([Rejection("x-1", "truncated JSON"), bad, good[0]])
    assert summary.new == 1 and summary.events == 1
    reasons = dict(summary.rejected)
    assert reasons["x-1"] == "truncated JSON"
    assert "latencyNs" in reasons[bad.external_id]
    assert count(ledger) == before + 1
    assert not ArtifactStore(ledger.store).has(bad.snapshot.digest)


def test_a_damaged_artifact_is_refused_on_read(setup: Any) -> None:
    ledger, importer, _ = setup
    batch = records()
    importer.run(batch)
    with ledger.store.transaction(commit=True) as session:
        session.execute(
            update(artifacts)
            .where(artifacts.c.digest == batch[0].snapshot.digest)
            .values(content=b"tampered")
        )
    with pytest.raises(ArtifactError, match="damaged"):
        ArtifactStore(ledger.store).get(batch[0].snapshot.digest)


def test_a_run_bundle_carries_its_artifacts_and_they_verify(setup: Any) -> None:
    import io

    from ledger.bundle import export_bundle
    from ledger.verify import VerificationPolicy, verify_bundle_lines

    ledger, importer, _ = setup
    batch = records()
    importer.run(batch)
    digest = check_manifest_set(batch[0].manifests).run_digest
    buffer = io.StringIO()
    export_bundle(ledger, buffer, runs=[digest])
    lines = buffer.getvalue().splitlines(keepends=True)
    carried = [json.loads(line) for line in lines if '"type":"artifact"' in line]
    assert batch[0].snapshot.digest in {a["digest"] for a in carried}
    pinned = VerificationPolicy(trust_root=ledger.trust_root)
    report = verify_bundle_lines(lines, pinned, workers=1)
    assert report.verified and report.passed["artifact"] >= 1
    tampered = [
        line.replace(carried[0]["content"], base64.b64encode(b"not it").decode())
        if '"type":"artifact"' in line
        else line
        for line in lines
    ]
    bad = verify_bundle_lines(tampered, pinned, workers=1)
    assert not bad.verified and bad.failed["artifact"] >= 1


def _outcome(
    ledger: Ledger, batch: list[ImportRecord]
) -> list[tuple[str, str | None, tuple[str, ...]]]:
    """What the ledger holds for these records: each run, what superseded it, its events."""
    held = set()
    for record in batch:
        digest = check_manifest_set(record.manifests).run_digest
        run = ledger.run(digest)
        if run is not None:
            events = tuple(h.event for h in run_history(ledger, digest))
            held.add((digest, run.superseded_by, events))
    return sorted(held, key=str)


def _mixed_import() -> list[ImportRecord | Rejection]:
    """New runs, a changed record after its original (same key, twice in one import), a
    refusal of the mapper, one of the ledger (its source is not the run's) and a repeat."""

    def faster(manifests: dict[str, Any]) -> None:
        manifests["run"]["spec"]["timing"]["latencyNs"]["mean"] -= 1000

    first, changed = records(), records(faster)
    foreign = copy.deepcopy(first[2])
    foreign.manifests["run"]["metadata"]["name"] += "-elsewhere"
    foreign = ImportRecord(
        source="someone-else",
        external_id="elsewhere-1",
        manifests=foreign.manifests,
        snapshot=Artifact(b"foreign row", "application/json", "row"),
    )
    return [
        first[0],
        first[1],
        Rejection("x-1", "truncated"),
        changed[0],
        foreign,
        first[2],
        first[1],
    ]


@pytest.mark.parametrize("group", [1, 2, 3, 64])
def test_grouped_commits_store_what_one_by_one_does(setup: Any, group: int) -> None:
    """Committing records in groups is a speed-up only: for every group size (1 is one commit
    per record) the summary, the runs, their supersessions and their events are the same."""
    ledger, importer, _ = setup
    importer.group = group
    items = _mixed_import()
    summary = importer.run(items).to_json()
    assert summary == {
        "new": 3,
        "unchanged": 1,
        "superseded": 1,
        "attached": 0,
        "rejected": [
            {"externalId": "x-1", "reason": "truncated"},
            {
                "externalId": "elsewhere-1",
                "reason": "predicate source 'someone-else' differs from the run's "
                "sourceNative.source 'sol-execbench'",
            },
        ],
        "kept": [],
        "skipped": [],
        "events": 5,
    }
    first, changed = items[0], items[3]
    assert isinstance(first, ImportRecord) and isinstance(changed, ImportRecord)
    replaced = check_manifest_set(first.manifests).run_digest
    by = check_manifest_set(changed.manifests).run_digest
    stored = _outcome(ledger, [i for i in items if isinstance(i, ImportRecord)])
    assert [(d, s, e) for d, s, e in stored if s] == [
        (replaced, by, ("Run.Ingested", "Run.Superseded"))
    ]
    assert len(stored) == 4 and all(e[0] == "Run.Ingested" for _, _, e in stored)
    assert count(ledger) == 2 + 5  # the two key registrations, then the import


def test_a_record_refused_by_the_ledger_leaves_the_rest_of_its_group(setup: Any) -> None:
    ledger, importer, _ = setup
    items = _mixed_import()
    summary = importer.run(items)
    assert summary.new == 3 and summary.events == 5  # 3 new, 1 changed + its supersession
    foreign = next(i for i in items if isinstance(i, ImportRecord) and i.source == "someone-else")
    assert not ArtifactStore(ledger.store).has(foreign.snapshot.digest)  # refused: nothing
    assert ArtifactStore(ledger.store).has(records()[2].snapshot.digest)


def test_an_oversized_artifact_refuses_its_record_before_anything_is_written(
    setup: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, importer, _ = setup
    monkeypatch.setattr("ledger.importing.MAX_ARTIFACT_BYTES", 16)
    before = count(ledger)
    batch = records()
    big = ImportRecord(
        source=batch[0].source,
        external_id=batch[0].external_id,
        manifests=batch[0].manifests,
        snapshot=Artifact(b"x" * 17, "application/json", "row"),
    )
    summary = importer.run([big])
    assert summary.events == 0 and "the limit is 16" in dict(summary.rejected)[big.external_id]
    assert count(ledger) == before
    assert not ArtifactStore(ledger.store).has(big.snapshot.digest)


def _without_workload(record: ImportRecord) -> ImportRecord:
    manifests = {role: m for role, m in record.manifests.items() if role != "workload"}
    return ImportRecord(record.source, record.external_id, manifests, record.snapshot)


def test_a_record_naming_its_workload_by_digest_takes_it_from_the_import_or_the_ledger(
    setup: Any,
) -> None:
    """As `kernelindex ingest` does: a run that names its workload by digest and lacks it is
    ingested with it, from an earlier record of the same import or from what the ledger holds
    (read models), so it lands in its comparison group."""
    from api.run_intake import held_manifests
    from projections.runner import ProjectionRunner

    ledger, _, ingester = setup
    first, second, third = records()
    importer = Importer(ledger, ingester, None, held=lambda r, h: held_manifests(ledger, r, h))
    summary = importer.run([first, _without_workload(second)])
    assert (summary.new, summary.rejected) == (2, [])
    later = Importer(ledger, ingester, None, held=lambda r, h: held_manifests(ledger, r, h))
    assert later.run([_without_workload(third)]).new == 1
    ProjectionRunner(ledger).catch_up()
    for record in (second, third):
        run = ledger.run(check_manifest_set(record.manifests).run_digest)
        assert run is not None and run.manifests()["workload"] == record.manifests["workload"]
    # With neither, the run is ingested without it (and can be attached it later).
    alone = Importer(ledger, ingester, None)

    def other(manifests: dict[str, Any]) -> None:
        manifests["run"]["metadata"]["name"] = "alone-1"
        manifests["run"]["spec"]["timing"]["latencyNs"]["mean"] += 7

    renamed = records(other)[0]
    lacking = ImportRecord(renamed.source, "alone-1", renamed.manifests, renamed.snapshot)
    assert alone.run([_without_workload(lacking)]).new == 1
    held = ledger.run(check_manifest_set(lacking.manifests).run_digest)
    assert held is not None and "workload" not in held.manifests()


def _faster(manifests: dict[str, Any]) -> None:
    manifests["run"]["spec"]["timing"]["latencyNs"]["mean"] -= 1000


def test_a_store_that_refuses_a_commit_stops_the_import_and_a_rerun_completes_it(
    setup: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole group refused by the store is not reported as one bad record while the rest
    vanish: the import stops saying so, the groups before it are stored, none of the group in
    flight is, and running it again stores the rest."""
    from ledger.errors import StoreError
    from ledger.importing import ImportStopped

    ledger, importer, ingester = setup
    importer.group = 1
    calls = {"n": 0}
    real = ledger.append_many

    def flaky(envelopes: list[Any]) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise StoreError("the database is full")
        return real(envelopes)

    monkeypatch.setattr(ledger, "append_many", flaky)
    before = count(ledger)
    with pytest.raises(ImportStopped, match=r"the database is full.*1 new.*Run the import again"):
        importer.run(records())
    assert count(ledger) == before + 1  # the first group only
    monkeypatch.setattr(ledger, "append_many", real)
    again = Importer(ledger, ingester, None).run(records())
    assert (again.new, again.unchanged, again.rejected) == (2, 1, [])


def test_a_supersession_an_interrupted_import_owed_is_made_by_the_next(
    setup: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, importer, ingester = setup
    importer.run(records())
    old = records()[0]
    changed = [r for r in records(_faster) if r.external_id == old.external_id]
    real = ledger.append_many
    calls = {"n": 0}

    def dies_before_the_supersession(envelopes: list[Any]) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:  # the group's ingestion went in; the process "dies" here
            raise KeyboardInterrupt
        return real(envelopes)

    monkeypatch.setattr(ledger, "append_many", dies_before_the_supersession)
    with pytest.raises(KeyboardInterrupt):
        importer.run(changed)
    old_digest = check_manifest_set(old.manifests).run_digest
    new_digest = check_manifest_set(changed[0].manifests).run_digest
    held = ledger.run(old_digest)
    assert held is not None and held.superseded_by is None  # owed
    monkeypatch.setattr(ledger, "append_many", real)
    admin = importer.admin
    mended = Importer(ledger, ingester, admin).run(changed)
    assert (mended.unchanged, mended.superseded, mended.events) == (1, 1, 1)
    held = ledger.run(old_digest)
    assert held is not None and held.superseded_by == new_digest
    assert Importer(ledger, ingester, admin).run(changed).events == 0  # and only once


def test_a_changed_record_without_the_admin_key_writes_nothing(setup: Any) -> None:
    ledger, importer, ingester = setup
    importer.run(records())
    before = count(ledger)
    old = records()[0]
    changed = [r for r in records(_faster) if r.external_id == old.external_id]
    summary = Importer(ledger, ingester, None).run(changed)
    assert summary.events == 0 and "needs the admin key" in dict(summary.rejected)[old.external_id]
    assert count(ledger) == before
    new_digest = check_manifest_set(changed[0].manifests).run_digest
    assert ledger.run(new_digest) is None


def test_reimporting_a_held_run_that_lacks_its_workload_attaches_it(setup: Any) -> None:
    """As `kernelindex ingest` attaches what a held run lacks: the run was ingested from a
    record without its workload; the full record, imported later, attaches it (ingester-
    signed, once) instead of counting it unchanged and leaving it out of its group."""
    ledger, importer, ingester = setup
    full = records()[0]
    importer.run([_without_workload(full)])
    digest = check_manifest_set(full.manifests).run_digest
    held = ledger.run(digest)
    assert held is not None and "workload" not in held.manifests()
    summary = Importer(ledger, ingester, None).run([full])
    assert (summary.unchanged, summary.attached, summary.events) == (1, 1, 1)
    held = ledger.run(digest)
    assert held is not None and held.manifests()["workload"] == full.manifests["workload"]
    assert [h.event for h in run_history(ledger, digest)] == [
        "Run.Ingested",
        "Run.ManifestsAttached",
    ]
    assert Importer(ledger, ingester, None).run([full]).events == 0
