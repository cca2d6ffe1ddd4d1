"""Heads leaves: the heads of the log, committed by each commit as one more log leaf.

With heads leaves on, every sequencing pass that grows the tree appends, after its events'
leaves and in the same transaction, one leaf whose data is the root of the heads map
(``ledger.proofs.heads_map``) of every leaf before it: each aggregate's (events, last leaf)
and each comparison group's (members, member digest). The checkpoint the pass signs ends
with that leaf, so the tree the witnesses cosign commits to the heads of the tree before it.

A heads leaf is no event: its row in the leaves table has the negative position
``-(leaf index + 1)`` (positions of events are positive, and unique), so every query that
joins leaves to events skips it. A ledger with witnesses has them from its first commit
(``LedgerHome.open`` and ``initialise`` call ``TransparencyLog.enable_heads_leaf``); once a
ledger has one, every later pass appends one (a process learns it from the table).

The map is kept in memory by each writing process, tagged with the log head it is the map
of; a pass whose log head is another reads the leaves since that head when its last leaf is
still in the log (another process committed), else rebuilds the map from the tables (a
transaction rolled back, a database restored: one grouped query over the leaves).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any
from uuid import UUID

import msgspec
from sqlalchemy import Select, Table, bindparam, func, select

from ledger.errors import LogIntegrityError
from ledger.proofs.hasher import leaf_hash
from ledger.proofs.heads_map import (
    HeadsFold,
    HeadsState,
    MapProof,
    aggregate_key,
    group_key,
    heads_leaf_data,
)
from ledger.proofs.merkle import CompactRange
from ledger.store.driver_rows import insert_rows
from ledger.store.event_store import StoreSession
from ledger.store.log_tables import leaves, nodes

__all__ = [
    "HeadsAt",
    "HeadsLeaves",
    "HeadsReplay",
    "ScopeProofs",
    "heads_at",
    "heads_leaf_position",
    "is_heads_position",
    "scope_proofs",
]

# The topics at which a run joins its comparison group (ledger.application records it).
_JOINING = ("ledger.aggregates:Run.Ingested", "ledger.aggregates:Run.ManifestsAttached")


_LEAF_HASH = select(leaves.c.leaf_hash).where(leaves.c.leaf_index == bindparam("index"))


class _RunOf(msgspec.Struct):
    """What a joining event's stored state names: its run (the rest is not decoded)."""

    run_digest: str


@cache
def _joined_statement() -> Select[tuple[str, str, int]]:
    """Built once (building costs about what running it does)."""
    members = _group_members()
    return select(members.c.run_digest, members.c.comparison_key, members.c.position).where(
        members.c.run_digest.in_(bindparam("runs", expanding=True))
    )


def heads_leaf_position(leaf_index: int) -> int:
    return -(leaf_index + 1)


def is_heads_position(position: int) -> bool:
    return position < 0


# The heads of the log's first ``size`` leaves (the pure rule: ledger.proofs.heads_map).
HeadsAt = HeadsState


def _group_members() -> Table:
    # ledger.store.group_index imports this module's importer (ledger.store.transparency_log)
    from ledger.store.group_index import group_members  # noqa: PLC0415 - an import cycle

    return group_members


def heads_at(
    session: StoreSession, events: Table, size: int, since: HeadsAt | None = None
) -> HeadsAt:
    """Every head of the log's first ``size`` leaves, read from the tables (a rebuild, and
    what an export proves against); or ``since``, the heads of fewer of them, brought up to
    ``size`` with the leaves after it (another writer's commits)."""
    found = since or HeadsAt(0)
    start, found.size = found.size, size
    rows = session.execute(
        select(
            events.c.originator_id,
            func.max(events.c.originator_version),
            func.max(leaves.c.leaf_index),
        )
        .join(leaves, leaves.c.position == events.c.id)
        .where(leaves.c.leaf_index >= start, leaves.c.leaf_index < size)
        .group_by(events.c.originator_id)
    )
    found.set_aggregates({str(a): (int(v), int(leaf)) for a, v, leaf in rows})
    members = _group_members()
    joined = session.execute(
        select(members.c.run_digest, members.c.comparison_key)
        .join(leaves, leaves.c.position == members.c.position)
        .where(leaves.c.leaf_index >= start, leaves.c.leaf_index < size)
    ).all()
    found.join([(str(r), str(k)) for r, k in joined])
    return found


