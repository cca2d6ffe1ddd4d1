"""Source importers agree with the KernelIndex catalog (issue 14).

Every fixture record whose result the catalog also holds (same source and external id) maps
to the catalog's very manifests, byte for byte (but for the ``kernelindex:artifact/``
references to what a rerun fetches, which only metadata carries), wherever the fixture carries
what the catalog pinned. Where it does not (a KernelBot row whose code the dataset keeps
apart, FlashInfer files mapped without the dataset commit) the record is the catalog's minus
those fields and nothing else, and the importer keeps the catalog's richer run instead of
superseding it: importing a fixture after the catalog supersedes nothing and adds no run the
catalog has. Input that yields no run says why.
"""

from __future__ import annotations

import copy
import functools
import io
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

from domain.canonical import canonical_json
from domain.importers.flashinfer_trace import external_id_of, map_flashinfer_trace
from domain.importers.gpumode import map_gpumode, parse_leaderboards
from domain.importers.kernelindex_catalog import map_kernelindex_catalog
from domain.importers.records import (
    ImportRecord,
    Rejection,
    Skipped,
    without_artifact_references,
)
from domain.importers.sol_execbench import map_sol_execbench
from domain.importers.sol_leaderboard import map_sol_leaderboard
from domain.manifests.canonical_form import manifest_digest
from domain.manifests.manifest_set import check_manifest_set
from domain.statements import Role
from domain.timestamps import format_time, utc_now
from ledger.application import Ledger
from ledger.importing import Importer, compare_records
from ledger.signing.authoring import key_registration_envelope
from ledger.signing.keys import SigningKey
from ledger.signing.trust import TrustRoot
from ledger.store.schema import upgrade
from tests.paths import CONFORMANCE

FIXTURES = CONFORMANCE / "fixtures"
CATALOG = FIXTURES / "kernelindex-catalog" / "catalog-2026-08-16-0022af0b.jsonl.zst"
FLASHINFER_REVISION = "da915083d4c7c5e61aa3005e3d17ae488e0fc71c"  # what the catalog pins
# What a KernelBot row without code cannot give: the source the catalog pins.
NO_CODE = [
    "implementation.spec.source.contentDigest",
    "implementation.spec.source.fileName",
    "implementation.spec.source.sizeBytes",
]
# What FlashInfer files mapped without the dataset commit cannot give.
NO_REVISION = [
    "implementation.metadata.sourceRefs[0].url",
    "implementation.spec.projectRevision.commit",
]


Items = list[ImportRecord | Rejection]


def _folder(path: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes()
        for p in sorted(path.iterdir())
        if p.is_file() and p.suffix in (".json", ".jsonl")
    }


def _gpumode(leaderboards: bool) -> Items:
    folder = FIXTURES / "gpumode"
    boards = (
        parse_leaderboards((folder / "leaderboards.json").read_bytes()) if leaderboards else None
    )
    return list(
        map_gpumode(
            (folder / "fp8-mm-top.json").read_bytes(), "fp8-mm-top.json", leaderboards=boards
        )
    )


def _flashinfer(revision: str | None) -> Items:
    return list(
        map_flashinfer_trace(_folder(FIXTURES / "flashinfer-trace"), dataset_revision=revision)
    )


def _sol_execbench(folder: Path) -> Items:
    return list(map_sol_execbench(_folder(folder)))


# name → (the mapping, how many of its records the catalog holds, what those records lack)
SOURCES: dict[str, tuple[Callable[[], Items], int, list[str]]] = {
    "flashinfer-trace": (lambda: _flashinfer(FLASHINFER_REVISION), 3, []),
    "flashinfer-trace without the commit": (lambda: _flashinfer(None), 3, NO_REVISION),
    "gpumode": (lambda: _gpumode(False), 3, NO_CODE),
    "gpumode with leaderboards": (lambda: _gpumode(True), 3, NO_CODE),
    "sol-leaderboard": (
        lambda: list(map_sol_leaderboard(_folder(FIXTURES / "sol-leaderboard"))),
        0,
        [],
    ),
    **{
        f"sol-execbench/{d.name}": (functools.partial(_sol_execbench, d), 0, [])
        for d in sorted((FIXTURES / "sol-execbench").iterdir())
        if d.is_dir()
    },
}


