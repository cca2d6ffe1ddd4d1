"""The #1 records timeline: every time a comparison group's #1 changed, newest first, dated.

Read from the records view (``projections.records``): the fold keeps each group's history
there, walked in date order, each record dated by its source's date (the run's observedAt,
as the KernelIndex catalog dates its record events) or, where the source gave none, by the
ledger's admission of the run, and saying which. The feed, the page and ``GET /v1/records``
all answer this one reply.
"""

from __future__ import annotations

from typing import Literal

from api.service.freshness import Views
from api.service.models.registry import RecordEvent, RecordTimeline
from ledger.store.event_store import StoreSession
from projections.queries import rows_of
from projections.records import (
    ADMITTED,
    FEED_MAX,
    GroupName,
    RecordEntry,
    RecordPage,
    RecordScope,
    group_names,
    record_entries,
)
from projections.view_reads import resolve_group

__all__ = ["FEED_MAX", "RecordScope", "Records", "record_entries", "record_event", "timeline"]


class Records:
    def __init__(self, views: Views) -> None:
        self.views = views

    def timeline(
        self,
        group: str | None = None,
        before: int | None = None,
        limit: int = FEED_MAX,
        *,
        gpu: str | None = None,
        author: str | None = None,
    ) -> RecordTimeline:
        """Records newest first, of every group or of ``group`` (a key or a unique prefix:
        404 unknown, 400 ambiguous), or of runs on ``gpu`` or by ``author`` (exact stored
        names); ``before``: the ``next`` of the page before."""

        def read(session: StoreSession) -> RecordTimeline:
            key = resolve_group(rows_of(session), group) if group is not None else None
            if any("\x00" in name for name in (gpu or "", author or "")):
                # No stored name holds NUL (PostgreSQL's text cannot): no run of it, no record.
                return RecordTimeline(
                    comparison_key=key, group=None, newest=None, items=[], next=None
                )
            return timeline(session, RecordScope(key, gpu, author), before, limit)

        return self.views.read(read)


def timeline(
    session: StoreSession, scope: RecordScope, before: int | None, limit: int
) -> RecordTimeline:
    """A page of the records of ``scope``, as the reply (in the caller's snapshot)."""
    page = record_entries(session, scope, before, limit)
    keys = {str(e.run["comparison_key"]) for e in page.entries}
    names = group_names(session, keys | ({scope.key} if scope.key is not None else set()))
    return timeline_of(scope.key, page, names)


def timeline_of(key: str | None, page: RecordPage, names: dict[str, GroupName]) -> RecordTimeline:
    items = [record_event(entry, names) for entry in page.entries]
    named = names.get(key) if key is not None else None
    return RecordTimeline(
        comparison_key=key,
        group=named.short if named is not None else None,
        newest=page.newest,
        items=items,
        next=items[-1].position if page.more and items else None,
    )


def record_event(entry: RecordEntry, names: dict[str, GroupName]) -> RecordEvent:
    record, run, previous = entry.record, entry.run, entry.previous
    key = str(run["comparison_key"])
    named = names.get(key)
    dated: Literal["observed", "admitted"] = "admitted" if record.dated == ADMITTED else "observed"
    return RecordEvent(
        comparison_key=key,
        group=named.short if named is not None else key,
        group_parts=named.parts if named is not None else "",
        run=record.run,
        name=str(run["name"]),
        title=run["title"],
        author=run["author"],
        gpu=run["product"],
        source=str(run["source"]),
        evidence_level=str(run["evidence_level"]),
        value=record.value,
        unit=run["unit"],
        metric=str(run["metric"]),
        statistic=run["statistic"],
        previous_run=record.previous,
        previous_name=None if previous is None else str(previous["name"]),
        previous_value=record.previous_value,
        factor=record.factor,
        at=record.at,
        dated=dated,
        admitted_at=str(run["ingested_at"]),
        position=record.position,
        withdrawn=record.withdrawn,
        holds=entry.holds,
    )
