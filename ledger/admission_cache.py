"""What admission remembers: what one group of writes has changed so far (visible only to the
writing thread), and the runs and keys earlier groups read, reused only while the stored
version shows that nobody has appended to them since."""

from __future__ import annotations

import threading
from collections import OrderedDict
from uuid import UUID

from eventsourcing.domain import Aggregate

from domain.statements import Role
from domain.timestamps import parse_time
from ledger.aggregates import Principal, Run, principal_id
from ledger.authority import KeyState
from ledger.signing.keys import PublicKey


class GroupState(threading.local):
    """The group being admitted, seen only by the thread admitting it: its changed
    aggregates, the keys it looked up, the stored versions it read, the stored keys that
    authorised it (checked again under the log's lock) and the groups its runs join."""

    aggregates: dict[UUID, Aggregate] | None = None
    keys: dict[str, KeyState | None] | None = None
    # Stored version of each run the group's envelopes are about, read in one query.
    versions: dict[UUID, int] | None = None
    # The runs that query asked about and did not find: not stored (``known_absent``).
    absent: frozenset[UUID] = frozenset()
    # principal id -> the stored version of a key that authorised an admitted envelope.
    signers: dict[UUID, int] | None = None
    # run digest -> (its comparison key, the version of the event that gave it one).
    groups: dict[str, tuple[str, int]] | None = None
    # The aggregates looked up for the envelope being admitted: if it is refused after its
    # command applied an event, that event is taken back from them (``Admission._undo``).
    fetched: list[Aggregate] | None = None

    def begin(self) -> None:
        self.aggregates, self.keys, self.signers, self.groups = {}, {}, {}, {}
        self.fetched = []

    def end(self) -> None:
        self.aggregates = self.keys = self.versions = self.signers = self.groups = None
        self.fetched = None
        self.absent = frozenset()

    def read_versions(self, asked: set[UUID], versions: dict[UUID, int]) -> None:
        """The stored versions the group's one query found for the ids it ``asked`` about:
        an asked id it did not find is a run nobody stored (``known_absent``), taken once
        for the group (one set lookup an envelope, not three reads of this thread-local)."""
        self.versions = versions
        self.absent = frozenset(asked.difference(versions))

    def known_absent(self, aggregate_id: UUID) -> bool:
        """The group's version query found no stored event of this run. A writer that
        stores it before this group commits makes the commit conflict, and the group is
        admitted again (``Ledger.append_many``'s retry), so this is never acted on stale."""
        return aggregate_id in self.absent

    def join_group(self, run_digest: str, comparison_key: str, version: int) -> None:
        if self.groups is not None:
            self.groups[run_digest] = (comparison_key, version)


class RunCache:
    """Runs as the last committed group left them, reused (without a copy or a
    fast-forward query) while their stored version is still the one they carry."""

    def __init__(self, size: int) -> None:
        self._runs: OrderedDict[UUID, Run] = OrderedDict()
        self._size = size

    def get(self, aggregate_id: UUID, stored_version: int | None) -> Run | None:
        cached = self._runs.get(aggregate_id)
        if cached is None:
            return None
        if stored_version != cached.version or cached.pending_events:
            self._runs.pop(aggregate_id, None)
            return None
        self._runs.move_to_end(aggregate_id)
        return cached

    def remember(self, touched: dict[UUID, Aggregate]) -> None:
        for aggregate_id, aggregate in touched.items():
            if isinstance(aggregate, Run) and not aggregate.pending_events:
                self._runs[aggregate_id] = aggregate
                self._runs.move_to_end(aggregate_id)
        while len(self._runs) > self._size:
            self._runs.popitem(last=False)

    def forget(self, touched: dict[UUID, Aggregate]) -> None:
        for aggregate_id in touched:
            self._runs.pop(aggregate_id, None)

    def clear(self) -> None:
        self._runs.clear()


class KeyCache:
    """Keys read by earlier groups, with the version read; reused only while unchanged."""

    def __init__(self, size: int) -> None:
        self._keys: dict[str, tuple[int, KeyState]] = {}
        self._size = size

    def known(self, key_ids: set[str]) -> list[str]:
        return sorted(key_ids & set(self._keys))

    def unchanged(self, key_ids: list[str], versions: dict[UUID, int]) -> dict[str, KeyState]:
        """Those of ``key_ids`` whose stored version is still the one read (another process
        may have revoked one since)."""
        found = {}
        for key_id in key_ids:
            version, state = self._keys[key_id]
            if versions.get(principal_id(key_id)) == version:
                found[key_id] = state
        return found

    def put(self, key_id: str, state: KeyState) -> None:
        if len(self._keys) >= self._size:
            self._keys.clear()
        self._keys[key_id] = (state.version, state)

    def clear(self) -> None:
        self._keys.clear()

    def forget(self, principals: list[UUID]) -> None:
        gone = set(principals)
        for key_id in [k for k in self._keys if principal_id(k) in gone]:
            del self._keys[key_id]


def pending_key_state(principal: Principal) -> KeyState:
    """A key registered or revoked earlier in the group being admitted (not sequenced yet)."""
    return KeyState(
        key_id=principal.key_id,
        public_key=PublicKey.from_b64(principal.public_key),
        roles=frozenset(Role(r) for r in principal.roles),
        valid_from=parse_time(principal.valid_from),
        valid_until=parse_time(principal.valid_until) if principal.valid_until else None,
        registered_at=parse_time(principal.registered_at),
        registered_position=None,
        registered_by=principal.registered_by,
        label=principal.label,
        revoked_at=parse_time(principal.revoked_at) if principal.revoked_at else None,
        revocation_reason=principal.revocation_reason,
        version=principal.version,
        devices=principal.devices,
    )
