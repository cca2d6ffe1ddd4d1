"""The ledger's transparency log: sequencer, stored Merkle tree, proofs and checkpoints.

Every stored event gets a dense leaf index in notification order, exactly once: the leaf row
(unique on both leaf index and event position) is its own tracking record and is written in
the same transaction as the event it sequences (or, for catch-up after a crash, in one
transaction per batch). One sequencer runs at a time, from before it reads the tree to its
commit: a transaction-scoped advisory lock on PostgreSQL, the database's write lock on SQLite.

Complete subtree hashes are stored as they are created, so roots and proofs cost O(log n)
lookups, fetched in one query. Checkpoints are C2SP signed notes; the size is the primary key
of the checkpoint table, so the ledger can never sign two roots for one size.
"""

from __future__ import annotations

import base64
import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import (
    BigInteger,
    Column,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    Table,
    Text,
    and_,
    bindparam,
    func,
    or_,
    select,
    text,
)

from domain.errors import DomainError
from domain.timestamps import format_time, utc_now
from ledger.errors import ReadOnlyStoreError, StoreFullError, store_error
from ledger.proofs.log_entries import LogEntry
from ledger.proofs.merkle import (
    CompactRange,
    consistency_proof_from_nodes,
    inclusion_proof_from_nodes,
    root_from_nodes,
)
from ledger.proofs.signed_note import Verifier, format_checkpoint, sign_note
from ledger.signing.keys import PublicKey, SigningKey
from ledger.store.event_store import EventStore, StoreSession, hold_sqlite_write_lock
from ledger.timing import Stage, timed

T = TypeVar("T")
_ADVISORY_LOCK_ID = 0x4B49_4C4F_47  # "KILOG"
_SEQUENCE_BATCH = 1000
_ZERO = b"\x00" * 32

metadata = MetaData()
leaves = Table(
    "kernelindex_log_leaves",
    metadata,
    Column("leaf_index", BigInteger().with_variant(Integer(), "sqlite"), primary_key=True),
    Column("position", BigInteger, nullable=False, unique=True),
    Column("leaf_hash", LargeBinary, nullable=False),
)
nodes = Table(
    "kernelindex_log_nodes",
    metadata,
    Column("level", SmallInteger, primary_key=True),
    Column("idx", BigInteger, primary_key=True),
    Column("hash", LargeBinary, nullable=False),
)
checkpoints = Table(
    "kernelindex_log_checkpoints",
    metadata,
    Column("size", BigInteger, primary_key=True),
    Column("root", LargeBinary, nullable=False),
    Column("note", Text, nullable=False),
    Column("signed_at", Text, nullable=False),
)


# Statements every write runs, built once (building one costs about what running it does).
_LAST_LEAF = (
    select(leaves.c.leaf_index, leaves.c.position, leaves.c.leaf_hash)
    .order_by(leaves.c.leaf_index.desc())
    .limit(1)
)
_LEAF_HASH = select(leaves.c.leaf_hash).where(leaves.c.leaf_index == bindparam("index"))
# A log's head as a process saw it: its size and its last leaf's hash (None when empty).
LogHead = tuple[int, bytes | None]
_INSERT_LEAVES = leaves.insert()
_INSERT_NODES = nodes.insert()


class LogWatch:
    """The newest head of the log a cache was filled under. Version numbers and tree sizes
    come back under other content when the database goes back (a backup restored, a
    failover to a standby that lacked the last commits), so whatever a process caches by
    them asks this first, and is dropped when the log no longer holds what it had seen.
    ``generation`` counts the times it went back: a cache filled by a reader that started
    before one must not keep what it read (another reader may have dropped it meanwhile)."""

    def __init__(self, tlog: TransparencyLog) -> None:
        self._tlog = tlog
        self.seen: LogHead = (0, None)
        self.generation = 0
        self._lock = threading.Lock()

    def still_holds(self, session: StoreSession) -> bool:
        """Whether the log, read now in ``session``, still holds the newest head seen; the
        head read becomes the one seen. One primary-key lookup (two if it grew)."""
        seen = self.seen
        now = self._tlog.head(session)
        holds = self._tlog.extends(session, now, seen)
        with self._lock:
            if not holds:
                self.generation += 1
            # Threads may race: the larger head wins unless the log went back.
            if not holds or now[0] >= self.seen[0]:
                self.seen = now
        return holds

    def committed(self, head: LogHead) -> None:
        """This process committed the log up to ``head``: it is the newest seen."""
        with self._lock:
            self.seen = head


