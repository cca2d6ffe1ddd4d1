"""A run's (or key's) history: its stored events, re-verified, with what they say.

Reads cost what they show: a history is read a page at a time (anyone can add attestations
to a run, so a run's events are not bounded by anything its owner controls), and each
event's verification is kept (``ledger.history_reads.VerificationCache``). The reads
themselves are ``ledger.history_reads``' (a short command runs them on its driver): here
they run on the ledger's session, with its signers' keys cached across reads (``KEY_STATES``).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from uuid import UUID

from ledger import history_reads
from ledger.aggregates import principal_id, run_id
from ledger.application import Ledger
from ledger.authority import KeyLookup, KeyState
from ledger.event_verification import EventVerification
from ledger.history_reads import (
    DEFAULT_PAGE,
    LATEST_ATTESTATIONS,
    MAX_PAGE,
    VERIFICATIONS,
    HistoryPage,
    KeySource,
    RunEvents,
    VerificationCache,
    describe,
)
from ledger.store.event_store import connection_of
from ledger.store.log_watch import LogWatch
from ledger.store.read_door import SessionRows
from ledger.store.stored_events import StoredRecord

__all__ = [
    "DEFAULT_PAGE",
    "LATEST_ATTESTATIONS",
    "MAX_PAGE",
    "VERIFICATIONS",
    "HistoryPage",
    "RunEvents",
    "VerificationCache",
    "describe",
]


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


def ledger_keys(ledger: Ledger) -> KeySource:
    """The keys some events name, read together (``KEY_STATES``: reused across reads while
    unchanged); a key not among them is read on its own."""

    def lookup(named: set[str]) -> KeyLookup:
        known = KEY_STATES.states(ledger, named)
        return lambda key_id: known[key_id] if key_id in known else ledger.key_state(key_id)

    return lookup


def verify_records(ledger: Ledger, records: Sequence[StoredRecord]) -> list[EventVerification]:
    """Re-verify stored events against each signer's key as the log holds it
    (``ledger.history_reads.verify_stored``)."""
    return history_reads.verify_stored(records, ledger_keys(ledger), ledger.trust_root)


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
    """One page of an aggregate's history, from version ``start``, in one transaction
    (``ledger.history_reads.history_page``: what a short command reads too)."""
    with ledger.store.transaction(commit=False) as session:
        rows = SessionRows(connection_of(session))
        keys = ledger_keys(ledger)
        return history_reads.history_page(rows, aggregate_id, keys, ledger.trust_root, start, limit)


def run_events(ledger: Ledger, run_digest: str, latest: int = LATEST_ATTESTATIONS) -> RunEvents:
    """``ledger.history_reads.run_events``, in one transaction."""
    with ledger.store.transaction(commit=False) as session:
        rows = SessionRows(connection_of(session))
        return history_reads.run_events(
            rows, run_digest, ledger_keys(ledger), ledger.trust_root, latest
        )
