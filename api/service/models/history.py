"""Replies listing an aggregate's events (a run's or a key's), each one re-verified."""

from __future__ import annotations

from msgspec import UNSET, UnsetType, field

from api.service.models import ApiModel, Document


class CheckResult(ApiModel, kw_only=True):
    name: str  # what was checked: record-readable, envelope, signature, role...
    ok: bool
    detail: str


class EvidenceChange(ApiModel, kw_only=True):
    from_: str | None = field(name="from")  # None: the run had no level before (ingestion)
    to: str
    reasons: list[str]


class EventChange(ApiModel, kw_only=True):
    """What an event changed; every field absent when it changed nothing."""

    evidence: EvidenceChange | UnsetType = UNSET
    ranking: str | UnsetType = UNSET
    ignored: str | UnsetType = UNSET  # why it changes nothing (it failed verification)


class HistoryEvent(ApiModel, kw_only=True):
    position: int
    version: int
    event: str
    received_at: str | None
    signer: str | None
    role: str | None
    predicate_type: str | None
    # As stored: a damaged record is shown (and fails its checks), so these are not
    # assumed to be well formed.
    predicate: Document | None
    envelope: Document | None
    verified: bool
    checks: list[CheckResult]
    says: str  # one line saying what the event states, for people
    leaf_index: int | None
    changed: EventChange | None  # None in a key's history


class RunHistory(ApiModel, kw_only=True):
    run: str
    events: list[HistoryEvent]
    all_verified: bool  # of this page
    start: int
    next: int | None
    total: int


class KeyHistory(ApiModel, kw_only=True):
    key_id: str
    events: list[HistoryEvent]
    all_verified: bool
    start: int
    next: int | None
    total: int
