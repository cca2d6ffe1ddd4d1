"""The catch-up runner that folds ledger events into the read models, exactly once.

Each batch is one transaction: the view updates and the tracking row (last event position
folded in) commit together, so a crash between batches neither skips nor double-counts an
event, and a crash inside a batch leaves nothing of it. SQLite has no subscriptions, so the
runner is called in-process after writes and before reads (it is cheap when nothing is new);
on PostgreSQL the same loop runs, serialised by an advisory lock.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, insert, select, text, update
from sqlalchemy.orm import Session

from domain.canonical import canonical_json
from domain.evidence import (
    EvidenceLevel,
    EvidenceResult,
)
from domain.ranking import RankEntry, View, rank_group
from domain.run_facts import (
    RunFold,
)
from ledger.aggregates import run_id
from ledger.application import Ledger
from projections.tables import VIEW_TABLES, metadata, ranks, runs, tracking

RUNNER_NAME = "views"
DEFAULT_BATCH = 1000
_ADVISORY_LOCK_ID = 0x4B49_5649_4557  # "KIVIEW"


@dataclass(frozen=True)
class CatchUp:
    events: int
    position: int


def _statement(state: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """(stored event fields, decoded statement) of a stored event."""
    stored = json.loads(state)
    payload = base64.b64decode(stored["envelope"]["payload"])
    return stored, json.loads(payload)


def _subject(statement: dict[str, Any]) -> str:
    return "sha256:" + str(statement["subject"][0]["digest"]["sha256"])


class ProjectionRunner:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._events = ledger.recorder.events_record_cls  # type: ignore[attr-defined]
        engine = ledger.recorder.datastore.engine  # type: ignore[attr-defined]
        self._is_postgres = engine.dialect.name == "postgresql"
        metadata.create_all(engine, checkfirst=True)

    # ------------------------------------------------------------- the loop

    def catch_up(self, batch: int = DEFAULT_BATCH, max_batches: int | None = None) -> CatchUp:
        """Fold every new event into the views; return how many and the position reached."""
        total = 0
        done = 0
        position = 0
        while max_batches is None or done < max_batches:
            with self.ledger.recorder.transaction(commit=True) as session:  # type: ignore[attr-defined]
                folded, position = self._one_batch(session, batch)
            total += folded
            done += 1
            if folded < batch:
                break
        return CatchUp(total, position)

    def _lock(self, session: Session) -> None:
        if self._is_postgres:
            session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _ADVISORY_LOCK_ID})

    def _position(self, session: Session) -> int:
        value = session.execute(
            select(tracking.c.position).where(tracking.c.name == RUNNER_NAME)
        ).scalar()
        return int(value) if value is not None else 0

    def _one_batch(self, session: Session, batch: int) -> tuple[int, int]:
        self._lock(session)
        start = self._position(session)
        rows = session.execute(
            select(self._events.id, self._events.topic, self._events.state)
            .where(self._events.id > start)
            .order_by(self._events.id)
            .limit(batch)
        ).all()
        if not rows:
            return 0, start
        touched_groups: set[str] = set()
        dirty_evidence: set[str] = set()
        for position, topic, state in rows:
            self.fold(
                session,
                int(position),
                str(topic).rsplit(":", 1)[-1],
                bytes(state),
                touched_groups,
                dirty_evidence,
            )
        last = int(rows[-1][0])
        for digest in sorted(dirty_evidence):
            key = self._recompute_evidence(session, digest, last)
            if key is not None:
                touched_groups.add(key)
        for key in sorted(touched_groups):
            self._rerank(session, key)
        self._set_position(session, last)
        return len(rows), last

    def _set_position(self, session: Session, position: int) -> None:
        exists = session.execute(
            select(tracking.c.name).where(tracking.c.name == RUNNER_NAME)
        ).scalar()
        if exists is None:
            session.execute(insert(tracking).values(name=RUNNER_NAME, position=position))
        else:
            session.execute(
                update(tracking).where(tracking.c.name == RUNNER_NAME).values(position=position)
            )

    # ------------------------------------------------------------- folding

    def fold(
        self,
        session: Session,
        position: int,
        event: str,
        state: bytes,
        touched_groups: set[str],
        dirty_evidence: set[str],
    ) -> None:
        """Apply one event to the views (inside the batch's transaction)."""
        if not event.startswith("Run."):
            return  # key events have no read model here
        stored, statement = _statement(state)
        digest = _subject(statement)
        predicate = statement["predicate"]
        if event == "Run.Ingested":
            self._insert_run(session, position, digest, str(stored["received_at"]), predicate)
            key = session.execute(
                select(runs.c.comparison_key).where(runs.c.run_digest == digest)
            ).scalar()
            if key is not None:
                touched_groups.add(str(key))
            return
        values: dict[str, Any] = {"last_position": position}
        if event == "Run.Attested":
            values["attestations"] = runs.c.attestations + 1
        elif event == "Run.Retracted":
            values["retracted"] = True
        elif event == "Run.Superseded":
            values["superseded_by"] = predicate.get("supersededBy") or "unspecified"
        elif event == "Run.RerunRecorded":
            values["reruns"] = runs.c.reruns + 1
            dirty_evidence.add(digest)
        session.execute(update(runs).where(runs.c.run_digest == digest).values(**values))
        if event in ("Run.Retracted", "Run.Superseded"):
            key = session.execute(
                select(runs.c.comparison_key).where(runs.c.run_digest == digest)
            ).scalar()
            if key is not None:
                touched_groups.add(str(key))

    def _insert_run(
        self, session: Session, position: int, digest: str, received_at: str, predicate: Any
    ) -> None:
        fold = RunFold.ingested(position, digest, predicate)
        profile, result = fold.profile, fold.evidence
        session.execute(
            insert(runs).values(
                run_digest=digest,
                name=profile.name,
                title=profile.title,
                source=profile.source,
                external_id=profile.external_id,
                benchmark=profile.benchmark,
                status=profile.status,
                comparison_key=profile.comparison_key,
                metric=profile.metric,
                statistic=profile.statistic,
                unit=profile.unit,
                claimed=profile.claimed,
                product=profile.product,
                architecture=profile.architecture,
                observed_at=profile.observed_at,
                ingested_position=position,
                ingested_at=received_at,
                retracted=False,
                superseded_by=None,
                attestations=0,
                reruns=0,
                last_position=position,
                **_evidence_columns(result),
                rerun_median_ns=None,
                rerun_ci95_low=None,
                rerun_ci95_high=None,
            )
        )

    def _run_events(self, session: Session, digest: str, up_to: int) -> Sequence[Any]:
        return session.execute(
            select(self._events.id, self._events.topic, self._events.state)
            .where(self._events.originator_id == run_id(digest), self._events.id <= up_to)
            .order_by(self._events.id)
        ).all()

    def _recompute_evidence(self, session: Session, digest: str, up_to: int) -> str | None:
        """Evidence from the run's events (only reruns move it); the verified value too."""
        fold: RunFold | None = None
        for position, topic, raw in self._run_events(session, digest, up_to):
            event = str(topic).rsplit(":", 1)[-1]
            stored, statement = _statement(bytes(raw))
            if event == "Run.Ingested":
                fold = RunFold.ingested(int(position), digest, statement["predicate"])
            elif fold is not None:
                fold.apply(event, int(position), str(stored["signer"]), statement["predicate"])
        if fold is None:
            return None
        median, interval = fold.verified()
        session.execute(
            update(runs)
            .where(runs.c.run_digest == digest)
            .values(
                **_evidence_columns(fold.evidence),
                rerun_median_ns=median,
                rerun_ci95_low=interval[0] if interval else None,
                rerun_ci95_high=interval[1] if interval else None,
            )
        )
        return fold.profile.comparison_key

    def _rerank(self, session: Session, key: str) -> None:
        rows = session.execute(select(runs).where(runs.c.comparison_key == key)).mappings().all()
        entries = [_rank_entry(row) for row in rows]
        session.execute(delete(ranks).where(ranks.c.comparison_key == key))
        new_rows = []
        for view in (View.SOURCE_NATIVE, View.VERIFIED):
            for ranked in rank_group(entries, view):
                new_rows.append(
                    {
                        "view": str(view),
                        "run_digest": ranked.run,
                        "comparison_key": key,
                        "rank": ranked.rank,
                        "of_count": ranked.of,
                        "value": ranked.value,
                        "tied_with": json.dumps(list(ranked.tied_with)),
                        "policy_version": ranked.policy_version,
                    }
                )
        if new_rows:
            session.execute(insert(ranks), new_rows)

    # ------------------------------------------------------------- rebuild

    def rebuild(self, batch: int = DEFAULT_BATCH) -> CatchUp:
        """Drop every read model and fold the whole event log again."""
        with self.ledger.recorder.transaction(commit=True) as session:  # type: ignore[attr-defined]
            self._lock(session)
            for table in (*VIEW_TABLES, tracking):
                session.execute(delete(table))
        return self.catch_up(batch)

    def table_digests(self) -> dict[str, str]:
        """sha256 over the canonical rows of each view, in key order: equal views, equal digests."""
        digests: dict[str, str] = {}
        with self.ledger.recorder.transaction(commit=False) as session:  # type: ignore[attr-defined]
            for table in VIEW_TABLES:
                order = [c for c in table.primary_key.columns]
                hasher = hashlib.sha256()
                for row in session.execute(select(table).order_by(*order)).mappings():
                    hasher.update(canonical_json(_jsonable(dict(row))) + b"\n")
                digests[table.name] = "sha256:" + hasher.hexdigest()
        return digests


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (bool(v) if isinstance(v, bool) else v) for k, v in row.items()}


def _evidence_columns(result: EvidenceResult) -> dict[str, Any]:
    return {
        "evidence_level": result.level.label,
        "evidence_order": int(result.level),
        "evidence_reasons": json.dumps(list(result.reasons)),
        "evidence_caused_by": result.caused_by,
        "policy_version": result.policy_version,
    }


def _rank_entry(row: Any) -> RankEntry:
    low, high = row["rerun_ci95_low"], row["rerun_ci95_high"]
    return RankEntry(
        run=row["run_digest"],
        comparison_key=row["comparison_key"],
        status=row["status"],
        claimed=row["claimed"],
        level=EvidenceLevel(row["evidence_order"]),
        retracted=bool(row["retracted"]),
        superseded=row["superseded_by"] is not None,
        rerun_median_ns=row["rerun_median_ns"],
        rerun_ci95_ns=(low, high) if low is not None and high is not None else None,
    )
