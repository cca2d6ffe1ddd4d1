"""The heads map: a verifiable map from each aggregate and comparison group to its head.

What a scoped bundle's completeness rests on (how many events a run or key has, the leaf of
its last; how many members a group has, and which) is committed, at every commit, as the root
of this map in a log leaf (``heads_leaf_data``): witnesses cosign the tree that holds it, so
two heads for one checkpoint need two trees of one size, a split view.

A sparse Merkle tree over 256-bit keys (SHA-256 of the name), with shortcut leaves: a subtree
holding no key is 32 zero bytes, one holding one key is that key's leaf hash, one holding more
is the RFC 6962 node hash of its two halves (split on the next bit of the key). A key's place
is fixed by its bits, and leaf and node hashes are domain separated, so a root opens to one
value per key (else SHA-256 collides); a key that is absent is shown so by the empty subtree
or the other key's leaf where its path ends. A proof is the sibling hashes from the root down
to the key's subtree: about log2(keys) of them.

Pure: no storage. ``HeadsMap`` keeps node hashes of the subtrees it has computed, so a commit
that changes k heads costs about k·log2(keys) hashes, not a rebuild.
"""

from __future__ import annotations

import base64
import hashlib
from bisect import bisect_left, insort
from collections.abc import Iterable, Mapping
from uuid import UUID

import msgspec

from ledger.proofs.hasher import leaf_hash, node_hash
from ledger.proofs.heads import GroupHead, member_line

__all__ = [
    "EMPTY",
    "HEADS_LEAF_FORMAT",
    "HeadsMap",
    "HeadsState",
    "MapProof",
    "aggregate_key",
    "group_key",
    "group_value",
    "head_value",
    "heads_leaf_data",
    "parse_heads_leaf",
    "root_from_proof",
]

EMPTY = bytes(32)  # a subtree with no key (no SHA-256 output is known to be all zeros)
_BITS = 256
HEADS_LEAF_FORMAT = "kernelindex-heads-leaf/v1"
_INSERT_ONE_BY_ONE = 64  # more new keys than this at once are sorted in, not inserted


def aggregate_key(aggregate: UUID | str) -> bytes:
    """The map key of an aggregate (a run, a key, any other): its events and last leaf."""
    return hashlib.sha256(b"aggregate " + str(aggregate).encode()).digest()


def group_key(comparison_key: str) -> bytes:
    """The map key of a comparison group: its members."""
    return hashlib.sha256(b"group " + comparison_key.encode()).digest()


def head_value(events: int, last_leaf: int) -> bytes:
    return f"{events} {last_leaf}".encode()


def group_value(members: int, digest: bytes) -> bytes:
    return f"{members} ".encode() + base64.b64encode(digest)


def _entry(key: bytes, value: bytes) -> bytes:
    # A map leaf: RFC 6962's leaf prefix over key and value hash (fixed length, unambiguous).
    return leaf_hash(key + hashlib.sha256(value).digest())


def _bit(key: int, depth: int) -> int:
    return (key >> (_BITS - 1 - depth)) & 1


def heads_leaf_data(origin: str, size: int, root: bytes) -> bytes:
    """What a heads leaf of the log commits to: the map root of the log's first ``size``
    leaves (every leaf before it). Starts with a letter, so it is never an event's leaf data
    (canonical JSON, which starts with ``{``)."""
    return f"{HEADS_LEAF_FORMAT}\n{origin}\n{size}\n{base64.b64encode(root).decode()}\n".encode()


def parse_heads_leaf(data: bytes) -> tuple[str, int, bytes] | None:
    """Origin, size and map root of a heads leaf's data; None when it is not one."""
    try:
        lines = data.decode().split("\n")
        if len(lines) != 5 or lines[0] != HEADS_LEAF_FORMAT or lines[4] != "":
            return None
        size, root = int(lines[2]), base64.b64decode(lines[3], validate=True)
    except (UnicodeDecodeError, ValueError):
        return None
    if len(root) != 32 or heads_leaf_data(lines[1], size, root) != data:
        return None
    return lines[1], size, root


