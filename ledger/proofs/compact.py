"""The compact range: an incremental Merkle tree builder that keeps ``O(log n)`` state and
reports every complete node it creates, so a store can persist them for :mod:`.proof`."""

from __future__ import annotations

from collections.abc import Iterable

from ledger.proofs.hasher import EMPTY_ROOT, check_hash, fold_right, node_hash
from ledger.proofs.nodes import GetNode, Node, complete_cover

__all__ = ["CompactRange"]


class CompactRange:
    """Incremental Merkle tree builder keeping only ``O(log n)`` state.

    It holds the hashes of the complete subtrees that make up the tree ``[0, size)``, one per
    set bit of ``size``, largest (leftmost) first. :meth:`append` adds a leaf hash and
    returns every complete node it created, so a store can persist them for
    :func:`~.proof.inclusion_proof_from_nodes` / :func:`~.proof.consistency_proof_from_nodes`.
    """

    __slots__ = ("_hashes", "_size")

    def __init__(self, size: int = 0, hashes: Iterable[bytes] = ()) -> None:
        stored = list(hashes)
        if size < 0:
            raise ValueError(f"size must be non-negative, got {size}")
        if len(stored) != size.bit_count():
            raise ValueError(
                f"a compact range of size {size} holds {size.bit_count()} hashes, got {len(stored)}"
            )
        for i, h in enumerate(stored):
            check_hash(h, f"compact range hash {i}")
        self._size = size
        self._hashes = stored

    @classmethod
    def from_nodes(cls, size: int, get_node: GetNode) -> CompactRange:
        """Restore the state for a tree of ``size`` leaves from stored complete subtrees
        (``popcount(size)`` lookups)."""
        if size < 0:
            raise ValueError(f"size must be non-negative, got {size}")
        return cls(size, (n.hash for n in complete_cover(0, size, get_node)))

    @property
    def size(self) -> int:
        """Number of leaves appended so far."""
        return self._size

    @property
    def hashes(self) -> tuple[bytes, ...]:
        """The complete subtree hashes covering ``[0, size)``, leftmost (largest) first."""
        return tuple(self._hashes)

    def nodes(self) -> list[Node]:
        """The complete subtrees held, with their place in the tree, leftmost first. They are
        the left siblings on the path of every leaf appended after them, so with the nodes
        :meth:`append` reports they are all an inclusion proof of a new leaf needs."""
        held = iter(self._hashes)
        return complete_cover(0, self._size, lambda level, index: next(held))

    def append(self, leaf: bytes) -> list[Node]:
        """Append one leaf *hash*; return the nodes completed by it, the leaf itself first
        and then each new parent going up."""
        check_hash(leaf, "leaf hash")
        index = self._size
        created = [Node(0, index, leaf)]
        self._hashes.append(leaf)
        level = 0
        # Every set low bit of the old size is a complete left sibling to merge with.
        while index & 1:
            right = self._hashes.pop()
            left = self._hashes.pop()
            parent = node_hash(left, right)
            self._hashes.append(parent)
            index >>= 1
            level += 1
            created.append(Node(level, index, parent))
        self._size += 1
        return created

    def extend(self, leaves: Iterable[bytes]) -> list[Node]:
        """Append several leaf hashes; return all the nodes they completed."""
        created: list[Node] = []
        for leaf in leaves:
            created.extend(self.append(leaf))
        return created

    def root(self) -> bytes:
        """The RFC 6962 root hash of the tree ``[0, size)``."""
        if not self._hashes:
            return EMPTY_ROOT
        return fold_right(self._hashes)

    def copy(self) -> CompactRange:
        return CompactRange(self._size, self._hashes)

    def __repr__(self) -> str:
        return f"CompactRange(size={self._size}, root={self.root().hex()})"
