"""The ledger's transparency log: sequencer, stored Merkle tree, proofs and checkpoints.

Every stored event gets a dense leaf index in notification order, exactly once: the leaf row
(unique on both leaf index and event position) is its own tracking record and is written in
the same transaction as the event it sequences (or, for catch-up after a crash, in one
transaction per batch). One sequencer runs at a time, from before it reads the tree to its
commit: a transaction-scoped advisory lock on PostgreSQL, the database's write lock on SQLite.

Complete subtree hashes are stored as they are created, so roots and proofs cost O(log n)
lookups, fetched in one query. A pass that grows the tree signs a checkpoint of the new tree in
its own transaction (``signed_checkpoints``), so every size the log is ever seen at has one,
and reading a checkpoint writes nothing.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import bindparam, func, select

from domain.errors import DomainError
from ledger.errors import LogIntegrityError, ReadOnlyStoreError, StoreFullError, store_error
from ledger.proofs.merkle import (
    CompactRange,
    consistency_proof_from_nodes,
    inclusion_proof_from_nodes,
    inclusion_proofs_from_nodes,
    root_from_nodes,
)
from ledger.proofs.signed_note import Verifier
from ledger.signing.keys import PublicKey, SigningKey
from ledger.signing.log_key import DeferredKey
from ledger.store import signed_checkpoints
from ledger.store.driver_rows import select_rows
from ledger.store.event_store import (
    EventStore,
    StoreSession,
    connection_of,
    hold_sqlite_write_lock,
)
from ledger.store.heads_leaves import HeadsLeaves, is_heads_position
from ledger.store.log_leaves import NO_PARSED, Parsed, StoredRow, add_leaves
from ledger.store.log_tables import checkpoints, leaves, metadata, nodes
from ledger.store.log_watch import LogHead
from ledger.store.read_door import SessionRows
from ledger.store.signed_checkpoints import SignedCheckpoint
from ledger.store.stored_events import leaf_indices
from ledger.store.tree_nodes import NodeKey, with_prefetch
from ledger.timing import Stage, timed

# The tables live in ``log_tables``; they are named here too, where callers look for them.
__all__ = [
    "InclusionProof",
    "NoLogKeyError",
    "Sequenced",
    "SignedCheckpoint",
    "TransparencyLog",
    "checkpoints",
    "leaves",
    "metadata",
    "nodes",
]

_ADVISORY_LOCK_ID = 0x4B49_4C4F_47  # "KILOG"
_SEQUENCE_BATCH = 1000
_ADVISORY_LOCK = f"SELECT pg_advisory_xact_lock({_ADVISORY_LOCK_ID})"


# Statements every write runs, built once (building one costs about what running it does).
# Through the driver (``select_rows``), twice a group (the writer's watch, then under the
# sequencers' lock): a Core select cost ~10x the driver's own work for two rows (issue 36).
# Two: a heads leaf ends each commit, and the leaf before it is an event's.
_LAST_LEAF = (
    f"SELECT leaf_index, position, leaf_hash FROM {leaves.name} "  # noqa: S608 - our constant
    "ORDER BY leaf_index DESC LIMIT 2"
)
# Every proof read asks it first (the API's proofs, a receipt of a duplicate).
_TREE_SIZE = f"SELECT max(leaf_index) FROM {leaves.name}"  # noqa: S608 - our constant
_LEAF_HASH = select(leaves.c.leaf_hash).where(leaves.c.leaf_index == bindparam("index"))
_POSITION_OF = select(leaves.c.position).where(leaves.c.leaf_index == bindparam("index"))


class NoLogKeyError(DomainError):
    code = "no-log-key"
    status = 503


@dataclass(frozen=True)
class InclusionProof:
    leaf_index: int
    tree_size: int
    root: bytes
    hashes: tuple[bytes, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "leafIndex": self.leaf_index,
            "treeSize": self.tree_size,
            "rootHash": base64.b64encode(self.root).decode(),
            "hashes": [base64.b64encode(h).decode() for h in self.hashes],
        }


@dataclass(frozen=True)
class Sequenced:
    """What one sequencing pass did; the compact range is trusted only after commit.

    ``nodes`` are the tree nodes the pass held or wrote (the compact range it started from
    and every node it created) and ``leaf_of`` each new leaf's index by event position: the
    same transaction's receipts take their proofs from them instead of reading them back."""

    compact: CompactRange
    new_leaves: int
    nodes: dict[NodeKey, bytes] = field(default_factory=dict)
    leaf_of: dict[int, int] = field(default_factory=dict)
    head: LogHead = (0, None)  # the compact range's: its size and last leaf