@functools.cache
def _catalog_lines() -> tuple[bytes, ...]:
    import zstandard

    with CATALOG.open("rb") as raw:
        return tuple(io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw)))


@functools.cache
def _catalog() -> dict[tuple[str, str], ImportRecord]:
    """The catalog's runs by (source, external id), as the catalog importer maps them."""
    records = [r for r in map_kernelindex_catalog(_catalog_lines()) if isinstance(r, ImportRecord)]
    by_key = {(r.source, r.external_id): r for r in records}
    assert len(by_key) == len(records) == 7857
    return by_key


def _held(items: Items) -> list[tuple[ImportRecord, ImportRecord]]:
    """(fixture record, the catalog's record of the same result) for each the catalog holds."""
    catalog = _catalog()
    return [
        (item, catalog[(item.source, item.external_id)])
        for item in items
        if isinstance(item, ImportRecord) and (item.source, item.external_id) in catalog
    ]


# --- the mappers ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_every_fixture_record_the_catalog_holds_is_the_catalogs(name: str) -> None:
    mapping, held_count, lacking = SOURCES[name]
    items = mapping()
    assert [i for i in items if type(i) is Rejection] == []
    held = _held(items)
    assert len(held) == held_count
    for ours, theirs in held:
        assert set(ours.manifests) == set(theirs.manifests)
        dropped, changed = compare_records(theirs.manifests, ours.manifests)
        assert (sorted(dropped), changed) == (lacking, []), ours.external_id
        # Byte-identical but for the artifacts a rerun fetches, which the catalog does not name.
        mine = {role: without_artifact_references(m) for role, m in ours.manifests.items()}
        if not lacking:  # so equal digests and keys
            for role, document in theirs.manifests.items():
                assert canonical_json(mine[role]) == canonical_json(document), role
            assert (
                check_manifest_set(ours.manifests).digests
                == check_manifest_set(theirs.manifests).digests
            )
            continue
        # Given what it lacks, the record is the catalog's, every digest equal.
        completed = copy.deepcopy(mine)
        implementation = completed["implementation"]
        implementation["spec"] = {
            **implementation["spec"],
            **theirs.manifests["implementation"]["spec"],
        }
        implementation["metadata"] = theirs.manifests["implementation"]["metadata"]
        completed["run"]["spec"]["implementationDigest"] = manifest_digest(implementation)
        for role, document in theirs.manifests.items():
            assert canonical_json(completed[role]) == canonical_json(document), role


def test_flashinfer_ids_are_made_of_what_the_manifests_keep() -> None:
    """The catalog importer derives the trace importer's id from a catalog run's manifests."""
    for revision in (None, FLASHINFER_REVISION):
        records = [r for r in _flashinfer(revision) if isinstance(r, ImportRecord)]
        assert len(records) == 5
        for record in records:
            assert record.external_id == external_id_of(record.manifests)
    flashinfer = [r for (source, _), r in _catalog().items() if source == "flashinfer-bench"]
    assert len(flashinfer) == 1937
    assert all(r.external_id == external_id_of(r.manifests) for r in flashinfer)


def test_the_gpumode_rows_lack_only_the_code() -> None:
    """Why the KernelBot records lack the source: the dataset rows carry no code."""
    rows = json.loads((FIXTURES / "gpumode" / "fp8-mm-top.json").read_bytes())["rows"]
    assert [(r["row"]["code"], r["truncated_cells"]) for r in rows] == [(None, [])] * 2
    for record, _ in _held(_gpumode(False)):
        assert "source" not in record.manifests["implementation"]["spec"]
        assert record.artifacts == ()  # no code, no source artifact


