"""The shape of an RFC 6962 tree: node addresses, how a range of leaves splits into complete
subtrees, and how many hashes an inclusion or consistency proof holds. Pure arithmetic.

A **node** ``(level, index)`` is the *complete* subtree covering the leaves
``[index * 2**level, (index + 1) * 2**level)``; level 0 nodes are the leaf hashes. Every
complete, aligned subtree of a tree of size ``n`` is a node of that RFC 6962 tree, and so is
every *ragged* right-edge subtree ``[start, n)``, whose hash is derived from at most
``log2(n)`` complete ones.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from ledger.proofs.hasher import fold_right

__all__ = [
    "GetNode",
    "Node",
    "complete_cover",
    "consistency_proof_size",
    "inclusion_proof_size",
    "split_point",
    "subtree_hash",
    "trailing_zeros",
]

GetNode = Callable[[int, int], bytes]
"""``get_node(level, index)``: the stored hash of the complete subtree covering leaves
``[index * 2**level, (index + 1) * 2**level)``; ``get_node(0, i)`` is leaf hash ``i``."""


class Node(msgspec.Struct, frozen=True):
    """A complete subtree hash: leaves ``[index * 2**level, (index + 1) * 2**level)``."""

    level: int
    index: int
    hash: bytes


def split_point(n: int) -> int:
    """The largest power of two strictly smaller than ``n`` (``n >= 2``)."""
    return 1 << ((n - 1).bit_length() - 1)


def trailing_zeros(n: int) -> int:
    """Number of trailing zero bits of ``n > 0``."""
    return (n & -n).bit_length() - 1


def complete_cover(start: int, end: int, get_node: GetNode) -> list[Node]:
    """The maximal aligned complete subtrees covering ``[start, end)``, left to right."""
    nodes: list[Node] = []
    pos = start
    while pos < end:
        level = (end - pos).bit_length() - 1
        if pos:
            level = min(level, trailing_zeros(pos))
        index = pos >> level
        nodes.append(Node(level, index, get_node(level, index)))
        pos += 1 << level
    return nodes


def subtree_hash(level: int, index: int, size: int, get_node: GetNode) -> bytes:
    """Hash of the RFC 6962 subtree at ``(level, index)`` in a tree of ``size`` leaves,
    deriving it from complete subtrees if it is ragged (cut off by the right edge)."""
    start = index << level
    end = start + (1 << level)
    if end <= size:
        return get_node(level, index)
    return fold_right([n.hash for n in complete_cover(start, size, get_node)])


def inclusion_proof_size(index: int, size: int) -> int:
    """Hashes in the inclusion proof of leaf ``index`` in a tree of ``size`` leaves: one per
    level below where the paths to ``index`` and to the last leaf meet, then one per left
    sibling above it."""
    inner = (index ^ (size - 1)).bit_length()
    return inner + (index >> inner).bit_count()


def consistency_proof_size(size1: int, size2: int) -> int:
    """Hashes in the consistency proof from ``size1`` to ``size2`` (``0 < size1 < size2``):
    the seed (unless the old tree is one complete subtree), then the seed's audit path."""
    last = size1 - 1
    shift = trailing_zeros(size1)
    inner = (last ^ (size2 - 1)).bit_length()
    seed = 0 if size1 == 1 << shift else 1
    return seed + (inner - shift) + (last >> inner).bit_count()
