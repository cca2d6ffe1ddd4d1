"""Turning mapped source records into signed ingestion events, idempotently.

For each record: if the ledger already holds that exact run, nothing is appended (a re-run of
an import adds no event). If the source's record changed — same source and external id, a
different run digest — the new run is ingested and an admin-signed lifecycle event marks the
old run superseded by it; the old run stays readable. The raw source bytes the record was
mapped from, and any artifacts it carries, are stored by digest; the ingestion statement
names the snapshot by digest. A bad record is reported with its reason and skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from domain.errors import DomainError
from domain.importers.records import ImportRecord, Rejection
from domain.manifests.manifest_set import check_manifest_set
from domain.timestamps import parse_time
from ledger.aggregates import Run
from ledger.application import Ledger, statement_of
from ledger.artifacts import ArtifactStore
from ledger.authoring import ingestion_envelope, lifecycle_envelope
from ledger.errors import AlreadyExistsError
from ledger.keys import SigningKey


@dataclass
class ImportSummary:
    new: int = 0
    unchanged: int = 0
    superseded: int = 0
    rejected: list[tuple[str | None, str]] = field(default_factory=list)
    events: int = 0

    def to_json(self) -> dict[str, object]:
        return {
            "new": self.new,
            "unchanged": self.unchanged,
            "superseded": self.superseded,
            "rejected": [{"externalId": e, "reason": r} for e, r in self.rejected],
            "events": self.events,
        }


class Importer:
    def __init__(self, ledger: Ledger, ingester: SigningKey, admin: SigningKey | None) -> None:
        self.ledger = ledger
        self.ingester = ingester
        self.admin = admin
        self.artifacts = ArtifactStore(ledger.recorder)
        self.latest = self._index()

    def _index(self) -> dict[tuple[str, str], str]:
        """(source, external id) → the latest run ingested for it, from the ingestion events."""
        latest: dict[tuple[str, str], str] = {}
        for stored in self.ledger.stored_states(Run.Ingested):
            try:
                predicate = statement_of(stored)["predicate"]
                if predicate.get("externalId") is not None:
                    key = (str(predicate["source"]), str(predicate["externalId"]))
                    latest[key] = str(stored["run_digest"])
            except (ValueError, KeyError, TypeError):
                continue  # damaged records are audit's business, not the importer's
        return latest

    def run(
        self,
        items: Iterable[ImportRecord | Rejection],
        progress: Callable[[ImportSummary], None] | None = None,
    ) -> ImportSummary:
        summary = ImportSummary()
        for item in items:
            if isinstance(item, Rejection):
                summary.rejected.append((item.external_id, item.reason))
            else:
                try:
                    self._one(item, summary)
                except DomainError as exc:
                    summary.rejected.append((item.external_id, exc.message))
            if progress is not None:
                progress(summary)
        return summary

    def _one(self, record: ImportRecord, summary: ImportSummary) -> None:
        checked = check_manifest_set(record.manifests)
        digest = checked.run_digest
        key = (record.source, record.external_id)
        previous = self.latest.get(key)
        if previous == digest or (previous is None and self.ledger.run(digest) is not None):
            self._store_artifacts(record)  # an earlier import may have died before this
            summary.unchanged += 1
            return
        envelope = ingestion_envelope(
            record.manifests,
            self.ingester,
            source=record.source,
            external_id=record.external_id,
            fetched_at=parse_time(record.fetched_at) if record.fetched_at else None,
            snapshot_digest=record.snapshot.digest,
        )
        try:
            self.ledger.append(envelope)
        except AlreadyExistsError:
            summary.unchanged += 1
            self.latest[key] = digest
            self._store_artifacts(record)
            return
        summary.events += 1
        self._store_artifacts(record)
        self.latest[key] = digest
        if previous is None:
            summary.new += 1
            return
        self._supersede(previous, digest, record)
        summary.superseded += 1
        summary.events += 1

    def _supersede(self, old: str, new: str, record: ImportRecord) -> None:
        if self.admin is None:
            raise DomainError(
                f"{record.source} record {record.external_id} changed; superseding the old run "
                "needs the admin key"
            )
        old_run = self.ledger.run(old)
        if old_run is None or old_run.superseded_by is not None:
            return
        self.ledger.append(
            lifecycle_envelope(
                old,
                old_run.run_name,
                self.admin,
                action="supersede",
                reason=f"the {record.source} record {record.external_id} changed",
                superseded_by=new,
            )
        )

    def _store_artifacts(self, record: ImportRecord) -> None:
        self.artifacts.put(record.snapshot)
        for artifact in record.artifacts:
            self.artifacts.put(artifact)