class HeadsLeaves:
    """A writing process's heads map, and the heads leaf each sequencing pass appends."""

    def __init__(self, events: Table, origin: str) -> None:
        self.events = events
        self.origin = origin
        # None until a pass learns from the table whether the log has heads leaves.
        self.enabled: bool | None = None
        self._state: HeadsAt | None = None
        self._head: tuple[int, bytes | None] | None = None  # the log head the state is of
        self._pending: tuple[HeadsAt, tuple[int, bytes | None]] | None = None

    def on(self, session: StoreSession) -> bool:
        """Whether this log's commits append heads leaves (asked of the table once)."""
        if self.enabled is None:
            found = session.execute(
                select(leaves.c.leaf_index).where(leaves.c.position < 0).limit(1)
            ).first()
            self.enabled = found is not None
        return self.enabled

    def append(
        self,
        session: StoreSession,
        before: tuple[int, bytes | None],
        logged: Sequence[tuple[Any, int, int, str, Any]],
        first_position: int,
        compact: CompactRange,
        held: dict[tuple[int, int], bytes],
    ) -> bytes:
        """Append (to ``compact`` and the tables) the heads leaf that follows the leaves
        ``logged`` in this pass (aggregate, version, leaf index, topic, state each), begun at log
        head ``before``; return its hash. ``held`` gets the tree nodes it completes."""
        state = self._state
        if state is None or self._head != before:
            state = heads_at(session, self.events, before[0], self._still_logged(session))
        self._state, self._head = None, None  # valid again only once this pass committed
        state.set_aggregates({str(a): (int(v), int(leaf)) for a, v, leaf, *_ in logged})
        runs = [
            msgspec.json.decode(stored, type=_RunOf).run_digest
            for *_, topic, stored in logged
            if topic in _JOINING
        ]
        if runs:
            # The runs that joined a group at this pass's events (by primary key).
            joined = session.execute(_joined_statement(), {"runs": runs}).all()
            state.join([(str(r), str(k)) for r, k, p in joined if int(p) >= first_position])
        index = before[0] + len(logged)
        state.size = index
        digest = leaf_hash(heads_leaf_data(self.origin, index, state.map.root()))
        # Through the driver (ledger.store.driver_rows), as the pass's other leaves: a Core
        # insert through the session cost several times the row's own work, twice a commit.
        row = (index, heads_leaf_position(index), digest)
        insert_rows(session, leaves.name, ("leaf_index", "position", "leaf_hash"), [row])
        assert compact.size == index, "the heads leaf follows the pass's leaves"
        created = compact.append(digest)
        if created:
            rows = [(n.level, n.index, n.hash) for n in created]
            insert_rows(session, nodes.name, ("level", "idx", "hash"), rows)
            held.update({(n.level, n.index): n.hash for n in created})
        self._pending = (state, (index + 1, digest))
        return digest

    def _still_logged(self, session: StoreSession) -> HeadsAt | None:
        """The map this process last committed, if the log still ends its tree where it did
        (then only the leaves since are read): else None, and the map is rebuilt."""
        if self._state is None or self._head is None or self._head[1] is None:
            return None
        size, digest = self._head
        found = session.execute(_LEAF_HASH, {"index": size - 1}).scalar()
        return self._state if found is not None and bytes(found) == digest else None

    def committed(self) -> None:
        """The pass that made the last heads leaf committed: its map is the log's now."""
        if self._pending is not None:
            self._state, self._head = self._pending
            self._pending = None


