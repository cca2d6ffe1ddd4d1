"""A run's (or key's) history: its stored events, re-verified, with what they say.

Reads cost what they show: a history is read a page at a time (anyone can add attestations
to a run, so a run's events are not bounded by anything its owner controls), and each
event's verification is kept (``VerificationCache``): with key validity by log position, a
verdict depends only on the event's own bytes and position and on its signer's key events,
so it is reused until one of those changes.
"""

from __future__ import annotations

import hashlib
import json
import threading
import weakref
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from domain.comparison import readable_primary
from domain.event_names import EventName
from domain.manifests.manifest_set import with_attached
from domain.quantities import format_value
from domain.statements import PredicateType, is_case_reason
from ledger.aggregates import STATE_EVENTS, principal_id, run_id
from ledger.application import Ledger
from ledger.authority import KeyLookup, KeyState
from ledger.event_verification import EventVerification, verify_record
from ledger.signing.dsse import named_keyid
from ledger.signing.trust import TrustRoot
from ledger.store.log_watch import LogWatch
from ledger.store.stored_events import StoredRecord

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
    except ValueError:  # a damaged key record: verification says so, uncached
        return None


VERIFICATIONS = VerificationCache()


@dataclass
class _ReaderKeys:
    """One ledger's key states for readers, and the log generation they were read in."""

    watch: LogWatch
    generation: int = 0
    states: dict[str, KeyState] = field(default_factory=dict)


class KeyStateCache:
    """Key states for readers, per ledger: reused while the key's stored version is the one
    they were read at (one light version query per page, then only changed keys re-read),
    and while the log still holds what it held when they were read: a database that went
    back brings versions back under other content (a key registered again, other roles)."""

    def __init__(self, size: int = 10_000) -> None:
        self.size = size
        self._by_ledger: weakref.WeakKeyDictionary[Ledger, _ReaderKeys] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def states(self, ledger: Ledger, key_ids: set[str]) -> dict[str, KeyState]:
        with self._lock:
            mine = self._by_ledger.get(ledger)
            if mine is None:
                mine = self._by_ledger[ledger] = _ReaderKeys(LogWatch(ledger.tlog))
        # The head, then the versions, in one transaction: one snapshot where the database
        # gives one (else a database that goes back between the two reads is noticed, and
        # this call's states dropped, on the next call).
        with ledger.store.transaction(commit=False) as session:
            mine.watch.still_holds(session)
            generation = mine.watch.generation
            versions = ledger.stored_versions({principal_id(k) for k in key_ids})
        with self._lock:
            if generation > mine.generation:
                mine.states.clear()
                mine.generation = generation
            found = {
                k: s
                for k in key_ids
                if (s := mine.states.get(k)) is not None
                and versions.get(principal_id(k)) == s.version
            }
        missing = [k for k in key_ids if k not in found and principal_id(k) in versions]
        loaded = ledger.key_states(missing) if missing else {}
        with self._lock:
            # Read before the log went back (another reader saw it since): used, not kept.
            if mine.generation == generation == mine.watch.generation:
                if len(mine.states) + len(loaded) > self.size:
                    mine.states.clear()
                mine.states.update(loaded)
        return found | loaded


KEY_STATES = KeyStateCache()


@dataclass(frozen=True)
class HistoryPage:
    """Events ``start`` .. of one aggregate, re-verified; ``total`` events in all, and the
    version the next page starts at (None: this is the last)."""

    entries: list[EventVerification]
    total: int
    start: int
    next_start: int | None


def verify_records(ledger: Ledger, records: Sequence[StoredRecord]) -> list[EventVerification]:
    """Re-verify stored events against each signer's key as the log holds it (registration
    and revocation positions: the state at each event follows). The keys the events name
    are read together, in one query, before any event is verified."""
    named = [_named_key(record.state) for record in records]
    known = KEY_STATES.states(ledger, {k for k in named if k is not None})

    def keys(key_id: str) -> KeyState | None:
        return known[key_id] if key_id in known else ledger.key_state(key_id)

    return [
        VERIFICATIONS.verify(record, keys, ledger.trust_root, named=key)
        for record, key in zip(records, named, strict=True)
    ]


def run_history(ledger: Ledger, run_digest: str) -> list[EventVerification]:
    """Every event of a run (for audits and tests: pages are what readers should use)."""
    return aggregate_history(ledger, run_id(run_digest))


def key_history(ledger: Ledger, key_id: str) -> list[EventVerification]:
    return aggregate_history(ledger, principal_id(key_id))


def aggregate_history(ledger: Ledger, aggregate_id: UUID) -> list[EventVerification]:
    return verify_records(ledger, ledger.stored_records(aggregate_id))


def history_page(
    ledger: Ledger, aggregate_id: UUID, start: int = 1, limit: int = DEFAULT_PAGE
) -> HistoryPage:
    """One page of an aggregate's history, from version ``start``."""
    size = max(1, min(limit, MAX_PAGE))
    start = max(1, start)
    records = ledger.stored_records(aggregate_id, start=start, limit=size)
    total = ledger.event_count(aggregate_id)
    last = records[-1].version if records else start - 1
    return HistoryPage(
        verify_records(ledger, records), total, start, last + 1 if last < total else None
    )


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


def run_events(ledger: Ledger, run_digest: str, latest: int = LATEST_ATTESTATIONS) -> RunEvents:
    aggregate = run_id(run_digest)
    state = ledger.stored_records(aggregate, events=STATE_EVENTS)
    newest = (
        ledger.stored_records(aggregate, events=[EventName.RUN_ATTESTED], limit=latest, newest=True)
        if latest > 0
        else []
    )
    verified = verify_records(ledger, [*state, *newest])
    return RunEvents(verified[: len(state)], verified[len(state) :], ledger.event_count(aggregate))


def state_events_before(ledger: Ledger, run_digest: str, version: int) -> list[EventVerification]:
    """The run's state events before ``version``, re-verified: what a history page's changes
    build on (none for the first page)."""
    if version <= 1:
        return []
    records = ledger.stored_records(run_id(run_digest), events=STATE_EVENTS)
    return verify_records(ledger, [r for r in records if r.version < version])


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
