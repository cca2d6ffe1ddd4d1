"""A history's reads and what they show, on any door (issue 33): a page of an aggregate's
stored events, re-verified, on a ``Rows`` (``ledger.store.read_door``). The server and a
full command run these on their session's connection (``ledger.history``), a short
command on its driver's; so both read, verify and describe an event alike.

Loads no SQLAlchemy and no eventsourcing: a short read command imports this.

Each event's verification is kept (``VerificationCache``): with key validity by log
position, a verdict depends only on the event's own bytes and position and on its signer's
key events, so it is reused until one of those changes.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from domain.comparison import readable_primary
from domain.event_names import EventName
from domain.manifests.manifest_set import with_attached
from domain.quantities import format_value
from domain.statements import PredicateType, is_case_reason
from ledger.authority import KeyLookup, KeyState
from ledger.errors import NotFoundError
from ledger.event_verification import EventVerification, verify_record
from ledger.ids import STATE_TOPICS, principal_id, run_id, topic_of
from ledger.key_fold import fold_key_events
from ledger.signing.dsse import named_keyid
from ledger.signing.trust import TrustRoot
from ledger.store.read_door import Rows
from ledger.store.stored_events import (
    StoredRecord,
    aggregate_page,
    aggregate_records,
    event_count,
    newest_records,
    topic_records,
)

DEFAULT_PAGE = 50
MAX_PAGE = 500


class VerificationCache:
    """Verifications of stored events, by (position, SHA-256 of the stored bytes), each
    with the state of the key its envelope names when it was verified; reused only while
    that key's state is still the same. Bounded by entries and by the stored bytes they
    keep (an ingestion carries up to megabytes of manifests): least recently used go first."""

    def __init__(self, size: int = 50_000, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self._items: OrderedDict[
            tuple[Any, ...], tuple[KeyState | None, EventVerification, int]
        ] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def verify(
        self,
        record: StoredRecord,
        keys: KeyLookup,
        trust_root: TrustRoot,
        named: str | None = None,
    ) -> EventVerification:
        """``named``: the key id the record's envelope names, if the caller read it."""
        named = named or _named_key(record.state)
        key = (
            trust_root.log_key.key_id,
            record.aggregate_id,
            record.position,
            record.version,
            record.topic,
            hashlib.sha256(record.state).digest(),
        )
        state = _state_of(keys, named)
        with self._lock:
            hit = self._items.get(key)
            if hit is not None and hit[0] == state:
                self._items.move_to_end(key)
                return hit[1]
        result = verify_record(record, keys, trust_root)
        weight = len(record.state)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:  # verified again (its signer's key changed): replaced
                self._bytes -= old[2]
            self._items[key] = (state, result, weight)
            self._bytes += weight
            while self._items and (len(self._items) > self.size or self._bytes > self.max_bytes):
                self._bytes -= self._items.popitem(last=False)[1][2]
        return result


def _named_key(state: bytes) -> str | None:
    try:
        stored = json.loads(state)
    except ValueError:
        return None
    return named_keyid(stored.get("envelope")) if isinstance(stored, dict) else None


def _state_of(keys: KeyLookup, key_id: str | None) -> KeyState | None:
    if key_id is None:
        return None
    try:
        return keys(key_id)
    except ValueError:  # a damaged key record: verification says so (cached under no state)
        return None


VERIFICATIONS = VerificationCache()


# The keys some events name -> how to look up the state of each (the server's, cached across
# reads: ``ledger.history.ledger_keys``; a short command's: ``rows_keys``).
KeySource = Callable[[set[str]], KeyLookup]


def rows_keys(rows: Rows) -> KeySource:
    """Each key's state folded from its own events as ``rows`` reads them, once a key. The
    keys some events name are folded when they are asked for, before any is verified, as
    ``ledger.history.ledger_keys`` reads them: a damaged key record fails the read alike
    (``CorruptRecordError``), rather than reading as a key nobody registered."""
    states: dict[str, KeyState | None] = {}

    def key(key_id: str) -> KeyState | None:
        if key_id not in states:
            states[key_id] = fold_key_events(key_id, aggregate_records(rows, principal_id(key_id)))
        return states[key_id]

    def named(key_ids: set[str]) -> KeyLookup:
        for key_id in sorted(key_ids):
            key(key_id)
        return key

    return named