@dataclass(frozen=True)
class ScopeProofs:
    """A scoped bundle's map proofs: the heads leaf ending its tree, and one proof a name."""

    leaf_index: int  # the heads leaf: the tree's last (its data names this size)
    root: bytes  # the map root it commits to
    runs: dict[str, MapProof]
    keys: dict[str, MapProof]
    groups: dict[str, MapProof]


def scope_proofs(
    session: StoreSession,
    events: Table,
    origin: str,
    size: int,
    names: tuple[Iterable[UUID], Iterable[UUID], Iterable[str]],
    ids: tuple[dict[UUID, str], dict[UUID, str]],
) -> ScopeProofs | None:
    """Map proofs of these runs', keys' (by aggregate) and groups' heads in the tree of
    ``size`` leaves, when its last leaf is a heads leaf (else None: a size inside a commit,
    or before heads leaves). Fails closed when the stored leaf is not the map's."""
    if size == 0:
        return None
    last = session.execute(
        select(leaves.c.position, leaves.c.leaf_hash).where(leaves.c.leaf_index == size - 1)
    ).first()
    if last is None or not is_heads_position(int(last[0])):
        return None
    state = heads_at(session, events, size - 1)
    root = state.map.root()
    if leaf_hash(heads_leaf_data(origin, size - 1, root)) != bytes(last[1]):
        raise LogIntegrityError(f"the heads leaf {size - 1} is not the map of the leaves before it")
    run_ids, key_ids = ids
    runs, keys, groups = names
    return ScopeProofs(
        size - 1,
        root,
        {run_ids[r]: state.map.prove(aggregate_key(r)) for r in runs},
        {key_ids[k]: state.map.prove(aggregate_key(k)) for k in keys},
        {g: state.map.prove(group_key(g)) for g in groups},
    )


class HeadsReplay:
    """The heads leaves of a whole-log export, with the map roots they commit to, recomputed
    as the export streams the events in leaf order (fails closed on a leaf that is not the
    map of the leaves before it)."""

    def __init__(self, session: StoreSession, origin: str, size: int) -> None:
        self.origin = origin
        self.fold = HeadsFold()
        members = _group_members()
        self._joins = {
            int(p): (str(r), str(k))
            for p, r, k in session.execute(
                select(members.c.position, members.c.run_digest, members.c.comparison_key)
            )
        }
        self._pending = [
            (int(i), bytes(h))
            for i, h in session.execute(
                select(leaves.c.leaf_index, leaves.c.leaf_hash)
                .where(leaves.c.position < 0, leaves.c.leaf_index < size)
                .order_by(leaves.c.leaf_index)
            )
        ]
        self._next = 0

    def upcoming(self, below: int) -> list[int]:
        """The heads leaves not yet given whose index is below ``below``."""
        return [i for i, _ in self._pending[self._next :] if i < below]

    def before(self, leaf: int) -> Iterator[tuple[int, bytes]]:
        """(index, map root) of each heads leaf before ``leaf`` not yet given."""
        for index, _, root, matches in self.due(leaf):
            if not matches:
                raise LogIntegrityError(
                    f"the heads leaf {index} is not the map of the leaves before it"
                )
            yield index, root

    def due(self, leaf: int) -> Iterator[tuple[int, bytes, bytes, bool]]:
        """(index, stored hash, map root, whether the hash is that root's leaf) of each heads
        leaf before ``leaf`` not yet given (``kernelindex audit`` reports a mismatch)."""
        while self._next < len(self._pending) and self._pending[self._next][0] < leaf:
            index, digest = self._pending[self._next]
            self._next += 1
            root = self.fold.root()
            yield (
                index,
                digest,
                root,
                leaf_hash(heads_leaf_data(self.origin, index, root)) == digest,
            )

    def event(self, leaf: int, position: int, aggregate: Any, version: int) -> None:
        self.fold.event(leaf, str(aggregate), int(version))
        joined = self._joins.get(position)
        if joined is not None:
            self.fold.joined(*joined)