class LogIntegrityError(DomainError):
    """The stored log disagrees with itself; the ledger stops rather than sign over it."""

    code = "log-integrity"
    status = 500


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
class SignedCheckpoint:
    size: int
    root: bytes
    note: str
    signed_at: str


NodeKey = tuple[int, int]  # (level, index)
# An event row as stored: position, originator id, version, topic, state bytes.
StoredRow = tuple[int, Any, int, str, bytes] | Sequence[Any]


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


class _NotHeldError(LookupError):
    """A node the nodes held do not include (the caller reads it from the table)."""


def _held_node(held: dict[NodeKey, bytes], level: int, index: int) -> bytes:
    found = held.get((level, index))
    if found is None:
        raise _NotHeldError
    return found


def _with_prefetch(
    session: StoreSession,
    compute: Callable[[Callable[[int, int], bytes]], T],
    known: dict[NodeKey, bytes] | None = None,
) -> T:
    """Run a proof/root computation with all its node lookups fetched in one query (none for
    the nodes in ``known``: those this transaction wrote).

    The computations choose which nodes to read from sizes and indices only, never from hash
    values, so a dry run with placeholder hashes names exactly the nodes needed.
    """
    held = known or {}
    if held:
        # Most often (a group's receipts) the nodes held are all it needs: compute once.
        try:
            return compute(functools.partial(_held_node, held))
        except _NotHeldError:
            pass
    wanted: list[tuple[int, int]] = []

    def record(level: int, index: int) -> bytes:
        if (level, index) not in held:
            wanted.append((level, index))
        return _ZERO

    compute(record)
    found: dict[tuple[int, int], bytes] = dict(held)
    if wanted:
        by_level: dict[int, set[int]] = {}
        for level, index in wanted:
            by_level.setdefault(level, set()).add(index)
        # One equality-plus-IN term per level: both SQLite and PostgreSQL answer it from the
        # primary key. A row-value IN ((level, idx), ...) made SQLite scan the whole node
        # table, so every append cost O(n) instead of O(log n).
        rows = session.execute(
            select(nodes.c.level, nodes.c.idx, nodes.c.hash).where(
                or_(
                    *(
                        and_(nodes.c.level == level, nodes.c.idx.in_(sorted(indices)))
                        for level, indices in sorted(by_level.items())
                    )
                )
            )
        )
        found.update({(r[0], r[1]): bytes(r[2]) for r in rows})

    def lookup(level: int, index: int) -> bytes:
        try:
            return found[(level, index)]
        except KeyError:
            raise LogIntegrityError(f"stored tree node ({level}, {index}) is missing") from None

    return compute(lookup)


