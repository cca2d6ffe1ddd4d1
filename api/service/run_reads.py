"""A run's record, read on any door (``ledger.store.read_door``), in one snapshot: the run
named, its events (read once, re-verified), what the views say of it (its row, standings
and group's #1, its group's place in a sweep), which of its artifacts are stored, and its
group's #1's manifests when the run is not #1. The service runs it on its session's
connection (``api.service.runs.Runs``), a short command on its driver's (issue 33), so
``kernelindex show`` answers alike either way.

Loads no SQLAlchemy and no eventsourcing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from api.service.compare import compare_runs
from api.service.models.runs import RunRecord
from api.service.run_record import RunInViews, artifact_digests, compose
from api.service.sweeps import SweepPlaces
from domain.importers.catalog_rows import RUN_SNAPSHOT_PREFIX, published_in_snapshot
from domain.ranking import View
from ledger.errors import NotFoundError
from ledger.history_reads import KeySource, RunEvents, run_events
from ledger.ids import run_id
from ledger.run_manifests import stored_run_manifests
from ledger.signing.trust import TrustRoot
from ledger.store.artifact_reads import ArtifactError, artifact_facts, stored_artifact
from ledger.store.read_door import Rows
from projections import view_reads
from projections.reference_text import full_digest
from projections.references import resolve_run


@dataclass(frozen=True)
class StoredFacts:
    """Name, media type and size of a stored artifact (read without its content)."""

    digest: str
    name: str | None
    media_type: str | None
    size: int


@dataclass(frozen=True)
class RunRead:
    """What one snapshot read of a run: its events, what the views say of it and its stored
    artifacts' facts."""

    digest: str
    events: RunEvents
    views: RunInViews | None
    stored: dict[str, StoredFacts]
    public_url: str
    snapshot_published: str | None = None

    def record(self) -> RunRecord:
        return compose(
            self.digest,
            self.events,
            self.views,
            set(self.stored),
            self.public_url,
            self.snapshot_published,
        )


def run_read(
    rows: Rows,
    reference: str,
    keys: KeySource,
    trust_root: TrustRoot,
    sweeps: SweepPlaces,
    position: Callable[[], int],
    public_url: str,
) -> RunRead:
    """The run ``reference`` names and all its record shows, read in ``rows``'s snapshot.
    ``position``: the views' position the snapshot reads at (what ``sweeps`` memoises on)."""
    digest = full_digest(reference) or resolve_run(rows, reference)
    events = run_events(rows, digest, keys, trust_root)
    if events.ingestion is None:
        raise NotFoundError(f"no run with digest {digest}")
    row = view_reads.run_row(rows, digest)
    seen = None
    if row is not None:
        key = row.comparison_key
        first = view_reads.top_of_group(rows, key, View.SOURCE_NATIVE) if key else None
        compared = None
        if first is not None and first != digest:
            theirs = stored_run_manifests(rows, run_id(first)) or {}
            compared = compare_runs(digest, events.manifests, first, theirs)
        sweep = sweeps.place(rows, key, position()) if key else None
        seen = RunInViews(row, view_reads.standings(rows, digest), compared, sweep)
    wanted = artifact_digests(events)
    facts = artifact_facts(rows, wanted) if wanted else []
    stored = {str(f["digest"]): StoredFacts(**f) for f in facts}
    published = _snapshot_published(rows, events, stored)
    return RunRead(digest, events, seen, stored, public_url, published)


def _snapshot_published(
    rows: Rows, events: RunEvents, stored: dict[str, StoredFacts]
) -> str | None:
    """The publication time the source's record states, read from the stored snapshot
    the ingestion names, for a catalog run ingested before ingestions carried it."""
    predicate = (events.ingestion.predicate if events.ingestion else None) or {}
    snapshot = stored.get(str(predicate.get("snapshotDigest")))
    if predicate.get("publishedAt") or snapshot is None:
        return None
    if not (snapshot.name or "").startswith(RUN_SNAPSHOT_PREFIX):
        return None
    try:
        content = stored_artifact(rows, snapshot.digest).content
    except ArtifactError:  # damaged or gone: the audit reports it; the page goes on
        return None
    return published_in_snapshot(snapshot.name, content)
