"""Bringing a source's published results in: its records become signed ingestions, and what
they name by digest (solutions' sources, catalog manifests) is kept as artifacts.

The importer signs with the home's ingester and admin keys, so these calls take the home
beside the service; what the import added is folded into the views before they return.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from api.run_intake import held_manifests
from api.service.ledger_service import LedgerService
from domain.importers.catalog_projects import catalog_projects
from domain.importers.kernelindex_catalog import catalog_manifests
from domain.importers.records import Artifact, ImportRecord, Rejection, manifest_artifact
from domain.importers.sol_execbench import MappedSolution
from ledger.home import LedgerHome
from ledger.importing import Importer, ImportSummary
from ledger.store.artifacts import ArtifactStore

__all__ = [
    "ImportSummary",
    "KeptArtifacts",
    "import_records",
    "keep_manifests",
    "keep_projects",
    "keep_solutions",
]

_PUT_BATCH = 500  # artifacts stored per transaction


@dataclass(frozen=True)
class KeptArtifacts:
    """How many were kept by digest (solutions, or manifests) and why the rest were refused."""

    kept: int
    refused: list[Rejection]


def import_records(
    service: LedgerService,
    home: LedgerHome,
    items: Iterable[ImportRecord | Rejection],
    progress: Callable[[ImportSummary], None] | None = None,
) -> ImportSummary:
    """Ingest (or supersede, or attach to) a run for each record, signed by the home's keys;
    the views fold what was added now, once, rather than at the next read."""
    ledger = service.ledger
    importer = Importer(
        ledger,
        home.key("ingester"),
        home.key("admin"),
        held=lambda run, have: held_manifests(ledger, run, have),
    )
    summary = importer.run(items, progress=progress)
    service.views.position()
    return summary


def keep_solutions(
    service: LedgerService, solutions: Iterable[MappedSolution | Rejection]
) -> KeptArtifacts:
    """Store each solution's sources and implementation manifest (to be rerun later)."""
    store = ArtifactStore(service.ledger.store)
    kept = 0
    refused: list[Rejection] = []
    for item in solutions:
        if isinstance(item, Rejection):
            refused.append(item)
            continue
        for artifact in item.artifacts:
            store.put(artifact)
        store.put(manifest_artifact(item.implementation, item.name))
        kept += 1
    return KeptArtifacts(kept, refused)


def keep_manifests(service: LedgerService, lines: Iterable[bytes]) -> KeptArtifacts:
    """Store every manifest of a catalog export (its digest recomputed) as an artifact."""
    store = ArtifactStore(service.ledger.store)
    refused: list[Rejection] = []
    kept = 0
    batch: list[Artifact] = []
    for _, manifest in catalog_manifests(lines, rejected=refused):
        batch.append(manifest_artifact(manifest))
        kept += 1
        if len(batch) == _PUT_BATCH:
            store.put_many(batch)
            batch = []
    store.put_many(batch)
    return KeptArtifacts(kept, refused)


def keep_projects(service: LedgerService, lines: Iterable[bytes]) -> bool:
    """Store the catalog's projects with their implementations (the link is only in the
    catalog's rows: ``domain.importers.catalog_projects``); False when it names none."""
    found = catalog_projects(lines)
    if found is not None:
        ArtifactStore(service.ledger.store).put(found)
    return found is not None