class TransparencyLog:
    def __init__(
        self,
        store: EventStore,
        origin: str,
        log_public_key: PublicKey,
        log_key: SigningKey | None = None,
    ) -> None:
        self.store = store
        self.origin = origin
        self.log_public_key = log_public_key
        self.log_key = log_key
        self._events = store.events.c
        self._compact: CompactRange | None = None
        self._compact_head: LogHead = (0, None)

    # ---------------------------------------------------------------- writing

    def lock(self, session: StoreSession) -> None:
        """Serialise sequencers, before they read the tree, to the end of the transaction:
        PostgreSQL's advisory lock; SQLite's write lock (the database's only lock). Without
        it, two sequencers (a catch-up beside the writer) read the same tree size and the
        second fails on the first one's leaves."""
        if self.store.postgres:
            session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _ADVISORY_LOCK_ID})
        elif self.store.engine.dialect.name == "sqlite":
            hold_sqlite_write_lock(session)

    def tree_size(self, session: StoreSession) -> int:
        last = session.execute(select(func.max(leaves.c.leaf_index))).scalar()
        return 0 if last is None else int(last) + 1

    def _last_leaf(self, session: StoreSession) -> tuple[LogHead, int]:
        """The log's head and the position of its last leaf (0 for an empty log), in one
        primary-key lookup: leaves and positions run in the same order."""
        last = session.execute(_LAST_LEAF).first()
        if last is None:
            return (0, None), 0
        return (int(last[0]) + 1, bytes(last[2])), int(last[1])

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
        return _with_prefetch(session, lambda get: CompactRange.from_nodes(size, get))

    @timed(Stage.SEQUENCE)
    def sequence(
        self, session: StoreSession, written: Sequence[StoredRow] | None = None
    ) -> Sequenced:
        """Give every not-yet-sequenced event a leaf, in position order (caller commits).

        ``written``: the rows this transaction has just stored, as stored (position order).
        When they are exactly the events after the last leaf (an id-only query says so),
        their leaves are made from these bytes instead of reading the rows back; otherwise
        (events another writer stored unsequenced, a crash's leftovers) everything pending
        is read from the table."""
        self.lock(session)
        head, last_position = self._last_leaf(session)
        compact = self._compact_range(session, head)
        held = {(n.level, n.index): n.hash for n in compact.nodes()}
        leaf_of: dict[int, int] = {}
        added = 0
        if written and self._only_pending(session, last_position, written):
            last = self._add_leaves(session, written, compact, held, leaf_of)
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
            head = (head[0] + len(rows), self._add_leaves(session, rows, compact, held, leaf_of))
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

    @staticmethod
    def _add_leaves(
        session: StoreSession,
        rows: Sequence[StoredRow],
        compact: CompactRange,
        held: dict[NodeKey, bytes],
        leaf_of: dict[int, int],
    ) -> bytes:
        """Append the leaves of ``rows`` (in position order) and store them and the nodes
        they complete; return the last leaf's hash."""
        leaf_rows: list[dict[str, Any]] = []
        node_rows: list[dict[str, Any]] = []
        for position, aggregate, version, topic, state in rows:
            entry = LogEntry.from_stored(
                int(position), str(aggregate), int(version), str(topic), bytes(state)
            )
            digest = entry.leaf_hash()
            leaf_rows.append(
                {"leaf_index": compact.size, "position": int(position), "leaf_hash": digest}
            )
            leaf_of[int(position)] = compact.size
            for n in compact.append(digest):
                node_rows.append({"level": n.level, "idx": n.index, "hash": n.hash})
                held[(n.level, n.index)] = n.hash
        session.execute(_INSERT_LEAVES, leaf_rows)
        if node_rows:
            session.execute(_INSERT_NODES, node_rows)
        return bytes(leaf_rows[-1]["leaf_hash"])

    def committed(self, result: Sequenced) -> None:
        """Keep the compact range for the next append (only once its transaction committed)."""
        self._compact, self._compact_head = result.compact, result.head

    def catch_up(self) -> int:
        """Sequence whatever is pending (after a crash, or events from another writer)."""
        with self.store.transaction(commit=True) as session:
            result = self.sequence(session)
        self.committed(result)
        return result.new_leaves

    # ---------------------------------------------------------------- reading

    def size_at_position(self, session: StoreSession, position: int) -> int:
        """How many leaves log events at or before ``position`` (positions and leaves run in
        the same order)."""
        last = session.execute(
            select(func.max(leaves.c.leaf_index)).where(leaves.c.position <= position)
        ).scalar()
        return 0 if last is None else int(last) + 1

    def leaves_for_positions(
        self, session: StoreSession, positions: Sequence[int]
    ) -> dict[int, int]:
        """Position → leaf index of these events (those sequenced), in one query a chunk."""
        found: dict[int, int] = {}
        ordered = sorted(set(positions))
        for start in range(0, len(ordered), 500):
            rows = session.execute(
                select(leaves.c.position, leaves.c.leaf_index).where(
                    leaves.c.position.in_(ordered[start : start + 500])
                )
            )
            found.update({int(r[0]): int(r[1]) for r in rows})
        return found

    def leaf_for_position(self, session: StoreSession, position: int) -> int | None:
        value = session.execute(
            select(leaves.c.leaf_index).where(leaves.c.position == position)
        ).scalar()
        return None if value is None else int(value)

    def root(self, session: StoreSession, size: int) -> bytes:
        return _with_prefetch(session, lambda get: root_from_nodes(size, get))

    def proof_hashes(self, session: StoreSession, leaf_index: int, size: int) -> list[bytes]:
        return _with_prefetch(
            session, lambda get: inclusion_proof_from_nodes(leaf_index, size, get)
        )

    def proofs(
        self, session: StoreSession, leaf_indices: Sequence[int], size: int
    ) -> dict[int, list[bytes]]:
        """Inclusion proofs of these leaves in the tree of ``size``, with one node query for
        all of them (an export's batch)."""
        wanted = sorted(set(leaf_indices))
        return _with_prefetch(
            session,
            lambda get: {leaf: inclusion_proof_from_nodes(leaf, size, get) for leaf in wanted},
        )

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
            return root_from_nodes(size, get), {
                p: inclusion_proof_from_nodes(leaf, size, get) for p, leaf in leaf_of.items()
            }

        held = sequenced.nodes if sequenced is not None else None
        root, proofs = _with_prefetch(session, compute, held)
        return {p: InclusionProof(leaf_of[p], size, root, tuple(h)) for p, h in proofs.items()}

    def consistency(self, session: StoreSession, size1: int, size2: int) -> list[bytes]:
        return _with_prefetch(session, lambda get: consistency_proof_from_nodes(size1, size2, get))

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

    def sign_checkpoint(self, size: int | None = None) -> SignedCheckpoint:
        """Sign (or return the already signed) checkpoint for the current tree size, or for
        an earlier ``size`` (a tree of that size has one root forever, so this never makes
        two roots for one size).

        Reads first, without the log's lock: a checkpoint already signed (the common case for
        readers and exports) costs no write and never waits for writers. A new one is stored
        under the lock; on a store that refuses writes (read-only, full) it is returned
        unstored — Ed25519 is deterministic, so it is the very note storing would keep."""
        if self.log_key is None:
            raise NoLogKeyError("signing a checkpoint needs the log key (keys/log.pem)")
        with self.store.transaction(commit=False) as session:
            current = self.tree_size(session)
            if size is None:
                size = current
            elif not 0 <= size <= current:
                raise LogIntegrityError(f"tree size {size} is beyond the log's {current} leaves")
            root = self.root(session, size)
            existing = self._stored_checkpoint(session, size, root)
        if existing is not None:
            return existing
        body = format_checkpoint(self.origin, size, root)
        note = sign_note(body, self.origin, self.log_key.private_key())
        signed_at = format_time(utc_now())
        try:
            with self.store.transaction(commit=True) as session:
                self.lock(session)
                existing = self._stored_checkpoint(session, size, root)
                if existing is not None:  # signed meanwhile by another process
                    return existing
                session.execute(
                    checkpoints.insert().values(
                        size=size, root=root, note=note, signed_at=signed_at
                    )
                )
        except Exception as exc:
            if not isinstance(store_error(exc), ReadOnlyStoreError | StoreFullError):
                raise
        return SignedCheckpoint(size, root, note, signed_at)

    @staticmethod
    def _stored_checkpoint(
        session: StoreSession, size: int, root: bytes
    ) -> SignedCheckpoint | None:
        existing = session.execute(select(checkpoints).where(checkpoints.c.size == size)).first()
        if existing is None:
            return None
        if bytes(existing.root) != root:
            raise LogIntegrityError(f"the tree of size {size} no longer has the root signed for it")
        return SignedCheckpoint(size, root, existing.note, existing.signed_at)

    def checkpoints(self, session: StoreSession) -> list[SignedCheckpoint]:
        rows = session.execute(select(checkpoints).order_by(checkpoints.c.size)).all()
        return [SignedCheckpoint(int(r.size), bytes(r.root), r.note, r.signed_at) for r in rows]