def verify_stored(
    records: Sequence[StoredRecord], keys: KeySource, trust_root: TrustRoot
) -> list[EventVerification]:
    """Re-verify stored events against each signer's key as the log holds it (registration
    and revocation positions: the state at each event follows). The keys the events name
    are asked for together, before any event is verified."""
    named = [_named_key(record.state) for record in records]
    lookup = keys({k for k in named if k is not None})
    return [
        VERIFICATIONS.verify(record, lookup, trust_root, named=key)
        for record, key in zip(records, named, strict=True)
    ]


@dataclass(frozen=True)
class HistoryPage:
    """Events ``start`` .. of one aggregate, re-verified; ``total`` events in all, and the
    version the next page starts at (None: this is the last)."""

    entries: list[EventVerification]
    total: int
    start: int
    next_start: int | None


def history_page(
    rows: Rows,
    aggregate_id: UUID,
    keys: KeySource,
    trust_root: TrustRoot,
    start: int = 1,
    limit: int = DEFAULT_PAGE,
) -> HistoryPage:
    """One page of an aggregate's history, from version ``start``."""
    size = max(1, min(limit, MAX_PAGE))
    start = max(1, start)
    records = aggregate_page(rows, aggregate_id, start, size)
    total = event_count(rows, aggregate_id)
    last = records[-1].version if records else start - 1
    return HistoryPage(
        verify_stored(records, keys, trust_root), total, start, last + 1 if last < total else None
    )


def require_run(rows: Rows, run_digest: str) -> str:
    """``run_digest`` if a run was ingested under it. A raw lookup, not a projection's:
    a damaged record must still be reachable by history and audit. (Prefixes, names and
    external ids are resolved over the views: ``projections.references``.)"""
    full = "sha256:" + run_digest.strip().lower().removeprefix("sha256:")
    first = aggregate_page(rows, run_id(full), 1, 1) if len(full) == 71 else []
    if not first or first[0].version != 1:  # its ingestion is its first event
        raise NotFoundError(f"no run with digest {full}")
    return full


def describe(entry: EventVerification) -> str:
    """One line saying what the event states, for people."""
    kind = entry.predicate_type
    describer = _DESCRIBERS.get(kind) if kind is not None else None
    if describer is None:
        return "unreadable event"
    return describer(entry.predicate or {})


def _describe_ingestion(p: dict[str, Any]) -> str:
    run = (p.get("manifests") or {}).get("run") or {}
    spec = run.get("spec") or {}
    primary = readable_primary(run)  # described, never judged, here
    claim = (
        f", {primary.statistic} {primary.metric} {format_value(primary.value, primary.unit)}"
        if primary.value is not None
        else ""
    )
    ext = f" #{p['externalId']}" if p.get("externalId") else ""
    return f"ingested from {p.get('source')}{ext}: status {spec.get('status')}{claim}"


def _describe_attestation(p: dict[str, Any]) -> str:
    body = str(p.get("body", ""))
    short = body if len(body) <= 100 else body[:97] + "..."
    return f"{p.get('type')}: {short}"


def _describe_lifecycle(p: dict[str, Any]) -> str:
    return f"{p.get('action')}: {p.get('reason')}"


def _describe_attachment(p: dict[str, Any]) -> str:
    attached = p.get("manifests")
    attached = attached if isinstance(attached, dict) else {}
    names = [
        f"{role} {((doc or {}).get('metadata') or {}).get('name')}"
        for role, doc in sorted(attached.items())
        if isinstance(doc, dict)
    ]
    return "attached " + ", ".join(names) + " (evidence unchanged)"


def _describe_rerun_request(p: dict[str, Any]) -> str:
    req = p.get("requirements") or {}
    return (
        f"rerun requested: job {p.get('jobId')} on {req.get('product')} "
        f"({req.get('architecture')}), expires {p.get('expiresAt')}"
    )


def _describe_rerun_claim(p: dict[str, Any]) -> str:
    device = p.get("device") or {}
    return (
        f"claimed job {p.get('jobId')} for {p.get('leaseSeconds')} s on "
        f"{device.get('product')} ({device.get('architecture')}, {device.get('backend')})"
    )


def _failed_cases(p: dict[str, Any]) -> str:
    """The vocabulary codes of the failed cases, counted (older results' free-text reasons are
    left to the predicate itself)."""
    cases = p.get("cases")
    if not isinstance(cases, list):
        return ""
    codes = Counter(
        c["reason"]
        for c in cases
        if isinstance(c, dict) and isinstance(c.get("reason"), str) and is_case_reason(c["reason"])
    )
    words = [code if n == 1 else f"{code} ×{n}" for code, n in sorted(codes.items())]
    return f" ({', '.join(words)})" if words else ""