class TransparencyLog:
    def __init__(
        self,
        store: EventStore,
        origin: str,
        log_public_key: PublicKey,
        log_key: SigningKey | DeferredKey | None = None,
    ) -> None:
        self.store = store
        self.origin = origin
        self.log_public_key = log_public_key
        self._log_key = log_key
        self._events = store.events.c
        self._compact: CompactRange | None = None
        self._compact_head: LogHead = (0, None)
        self._heads = HeadsLeaves(store.events, origin)  # ledger.store.heads_leaves
        self._pass_start: LogHead = (0, None)
        self._logged: list[tuple[Any, int, int, str, Any]] = []

    @property
    def can_sign(self) -> bool:
        """Whether this log holds its key (in hand or in a file read on first use)."""
        return self._log_key is not None

    def enable_heads_leaf(self) -> None:
        """Append a heads leaf to every commit from now on (``ledger.store.heads_leaves``)."""
        self._heads.enabled = True

    # ---------------------------------------------------------------- writing

    def lock(self, session: StoreSession) -> None:
        """Serialise sequencers, before they read the tree, to the end of the transaction:
        PostgreSQL's advisory lock; SQLite's write lock (the database's only lock). Without
        it, two sequencers (a catch-up beside the writer) read the same tree size and the
        second fails on the first one's leaves."""
        if self.store.postgres:
            # Through the driver: a text() through the ORM session cost ~2x its client CPU.
            connection_of(session).exec_driver_sql(_ADVISORY_LOCK)
        elif self.store.engine.dialect.name == "sqlite":
            hold_sqlite_write_lock(session)

    def tree_size(self, session: StoreSession) -> int:
        last = select_rows(session, _TREE_SIZE)[0][0]
        return 0 if last is None else int(last) + 1

    def _last_leaf(self, session: StoreSession) -> tuple[LogHead, int]:
        """The log's head and the position of its last event's leaf (0 for an empty log), in
        one primary-key lookup: leaves and positions run in the same order, and a heads leaf
        (``ledger.store.heads_leaves``) follows its commit's events."""
        rows = select_rows(session, _LAST_LEAF)
        if not rows:
            return (0, None), 0
        last = rows[0]
        position = int(last[1])
        if is_heads_position(position):
            position = int(rows[1][1]) if len(rows) > 1 else 0
        return (int(last[0]) + 1, bytes(last[2])), position

    def head(self, session: StoreSession) -> LogHead:
        """The log's size and its last leaf's hash, as stored now."""
        return self._last_leaf(session)[0]

    def extends(self, session: StoreSession, now: LogHead, seen: LogHead) -> bool:
        """Whether the log whose head is ``now`` still holds what a head ``seen`` earlier
        held: not shorter, and the same leaf where that head ended. A database restored
        from a backup, or failed over to a standby that lacked the last commits, does not,
        and whatever was cached from it is stale (version numbers alone can come back)."""
        size, last = seen
        if size == 0:
            return True
        if now[0] < size:
            return False
        if now[0] == size:
            return now[1] == last
        found = session.execute(_LEAF_HASH, {"index": size - 1}).scalar()
        return found is not None and bytes(found) == last

    def _compact_range(self, session: StoreSession, head: LogHead) -> CompactRange:
        # The cached state is the stored tree's only if the stored head is the one it ended
        # at: a size alone can come back with other leaves (a database restored under us).
        if self._compact is not None and self._compact_head == head:
            return self._compact.copy()
        size = head[0]
        return with_prefetch(session, lambda get: CompactRange.from_nodes(size, get))

    @timed(Stage.SEQUENCE)
    def sequence(
        self,
        session: StoreSession,
        written: Sequence[StoredRow] | None = None,
        parsed: Parsed = NO_PARSED,
    ) -> Sequenced:
        """Give every not-yet-sequenced event a leaf, in position order, and sign the tree
        that makes (caller commits).

        ``written``: the rows this transaction has just stored, as stored (position order).
        When they are exactly the events after the last leaf (an id-only query says so),
        their leaves are made from these bytes instead of reading the rows back; otherwise
        (events another writer stored unsequenced, a crash's leftovers) everything pending
        is read from the table. ``parsed``: the envelopes of ``written`` as admission
        parsed them, by position (``log_leaves.entry_data``)."""
        self.lock(session)
        result = self._add_pending(session, written, parsed)
        if result.new_leaves and self._heads.on(session):
            result = self._add_heads_leaf(session, result)
        self._sign_grown(session, result)
        return result

    def _add_heads_leaf(self, session: StoreSession, result: Sequenced) -> Sequenced:
        """The pass's heads leaf, after its events' leaves (ledger.store.heads_leaves)."""
        first = min(result.leaf_of) if result.leaf_of else 0
        digest = self._heads.append(
            session, self._pass_start, self._logged, first, result.compact, result.nodes
        )
        return dataclasses.replace(
            result, new_leaves=result.new_leaves + 1, head=(result.compact.size, digest)
        )

    def _sign_grown(self, session: StoreSession, result: Sequenced) -> None:
        """Store the checkpoint of the tree this pass grew, in the pass's transaction: the
        new size is never visible without its checkpoint, so a read of one never has to
        sign (or write). One signature a commit, however many events it carries. A ledger
        opened without the log key signs nothing (a read then signs, unstored)."""
        if result.new_leaves and self.can_sign:
            size, root = result.compact.size, result.compact.root()
            signed = signed_checkpoints.sign(self.origin, self.signing_key(), size, root)
            signed_checkpoints.store_unless_signed(session, signed)

    def _add_pending(
        self, session: StoreSession, written: Sequence[StoredRow] | None, parsed: Parsed
    ) -> Sequenced:
        """``sequence``'s leaves and nodes, under the sequencers' lock."""
        head, last_position = self._last_leaf(session)
        self._pass_start, self._logged = head, []
        compact = self._compact_range(session, head)
        held = {(n.level, n.index): n.hash for n in compact.nodes()}
        leaf_of: dict[int, int] = {}
        added = 0
        if written and self._only_pending(session, last_position, written):
            last = add_leaves(session, written, compact, held, leaf_of, self._logged, parsed)
            return Sequenced(compact, len(written), held, leaf_of, (compact.size, last))
        while True:
            rows = session.execute(
                select(
                    self._events.id,
                    self._events.originator_id,
                    self._events.originator_version,
                    self._events.topic,
                    self._events.state,
                )
                .where(self._events.id > last_position)
                .order_by(self._events.id)
                .limit(_SEQUENCE_BATCH)
            ).all()
            if not rows:
                break
            last = add_leaves(session, rows, compact, held, leaf_of, self._logged)
            head = (head[0] + len(rows), last)
            added += len(rows)
            last_position = int(rows[-1][0])
            if len(rows) < _SEQUENCE_BATCH:
                break  # a short batch was the last: no query to learn that nothing follows
        return Sequenced(compact, added, held, leaf_of, head)

    def _only_pending(
        self, session: StoreSession, last_position: int, written: Sequence[StoredRow]
    ) -> bool:
        """Whether the events after the last leaf are exactly ``written`` (by position).

        No query when the positions written follow the last leaf's without a gap: no other
        event can lie between them, and none after them (this transaction holds the event
        table's write lock, under which every position is given). A gap (PostgreSQL's
        sequence skips the ids of rolled-back inserts; events stored unsequenced) is looked
        at in the table."""
        positions = [int(row[0]) for row in written]
        if positions == list(range(last_position + 1, last_position + 1 + len(positions))):
            return True
        pending = session.execute(
            select(self._events.id)
            .where(self._events.id > last_position)
            .order_by(self._events.id)
            .limit(len(written) + 1)
        ).scalars()
        return [int(p) for p in pending] == positions

    def committed(self, result: Sequenced) -> None:
        """Keep the compact range for the next append (only once its transaction committed)."""
        self._compact, self._compact_head = result.compact, result.head
        self._heads.committed()

    def catch_up(self) -> int:
        """Sequence whatever is pending (after a crash, or events from another writer)."""
        with self.store.transaction(commit=True) as session:
            result = self.sequence(session)
        self.committed(result)
        return result.new_leaves

    # ---------------------------------------------------------------- reading

    def size_at_position(self, session: StoreSession, position: int) -> int:
        """How many leaves log events at or before ``position`` (positions and leaves run in
        the same order), and the heads leaf that ends their commit, if it follows."""
        last = session.execute(
            select(func.max(leaves.c.leaf_index)).where(
                leaves.c.position <= position, leaves.c.position >= 0
            )
        ).scalar()
        if last is None:
            return 0
        after = session.execute(_POSITION_OF, {"index": int(last) + 1}).scalar()
        return int(last) + (2 if after is not None and is_heads_position(int(after)) else 1)

    def leaves_for_positions(
        self, session: StoreSession, positions: Sequence[int]
    ) -> dict[int, int]:
        """Position → leaf index of these events (those sequenced), in one query a chunk."""
        return leaf_indices(SessionRows(connection_of(session)), positions)

    def leaf_for_position(self, session: StoreSession, position: int) -> int | None:
        value = session.execute(
            select(leaves.c.leaf_index).where(leaves.c.position == position)
        ).scalar()
        return None if value is None else int(value)

    def root(self, session: StoreSession, size: int) -> bytes:
        return with_prefetch(session, lambda get: root_from_nodes(size, get))

    def proof_hashes(self, session: StoreSession, leaf_index: int, size: int) -> list[bytes]:
        return with_prefetch(session, lambda get: inclusion_proof_from_nodes(leaf_index, size, get))

    def proofs(
        self, session: StoreSession, leaf_indices: Sequence[int], size: int
    ) -> dict[int, list[bytes]]:
        """Inclusion proofs of these leaves in the tree of ``size``, with one node query for
        all of them (an export's batch)."""
        wanted = sorted(set(leaf_indices))
        return with_prefetch(session, lambda get: inclusion_proofs_from_nodes(wanted, size, get))

    def inclusion(self, session: StoreSession, leaf_index: int, size: int) -> InclusionProof:
        proof = self.proof_hashes(session, leaf_index, size)
        return InclusionProof(leaf_index, size, self.root(session, size), tuple(proof))

    @timed(Stage.PROOF)
    def inclusions(
        self,
        session: StoreSession,
        positions: Sequence[int],
        size: int,
        sequenced: Sequenced | None = None,
    ) -> dict[int, InclusionProof]:
        """Inclusion proofs of the leaves logging these event positions, with one root and one
        node query for all of them (a committed group's receipts). With the ``sequenced``
        pass that logged them, in the same transaction, its leaves and nodes are used as they
        were written, and only what it did not hold is read (nothing, for its own leaves)."""
        written = sequenced.leaf_of if sequenced is not None else {}
        leaf_of = {p: written[p] for p in positions if p in written}
        unwritten = [p for p in positions if p not in written]
        if unwritten:
            leaf_of.update(self.leaves_for_positions(session, unwritten))
        missing = sorted(set(positions) - set(leaf_of))
        if missing:
            raise LogIntegrityError(f"events {missing[:5]} were not sequenced")

        def compute(get: Callable[[int, int], bytes]) -> tuple[bytes, dict[int, list[bytes]]]:
            return root_from_nodes(size, get), inclusion_proofs_from_nodes(
                leaf_of.values(), size, get
            )

        held = sequenced.nodes if sequenced is not None else None
        root, proofs = with_prefetch(session, compute, held)
        return {p: InclusionProof(i, size, root, tuple(proofs[i])) for p, i in leaf_of.items()}

    def consistency(self, session: StoreSession, size1: int, size2: int) -> list[bytes]:
        return with_prefetch(session, lambda get: consistency_proof_from_nodes(size1, size2, get))

    def entries(self, session: StoreSession, start: int, end: int) -> Sequence[Any]:
        """Leaves ``[start, end)`` with their event positions and hashes."""
        return session.execute(
            select(leaves.c.leaf_index, leaves.c.position, leaves.c.leaf_hash)
            .where(leaves.c.leaf_index >= start, leaves.c.leaf_index < end)
            .order_by(leaves.c.leaf_index)
        ).all()

    # ------------------------------------------------------------ checkpoints

    @property
    def verifier(self) -> Verifier:
        return Verifier.from_public_key(self.origin, self.log_public_key.raw)

    def signing_key(self) -> SigningKey:
        """The log key, or refuse: what is signed now (a checkpoint, heads) needs it."""
        key = self._log_key
        if key is None:
            raise NoLogKeyError("signing a checkpoint needs the log key (keys/log.pem)")
        return key.get() if isinstance(key, DeferredKey) else key

    def _size_and_root(self, session: StoreSession, size: int | None) -> tuple[int, bytes]:
        current = self.tree_size(session)
        if size is None:
            size = current
        elif not 0 <= size <= current:
            raise LogIntegrityError(f"tree size {size} is beyond the log's {current} leaves")
        return size, self.root(session, size)

    def checkpoint(self, size: int | None = None) -> SignedCheckpoint:
        """The signed checkpoint of the current tree, or of an earlier ``size``: read, never
        written (one read-only transaction).

        Every size a commit left the tree at was signed in that commit (``sequence``). A
        size without a stored checkpoint (an empty log, a size inside a commit, a tree grown
        by a writer without the log key or by an older build) is signed here and returned
        unstored: Ed25519 is deterministic, so it is the very note storing would keep; only
        ``signed_at`` is this read's."""
        with self.store.transaction(commit=False) as session:
            size, root = self._size_and_root(session, size)
            existing = signed_checkpoints.stored(session, size, root)
        if existing is not None:
            return existing
        return signed_checkpoints.sign(self.origin, self.signing_key(), size, root)

    def sign_checkpoint(self, size: int | None = None) -> SignedCheckpoint:
        """``checkpoint``, and store it if it was not: for a process that writes (the
        sequencer, signing a tree grown by writers without the log key).

        Reads first, without the log's lock: a checkpoint already signed (the common case)
        costs no write and never waits for writers. A new one is stored under the lock; on a
        store that refuses writes (read-only, full) it is returned unstored."""
        key = self.signing_key()
        with self.store.transaction(commit=False) as session:
            size, root = self._size_and_root(session, size)
            existing = signed_checkpoints.stored(session, size, root)
        if existing is not None:
            return existing
        signed = signed_checkpoints.sign(self.origin, key, size, root)
        try:
            with self.store.transaction(commit=True) as session:
                self.lock(session)
                existing = signed_checkpoints.stored(session, size, root)
                if existing is not None:  # signed meanwhile by another process
                    return existing
                signed_checkpoints.store(session, signed)
        except Exception as exc:
            if not isinstance(store_error(exc), ReadOnlyStoreError | StoreFullError):
                raise
        return signed

    @staticmethod
    def checkpoints(session: StoreSession) -> list[SignedCheckpoint]:
        return signed_checkpoints.stored_all(session)
