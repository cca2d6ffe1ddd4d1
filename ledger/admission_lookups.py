"""Admission's lookups: runs and keys as the group being admitted has left them (else as stored)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar
from uuid import UUID

from eventsourcing.domain import Aggregate
from eventsourcing.persistence import Mapper, MapperDeserialisationError, StoredEvent

from domain.errors import DomainError
from ledger.admission_cache import (
    GroupState,
    KeyCache,
    RunCache,
    pending_key_state,
)
from ledger.aggregates import (
    STATE_TOPICS,
    Principal,
    Run,
    RunState,
    principal_id,
)
from ledger.authority import KeyState
from ledger.errors import CorruptRecordError, NotFoundError
from ledger.key_fold import fold_key_events
from ledger.store.event_store import EventStore
from ledger.store.stored_events import StoredRecord, stored_records
from ledger.timing import Stage, timed

A = TypeVar("A", bound=Aggregate)


class AdmissionLookups:
    """What ``Admission`` reads: aggregates, run state and keys, through its group and caches."""

    store: EventStore
    mapper: Mapper[UUID]
    _group: GroupState
    _runs: RunCache
    _keys: KeyCache

    @timed(Stage.GET)
    def get(self, cls: type[A], aggregate_id: UUID) -> A | None:
        """The aggregate as the group being admitted has left it (else as stored)."""
        found = self._lookup(cls, aggregate_id)
        if found is not None:
            fetched = self._group.fetched
            if fetched is not None:
                fetched.append(found)
        return found

    def _lookup(self, cls: type[A], aggregate_id: UUID) -> A | None:
        group = self._group
        pending = group.aggregates
        if pending is not None:
            found = pending.get(aggregate_id)
            if found is not None:
                if not isinstance(found, cls):
                    raise DomainError(f"aggregate {aggregate_id} is not a {cls.__name__}")
                return found
        versions = group.versions
        if cls is Run and versions is not None:
            if group.known_absent(aggregate_id):
                return None  # a new run: nothing to load (most of an import's envelopes)
            cached = self._runs.get(aggregate_id, versions.get(aggregate_id))
            if isinstance(cached, cls):
                return cached
        aggregate = self._replay(aggregate_id)
        if aggregate is None:
            return None
        if not isinstance(aggregate, cls):
            raise DomainError(f"aggregate {aggregate_id} is not a {cls.__name__}")
        return aggregate

    def _replay(self, aggregate_id: UUID, below: int | None = None) -> Aggregate | None:
        """An aggregate from its stored events (None: it has none), in one query, decoded by
        the ledger's mapper; ``below``: from those before that version only. What
        ``Repository.get`` does without its cache (a second cache of the runs this one
        keeps, and a deep copy of the aggregate on every hit): the writer's runs live in
        ``RunCache`` and are reused while their version is stored."""
        records = stored_records(self.store, aggregate_id)
        if below is not None:
            records = [r for r in records if r.version < below]
        aggregate: Aggregate | None = None
        for event in self._decoded(aggregate_id, records):
            aggregate = event.mutate(aggregate)
        return aggregate

    def run_state(self, aggregate_id: UUID) -> RunState | None:
        """A run (None: no such run) as its state events leave it, its attestations neither
        read nor decoded: its name, manifests, lifecycle and rerun jobs. (Whether one of its
        attestations is damaged, history and audit say; appending to the run replays them
        all and fails closed on one.)"""
        return self._fold_state(aggregate_id, STATE_TOPICS)

    def _fold_state(self, aggregate_id: UUID, topics: Sequence[str]) -> RunState | None:
        """``RunState`` from a run's stored events of ``topics``, by the events' own rules.
        Fails closed as a replay would: on an event that does not decode, and on a record
        that does not start with its one ingestion at version 1."""
        records = stored_records(self.store, aggregate_id, topics=topics)
        found: RunState | None = None
        for event in self._decoded(aggregate_id, records):
            if isinstance(event, Run.Ingested) and found is None and event.originator_version == 1:
                found = RunState(event.run_digest, event.run_name, event.envelope)
            elif found is not None and not isinstance(event, Run.Ingested):
                event.apply_to(found)
            else:
                raise CorruptRecordError(
                    f"stored events of {aggregate_id} do not start with its one ingestion; "
                    "run 'kernelindex history' or 'kernelindex audit' to see which"
                )
        return found

    def _decoded(self, aggregate_id: UUID, records: Iterable[StoredRecord]) -> Iterator[Any]:
        """The domain events of stored records, decoded by the ledger's mapper."""
        for record in records:
            stored = StoredEvent(aggregate_id, record.version, record.topic, record.state)
            try:
                yield self.mapper.to_domain_event(stored)  # an Aggregate.Event
            except MapperDeserialisationError:
                # Fail closed: nothing is appended to, or read from, an aggregate whose
                # stored events no longer decode. History and audit say which is damaged.
                raise CorruptRecordError(
                    f"stored events of {aggregate_id} cannot be decoded; run 'kernelindex "
                    "history' or 'kernelindex audit' to see which"
                ) from None

    def key_state(self, key_id: str) -> KeyState | None:
        """The key as the log holds it, with the positions of its registration and
        revocation (inside a group being admitted: as the group has left it so far)."""
        memo, pending = self._group.keys, self._group.aggregates
        if pending is not None and (found := pending.get(principal_id(key_id))) is not None:
            return pending_key_state(found) if isinstance(found, Principal) else None
        if memo is None:
            return self._load_key_state(key_id)
        if key_id not in memo:
            memo[key_id] = self._load_key_state(key_id)
        return memo[key_id]

    def _load_key_state(self, key_id: str) -> KeyState | None:
        state = fold_key_events(key_id, stored_records(self.store, principal_id(key_id)))
        if state is not None and self._group.aggregates is not None:
            self._keys.put(key_id, state)
        return state

    def _position(self, aggregate_id: UUID, version: int) -> int | None:
        """Where an event is stored; None while it is only admitted in the current group."""
        records = stored_records(self.store, aggregate_id, version)
        return records[0].position if records else None

    def _record_at(self, aggregate_id: UUID, version: int) -> StoredRecord:
        records = stored_records(self.store, aggregate_id, version)
        if not records:
            raise NotFoundError(f"no stored event {aggregate_id} v{version}")
        return records[0]