def test_compare_records_names_dropped_and_changed_fields() -> None:
    [(ours, theirs)] = _held(_gpumode(False))[:1]
    same = compare_records(theirs.manifests, theirs.manifests)
    assert same == ([], [])
    # The run's references follow the members they name: only the member's fields count.
    assert compare_records(theirs.manifests, ours.manifests) == (
        [
            "implementation.spec.source.fileName",
            "implementation.spec.source.sizeBytes",
            "implementation.spec.source.contentDigest",
        ],
        [],
    )
    # The other way round nothing is dropped: the catalog's record only adds.
    dropped, changed = compare_records(ours.manifests, theirs.manifests)
    assert dropped == [] and len(changed) == 3
    richer = copy.deepcopy(theirs.manifests)
    richer["implementation"]["spec"]["licensing"] = {"declared": "MIT"}  # was {}: nothing dropped
    richer["run"]["spec"]["timing"]["samples"] = 100.0  # was 100: the same JSON number
    assert compare_records(theirs.manifests, richer) == (
        [],
        ["implementation.spec.licensing.declared"],
    )
    without = {role: m for role, m in theirs.manifests.items() if role != "workload"}
    assert compare_records(theirs.manifests, without)[0] == ["workload"]


# --- the importer --------------------------------------------------------------------------------


def _sample(keys: Iterable[tuple[str, str]]) -> list[bytes]:
    """The catalog lines of the runs named by ``keys`` and of the rows they name, in order."""
    wanted = {json.loads(_catalog()[key].snapshot.content)["id"] for key in keys}
    runs = [json.loads(line)["row"] for line in _catalog_lines() if b'"benchmark_runs"' in line]
    named = {r[k] for r in runs if r["id"] in wanted for k in ("workloadId", "implementationId")}
    sample = []
    for line in _catalog_lines():
        table = json.loads(line)["table"] if line.strip() else None
        if table == "sources":
            sample.append(line)
        elif table in ("workloads", "implementations", "benchmark_runs"):
            row_id = json.loads(line)["row"]["id"]
            if row_id in named or row_id in wanted:
                sample.append(line)
    return sample


@pytest.fixture
def importer(tmp_path: Path) -> Iterator[Importer]:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    upgrade(url)
    admin, ingester, log = (SigningKey.generate() for _ in range(3))
    root = TrustRoot("test/parity", (admin.public,), log.public, format_time(utc_now()))
    ledger = Ledger(url, root, log_key=log)
    ledger.append(key_registration_envelope(admin.public, [Role.ADMIN], admin))
    ledger.append(key_registration_envelope(ingester.public, [Role.INGESTER], admin))
    yield Importer(ledger, ingester, admin)


def _fresh(importer: Importer) -> Importer:
    """A new importer on the same ledger (its index read back from the events)."""
    return Importer(importer.ledger, importer.ingester, importer.admin)


def _fixture_keys() -> list[tuple[str, str]]:
    return [
        (ours.source, ours.external_id)
        for items in (_gpumode(False), _flashinfer(FLASHINFER_REVISION))
        for ours, _ in _held(items)
    ]