class MapProof(msgspec.Struct, frozen=True):
    """The siblings from the root down to the subtree where ``key``'s path ends, and what
    that subtree holds: the key's own leaf (``other`` None), or for an absent key another
    key's leaf (``other`` = its key and value hash) or nothing (``other`` None, absent)."""

    siblings: tuple[bytes, ...]
    other: tuple[bytes, bytes] | None = None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"siblings": [base64.b64encode(h).decode() for h in self.siblings]}
        if self.other is not None:
            out["other"] = [base64.b64encode(part).decode() for part in self.other]
        return out

    @classmethod
    def from_json(cls, obj: object) -> MapProof:
        """Strict: a JSON object of base64 hashes; ValueError otherwise."""
        if not isinstance(obj, dict) or not set(obj) <= {"siblings", "other"}:
            raise ValueError("a map proof is an object with siblings (and other)")
        siblings = obj.get("siblings")
        other = obj.get("other")
        if not isinstance(siblings, list) or len(siblings) > _BITS:
            raise ValueError("a map proof's siblings are a list of at most 256 hashes")
        decoded = tuple(_hash(s) for s in siblings)
        if other is None:
            return cls(decoded)
        if not isinstance(other, list) or len(other) != 2:
            raise ValueError("a map proof's other leaf is a key and a value hash")
        return cls(decoded, (_hash(other[0]), _hash(other[1])))


def _hash(value: object) -> bytes:
    if not isinstance(value, str):
        raise ValueError("a hash is base64 text")
    raw = base64.b64decode(value, validate=True)
    if len(raw) != 32:
        raise ValueError("a hash is 32 bytes")
    return raw


def root_from_proof(key: bytes, value: bytes | None, proof: MapProof) -> bytes | None:
    """The root a proof leads to for ``key`` holding ``value`` (None: for ``key`` absent);
    None when the proof cannot show that at all (compare the result with the root)."""
    if len(key) != 32 or len(proof.siblings) > _BITS:
        return None
    depth = len(proof.siblings)
    if value is not None:
        if proof.other is not None:
            return None
        node = _entry(key, value)
    elif proof.other is None:
        node = EMPTY
    else:
        other_key, other_value_hash = proof.other
        # Another key's leaf where ``key``'s path ends: it shares the path, differs after.
        if other_key == key or (int.from_bytes(other_key) ^ int.from_bytes(key)) >> (_BITS - depth):
            return None
        node = leaf_hash(other_key + other_value_hash)
    wanted = int.from_bytes(key)
    for level in range(depth - 1, -1, -1):
        sibling = proof.siblings[level]
        node = node_hash(sibling, node) if _bit(wanted, level) else node_hash(node, sibling)
    return node


