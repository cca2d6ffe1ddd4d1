"""Runs: resolving what a person types, the runs list, a run's record and what its page adds.

A run's record reads the run's events once and the views once, in one database snapshot
(the run named, its row, standings and group's #1, which of its artifacts are stored), and
its group's #1's manifest set when the run is not #1 (``api.service.run_reads``, which a
short command reads through the driver too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from api.service.freshness import Views
from api.service.models import to_response
from api.service.models.log import Checkpoint
from api.service.models.runs import RunList, RunRecord, RunSummary
from api.service.paging import Cursor, page_size
from api.service.run_history import run_digest
from api.service.run_reads import RunRead, StoredFacts, run_read
from api.service.sweeps import SweepPlaces
from domain.evidence import EvidenceLevel
from domain.ranking import View
from ledger.history import ledger_keys
from ledger.store.artifacts import ArtifactStore
from ledger.store.event_store import StoreSession
from ledger.store.log_queries import checkpoint_json
from projections import queries
from projections.queries import rows_of
from projections.reference_text import full_digest
from projections.rows import RecentRunRow, RunListRow, RunNames, SourceRow


@dataclass(frozen=True)
class RunPage:
    """What a run's page shows: its record, the facts of the artifacts stored here, and the
    log's checkpoint it can be checked against."""

    record: RunRecord
    artifacts: dict[str, StoredFacts]
    checkpoint: Checkpoint


@dataclass(frozen=True)
class RunBadge:
    """What a run's badge says: its evidence level and its source-native standing."""

    level: str | None
    rank: int | None
    of: int | None


class Runs:
    def __init__(self, views: Views, public_url: str = "") -> None:
        self.views = views
        self.ledger = views.ledger
        self.public_url = public_url
        self.artifacts = ArtifactStore(views.ledger.store)
        self.sweeps = SweepPlaces()

    def resolve(self, reference: str) -> str:
        """A run by digest, prefix, name or external id (``projections.references``); a full
        digest is looked up in the log itself (a run whose record is damaged is still found,
        for its audit)."""
        if full_digest(reference) is not None:
            return self.ledger.require_run(reference)
        return self.views.read(lambda session: run_digest(rows_of(session), reference))

    def list_page(
        self,
        *,
        comparison_key: str | None = None,
        source: str | None = None,
        level: EvidenceLevel | None = None,
        gpu: str | None = None,
        benchmark: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> RunList:
        where = queries.RunFilter(
            comparison_key=comparison_key,
            source=source,
            level=level,
            gpu=gpu,
            benchmark=benchmark,
            after=Cursor.decode(cursor).after if cursor is not None else None,
        )
        size = page_size(limit)
        rows = self.views.read(lambda session: queries.list_runs(session, where, size + 1))
        more = len(rows) > size
        rows = rows[:size]
        next_cursor = Cursor(rows[-1].ingested_position).encode() if more and rows else None
        return RunList(items=[run_summary(r) for r in rows], next=next_cursor)

    def record(self, reference: str) -> RunRecord:
        """Every section of the run's page (``api.service.run_record``)."""
        return self._read(reference, checkpoint=False)[0].record()

    def page(self, reference: str) -> RunPage:
        """The record, the facts of the artifacts it names that are stored here, and the
        checkpoint: all read in one snapshot."""
        found, checkpoint = self._read(reference, checkpoint=True)
        assert checkpoint is not None
        return RunPage(found.record(), found.stored, to_response(checkpoint, Checkpoint))

    def _read(self, reference: str, *, checkpoint: bool) -> tuple[RunRead, dict[str, Any] | None]:
        """The run named, its events (read once) and what the views say of it (read once),
        in one snapshot (``api.service.run_reads``); with the log's checkpoint when asked."""

        def read(session: StoreSession) -> tuple[RunRead, dict[str, Any] | None]:
            found = run_read(
                rows_of(session),
                reference,
                ledger_keys(self.ledger),
                self.ledger.trust_root,
                self.sweeps,
                lambda: self.views.position_in(session),
                self.public_url,
            )
            return found, checkpoint_json(self.ledger) if checkpoint else None

        return self.views.read(read)

    def names(self, digest: str) -> RunNames:
        """A run's name and title (both None for a run the views do not hold)."""
        return self.views.read(lambda session: queries.run_names(session, digest))

    def badge(self, reference: str) -> RunBadge:
        digest = self.resolve(reference)

        def read(session: StoreSession) -> RunBadge:
            row = queries.run_row(session, digest)
            native = queries.standings(session, digest).get(str(View.SOURCE_NATIVE))
            return RunBadge(
                row.evidence_level if row is not None else None,
                native.rank if native is not None else None,
                native.of if native is not None else None,
            )

        return self.views.read(read)

    def recent(self, limit: int) -> list[RecentRunRow]:
        return self.views.read(lambda session: queries.recent_runs(session, limit))

    def sources(self) -> list[SourceRow]:
        return self.views.read(queries.sources)

    def stored_facts(self, digests: list[str]) -> dict[str, StoredFacts]:
        """The facts of those of ``digests`` stored here (at most ``MAX_FACTS``, one query)."""
        digests = digests[:MAX_FACTS]
        if not digests:
            return {}
        return {str(f["digest"]): StoredFacts(**f) for f in self.artifacts.facts(digests)}


MAX_FACTS = 500  # one IN list; a page names no more than this


def run_summary(row: RunListRow) -> RunSummary:
    return RunSummary(
        digest=row.run_digest,
        name=row.name,
        title=row.title,
        source=row.source,
        external_id=row.external_id,
        benchmark=row.benchmark,
        status=row.status,
        comparison_key=row.comparison_key,
        metric=row.metric,
        claimed=row.claimed,
        unit=row.unit,
        gpu=row.product,
        evidence_level=row.evidence_level,
        retracted=bool(row.retracted),
        superseded_by=row.superseded_by,
        attestations=row.attestations,
        ingested_at=row.ingested_at,
        position=row.ingested_position,
    )