def _describe_rerun(p: dict[str, Any]) -> str:
    summary = p.get("summary") or {}
    env = p.get("environment") or {}
    verdict = "all cases correct" if summary.get("allCorrect") else "FAILED correctness"
    if not summary.get("allCorrect"):
        verdict += _failed_cases(p)
    if p.get("outcome") == "failed":
        verdict = f"job FAILED: {p.get('failure')}"
    median = summary.get("medianNs")
    timing = f", median {median:.0f} ns" if isinstance(median, int | float) else ""
    return (
        f"rerun result for job {p.get('jobId')}: {verdict}{timing} on {env.get('product')} "
        f"({env.get('architecture')}, {env.get('backend')})"
    )


def _describe_key(p: dict[str, Any]) -> str:
    roles = ",".join(p.get("roles") or [])
    label = f" ({p['label']})" if p.get("label") else ""
    if p.get("action") == "register":
        return f"register key {str(p.get('keyId'))[:19]}…{label} as {roles}"
    return f"revoke key {str(p.get('keyId'))[:19]}…: {p.get('reason') or 'no reason given'}"


# Predicate type → what its events say, in one line. PredicateType is a str enum, so the
# stored predicate type string looks its describer up directly.
_DESCRIBERS: dict[str, Callable[[dict[str, Any]], str]] = {
    PredicateType.INGESTION: _describe_ingestion,
    PredicateType.ATTESTATION: _describe_attestation,
    PredicateType.LIFECYCLE: _describe_lifecycle,
    PredicateType.ATTACHMENT: _describe_attachment,
    PredicateType.RERUN_REQUEST: _describe_rerun_request,
    PredicateType.RERUN_CLAIM: _describe_rerun_claim,
    PredicateType.RERUN: _describe_rerun,
    PredicateType.KEY: _describe_key,
}


def state_events_before(
    rows: Rows, run_digest: str, version: int, keys: KeySource, trust_root: TrustRoot
) -> list[EventVerification]:
    """The run's state events before ``version``, re-verified: what a history page's changes
    build on (none for the first page)."""
    if version <= 1:
        return []
    records = topic_records(rows, run_id(run_digest), STATE_TOPICS)
    return verify_stored([r for r in records if r.version < version], keys, trust_root)


LATEST_ATTESTATIONS = 20


@dataclass(frozen=True)
class RunEvents:
    """What a run record shows of a run's events, re-verified: every event that can change
    the run, the newest attestations, and how many events there are in all."""

    state: list[EventVerification]
    attestations: list[EventVerification]  # the newest, oldest first
    total: int

    @property
    def ingestion(self) -> EventVerification | None:
        return next((e for e in self.state if e.event == EventName.RUN_INGESTED), None)

    @property
    def manifests(self) -> dict[str, Any]:
        """The run's manifests: those it was ingested with and those attached since (only
        verified events count)."""
        ingestion = self.ingestion
        found = with_attached(
            (ingestion.predicate or {}).get("manifests") or {} if ingestion is not None else {},
            {},
        )
        for entry in self.state:
            if entry.ok and entry.event == EventName.RUN_MANIFESTS_ATTACHED and entry.predicate:
                found = with_attached(found, entry.predicate["manifests"])
        return found

    @property
    def attestation_count(self) -> int:
        return self.total - len(self.state)

    @property
    def shown(self) -> list[EventVerification]:
        return sorted(self.state + self.attestations, key=lambda e: e.position)


def run_events(
    rows: Rows,
    run_digest: str,
    keys: KeySource,
    trust_root: TrustRoot,
    latest: int = LATEST_ATTESTATIONS,
) -> RunEvents:
    """What a run record shows of a run's events (``RunEvents``), re-verified."""
    aggregate = run_id(run_digest)
    state = topic_records(rows, aggregate, STATE_TOPICS)
    newest = newest_records(rows, aggregate, [topic_of(EventName.RUN_ATTESTED)], latest)
    verified = verify_stored([*state, *newest], keys, trust_root)
    total = event_count(rows, aggregate)
    return RunEvents(verified[: len(state)], verified[len(state) :], total)