class HeadsMap:
    """The map, in memory: keys (as integers, sorted), their value hashes, and the node
    hashes of subtrees of two or more keys computed so far (dropped along a changed path)."""

    def __init__(self, items: Mapping[bytes, bytes] | None = None) -> None:
        self._values: dict[int, bytes] = {}  # key -> SHA-256 of its value
        self._keys: list[int] = []
        self._nodes: dict[tuple[int, int], bytes] = {}  # (depth, prefix) -> hash
        if items:
            self._values = {int.from_bytes(k): hashlib.sha256(v).digest() for k, v in items.items()}
            self._keys = sorted(self._values)

    def __len__(self) -> int:
        return len(self._keys)

    def update(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        """Set these keys' values (new keys are added; keys are never removed)."""
        changed = {int.from_bytes(k): hashlib.sha256(v).digest() for k, v in items}
        new = [k for k in changed if k not in self._values]
        self._values.update(changed)
        if len(new) > _INSERT_ONE_BY_ONE:  # a bulk load (a rebuild): one sort, not n inserts
            self._keys.extend(new)
            self._keys.sort()
        else:
            for key in new:
                insort(self._keys, key)
        if self._nodes:  # nothing computed yet, nothing to forget
            for key in changed:
                self._forget(key)

    def _forget(self, key: int) -> None:
        """Drop the stored subtrees on ``key``'s path: those of two or more keys, which lie
        no deeper than the longest prefix it shares with a neighbour."""
        at = bisect_left(self._keys, key)
        shared = 0
        for neighbour in (at - 1, at + 1):
            if 0 <= neighbour < len(self._keys):
                shared = max(shared, _BITS - (key ^ self._keys[neighbour]).bit_length())
        for depth in range(min(shared, _BITS - 1) + 1):
            self._nodes.pop((depth, key >> (_BITS - depth)), None)

    def root(self) -> bytes:
        return self._subtree(0, 0, 0, len(self._keys))

    def _subtree(self, depth: int, prefix: int, lo: int, hi: int) -> bytes:
        if hi == lo:
            return EMPTY
        if hi - lo == 1:
            key = self._keys[lo]
            return leaf_hash(key.to_bytes(32) + self._values[key])
        cached = self._nodes.get((depth, prefix))
        if cached is not None:
            return cached
        mid = self._split(depth, prefix, lo, hi)
        left = self._subtree(depth + 1, prefix << 1, lo, mid)
        right = self._subtree(depth + 1, (prefix << 1) | 1, mid, hi)
        found = node_hash(left, right)
        self._nodes[(depth, prefix)] = found
        return found

    def _split(self, depth: int, prefix: int, lo: int, hi: int) -> int:
        """The first of keys[lo:hi] whose bit after the prefix is 1."""
        return bisect_left(self._keys, ((prefix << 1) | 1) << (_BITS - 1 - depth), lo, hi)

    def prove(self, key: bytes) -> MapProof:
        """The proof of ``key``'s value, or of its absence."""
        wanted = int.from_bytes(key)
        siblings: list[bytes] = []
        depth, prefix, lo, hi = 0, 0, 0, len(self._keys)
        while hi - lo > 1:
            mid = self._split(depth, prefix, lo, hi)
            if _bit(wanted, depth):
                siblings.append(self._subtree(depth + 1, prefix << 1, lo, mid))
                prefix, lo = (prefix << 1) | 1, mid
            else:
                siblings.append(self._subtree(depth + 1, (prefix << 1) | 1, mid, hi))
                prefix, hi = prefix << 1, mid
            depth += 1
        if hi - lo == 1 and self._keys[lo] != wanted:
            other = self._keys[lo]
            return MapProof(tuple(siblings), (other.to_bytes(32), self._values[other]))
        return MapProof(tuple(siblings))


# A msgspec Struct, not a dataclass (~4 M instructions to make on 3.11, at every start of
# the offline verifier).
class HeadsState(msgspec.Struct):
    """The heads of the log's first ``size`` leaves, and their map: what a heads leaf at
    ``size`` commits to. The one rule of what the map holds, shared by the writer that
    appends heads leaves, the exporter and ``audit`` (``ledger.store.heads_leaves``) and the
    offline verifier of a whole-log bundle (``ledger.verify.heads_map``)."""

    size: int
    # aggregate id (text) -> events, last leaf
    aggregates: dict[str, tuple[int, int]] = msgspec.field(default_factory=dict)
    # comparison key -> members
    groups: dict[str, set[str]] = msgspec.field(default_factory=dict)
    map: HeadsMap = msgspec.field(default_factory=HeadsMap)
    # Each group's member lines, kept sorted: a digest is then one join and one hash, not a
    # sort of the whole group at every commit that adds a member (``members_digest``'s bytes).
    _lines: dict[str, list[bytes]] = msgspec.field(default_factory=dict)

    def group_head(self, comparison_key: str) -> GroupHead:
        lines = self._lines.get(comparison_key, [])
        return GroupHead(len(lines), hashlib.sha256(b"".join(lines)).digest())

    def set_aggregates(self, items: dict[str, tuple[int, int]]) -> None:
        """(events, last leaf) of aggregates with events since (later ones win)."""
        self.aggregates.update(items)
        self.map.update((aggregate_key(a), head_value(*h)) for a, h in items.items())

    def join(self, rows: Iterable[tuple[str, str]]) -> None:
        """(run digest, comparison key) of runs that joined a group; each changed group's
        value is recomputed once per call (so callers pass a commit's joins together)."""
        changed = set()
        for run, key in rows:
            members = self.groups.setdefault(key, set())
            if run not in members:
                members.add(run)
                insort(self._lines.setdefault(key, []), member_line(run))
            changed.add(key)
        self.map.update(
            (group_key(k), group_value(g.members, g.digest))
            for k in sorted(changed)
            for g in [self.group_head(k)]
        )


class HeadsFold:
    """The heads map folded from the log's leaves in leaf order, as a whole-log export,
    ``audit`` and the whole-log verifier walk them: events and group joins are gathered and
    applied together when a heads leaf asks for the root (each aggregate's and group's
    value hashed once per commit, not once per event). Memory grows with the aggregates
    and groups, never with the events."""

    def __init__(self) -> None:
        self.state = HeadsState(0)
        self._aggregates: dict[str, tuple[int, int]] = {}
        self._joins: list[tuple[str, str]] = []

    def event(self, leaf: int, aggregate: str, version: int) -> None:
        """An event at ``leaf``: the ``version``-th of its aggregate."""
        self._aggregates[aggregate] = (version, leaf)

    def joined(self, run: str, comparison_key: str) -> None:
        """A run joined a comparison group at the event just folded."""
        self._joins.append((run, comparison_key))

    def root(self) -> bytes:
        """The map root of everything folded so far."""
        if self._aggregates:
            self.state.set_aggregates(self._aggregates)
            self._aggregates = {}
        if self._joins:
            self.state.join(self._joins)
            self._joins = []
        return self.state.map.root()