def test_importing_the_fixtures_after_the_catalog_supersedes_nothing(importer: Importer) -> None:
    catalog = importer.run(map_kernelindex_catalog(_sample(_fixture_keys())))
    assert (catalog.new, catalog.rejected, catalog.skipped) == (6, [], [])

    gpumode = _fresh(importer).run(_gpumode(False))
    # 30786 is not in the catalog; the three cases of 30771 are, with their source pinned.
    assert (gpumode.new, gpumode.unchanged, gpumode.superseded, gpumode.rejected) == (3, 3, 0, [])
    assert gpumode.events == 3
    assert len(gpumode.kept) == 3
    for external_id, reason in gpumode.kept:
        assert external_id is not None and external_id.startswith("submission/30771#")
        assert "lacks implementation.spec.source.contentDigest" in reason

    poorer = _fresh(importer).run(_flashinfer(None))
    # The catalog's three baseline traces are kept; the two agent-authored ones are new.
    assert (poorer.new, poorer.unchanged, poorer.superseded, poorer.rejected) == (2, 3, 0, [])
    assert len(poorer.kept) == 3
    assert all("implementation.spec.projectRevision.commit" in r for _, r in poorer.kept)
    richer = _fresh(importer).run(_flashinfer(FLASHINFER_REVISION))
    # With the commit: the baselines are the catalog's runs exactly, and the two agent runs
    # ingested without it are superseded by their richer selves.
    assert (richer.new, richer.unchanged, richer.superseded, richer.kept) == (0, 3, 2, [])

    again = _fresh(importer).run(_gpumode(False))
    assert (again.new, again.superseded, again.events, again.unchanged) == (0, 0, 0, 6)


def test_the_richer_catalog_run_supersedes_a_poorer_fixture_run(importer: Importer) -> None:
    first = importer.run(_gpumode(False))
    assert first.new == 6
    later = _fresh(importer).run(map_kernelindex_catalog(_sample(_fixture_keys()[:3])))
    assert (later.new, later.superseded, later.kept, later.rejected) == (0, 3, [], [])
    for ours, theirs in _held(_gpumode(False)):
        old = importer.ledger.run(check_manifest_set(ours.manifests).run_digest)
        assert old is not None
        assert old.superseded_by == check_manifest_set(theirs.manifests).run_digest


def test_a_changed_record_that_lacks_fields_of_the_held_run_is_refused(
    importer: Importer,
) -> None:
    importer.run(map_kernelindex_catalog(_sample(_fixture_keys()[:1])))
    [(ours, theirs)] = _held(_gpumode(False))[:1]
    changed = copy.deepcopy(ours.manifests)
    changed["run"]["spec"]["timing"]["latencyNs"]["mean"] += 1
    record = ImportRecord(ours.source, ours.external_id, changed, ours.snapshot)
    before = importer.ledger.recorder.max_notification_id()
    summary = _fresh(importer).run([record])
    assert (summary.new, summary.superseded, summary.unchanged, summary.kept) == (0, 0, 0, [])
    [(external_id, reason)] = summary.rejected
    assert external_id == ours.external_id
    assert "changed (run.spec.timing.latencyNs.mean)" in reason
    assert "implementation.spec.source.contentDigest" in reason
    assert "superseding would drop it, so nothing was written" in reason
    assert importer.ledger.recorder.max_notification_id() == before
    old = importer.ledger.run(check_manifest_set(theirs.manifests).run_digest)
    assert old is not None and old.superseded_by is None


def test_input_that_yields_no_run_is_reported_as_skipped(importer: Importer) -> None:
    listing = (FIXTURES / "gpumode" / "leaderboards.json").read_bytes()
    summary = importer.run(map_gpumode(listing, "leaderboards.json"))
    assert (summary.new, summary.unchanged, summary.rejected, summary.events) == (0, 0, [], 0)
    assert [e for e, _ in summary.skipped] == [
        "leaderboard/399",
        "leaderboard/430",
        "leaderboard/463",
    ]
    reported = summary.to_json()
    assert reported["skipped"] == [{"externalId": e, "reason": r} for e, r in summary.skipped]
    assert reported["kept"] == []
    folder = importer.run(
        map_sol_execbench(_folder(FIXTURES / "sol-execbench" / "cuda_cpp-rmsnorm"))
    )
    [(none, reason)] = folder.skipped
    assert none is None and reason.startswith("no trace*.jsonl in the folder")
    assert isinstance(Skipped(None, "x"), Rejection)  # older consumers still see the reason
