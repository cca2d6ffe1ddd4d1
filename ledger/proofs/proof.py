"""Merkle roots and proofs built from stored complete subtrees (``get_node``), in
``O(log n)`` hashes and lookups: what the sequencer and the proof server serve. Each result
equals that of the reference builder of the same name in :mod:`.reference`."""

from __future__ import annotations

from collections.abc import Iterable

from ledger.proofs.hasher import EMPTY_ROOT, fold_right, node_hash
from ledger.proofs.nodes import GetNode, complete_cover, subtree_hash, trailing_zeros

__all__ = [
    "consistency_proof_from_nodes",
    "inclusion_proof_from_nodes",
    "inclusion_proofs_from_nodes",
    "root_from_nodes",
]


def root_from_nodes(size: int, get_node: GetNode) -> bytes:
    """Root of the tree ``[0, size)`` from stored complete subtrees (``popcount(size)``
    lookups)."""
    if size < 0:
        raise ValueError(f"size must be non-negative, got {size}")
    if size == 0:
        return EMPTY_ROOT
    return fold_right([n.hash for n in complete_cover(0, size, get_node)])


def _path_from_nodes(
    index: int, size: int, from_level: int, get_node: GetNode, out: list[bytes]
) -> None:
    """Append the audit path of leaf ``index`` in a tree of ``size``, from ``from_level`` up.

    Below ``inner`` (the level where the paths to ``index`` and to the last leaf meet) each
    sibling is complete except possibly the right one at ``inner - 1``; above it every
    sibling on the path is a complete left subtree.
    """
    inner = (index ^ (size - 1)).bit_length()
    for level in range(from_level, inner):
        out.append(subtree_hash(level, (index >> level) ^ 1, size, get_node))
    for level in range(inner, size.bit_length()):
        if (index >> level) & 1:
            out.append(get_node(level, (index >> level) - 1))


def inclusion_proof_from_nodes(index: int, size: int, get_node: GetNode) -> list[bytes]:
    """The inclusion proof of leaf ``index`` in the tree ``[0, size)``, from stored complete
    subtrees, in ``O(log size)`` lookups. Equal to :func:`~.reference.inclusion_proof`."""
    if not 0 <= index < size:
        raise ValueError(f"leaf index {index} is out of range for a tree of size {size}")
    proof: list[bytes] = []
    _path_from_nodes(index, size, 0, get_node, proof)
    return proof


def inclusion_proofs_from_nodes(
    indices: Iterable[int], size: int, get_node: GetNode
) -> dict[int, list[bytes]]:
    """The inclusion proofs of many leaves in the tree ``[0, size)``: each equal to
    :func:`inclusion_proof_from_nodes`'s. The leaves a commit just appended share most of
    their ragged right-edge siblings; here each ragged subtree is hashed once, from its two
    children (RFC 6962's split: a complete left half and the ragged rest), instead of once
    per proof from its complete cover: ``O(log size)`` hashes for the whole batch."""
    ragged: dict[tuple[int, int], bytes] = {}

    def sibling(level: int, index: int) -> bytes:
        start = index << level
        if start + (1 << level) <= size:
            return get_node(level, index)
        found = ragged.get((level, index))
        if found is None:
            # ``start < size`` on every path (a sibling lies left of the last leaf's path
            # or on it), so the ragged node has leaves; its left half is complete when the
            # right half has any, else the node is its left half.
            left = sibling(level - 1, index << 1)
            if start + (1 << (level - 1)) < size:
                found = node_hash(left, sibling(level - 1, (index << 1) | 1))
            else:
                found = left
            ragged[(level, index)] = found
        return found

    proofs: dict[int, list[bytes]] = {}
    top = size.bit_length()
    for index in indices:
        if not 0 <= index < size:
            raise ValueError(f"leaf index {index} is out of range for a tree of size {size}")
        inner = (index ^ (size - 1)).bit_length()
        proof = [sibling(level, (index >> level) ^ 1) for level in range(inner)]
        for level in range(inner, top):
            if (index >> level) & 1:
                proof.append(get_node(level, (index >> level) - 1))
        proofs[index] = proof
    return proofs


def consistency_proof_from_nodes(size1: int, size2: int, get_node: GetNode) -> list[bytes]:
    """The consistency proof from ``[0, size1)`` to ``[0, size2)``, from stored complete
    subtrees, in ``O(log size2)`` lookups. Equal to :func:`~.reference.consistency_proof`.

    It is the audit path of the last old leaf ``size1 - 1`` in the new tree, starting at
    the level of the largest complete subtree ending at ``size1`` (the "seed"), which is
    itself sent first unless it is the whole old tree (``size1`` a power of two).
    """
    if not 0 <= size1 <= size2:
        raise ValueError(f"need 0 <= size1 <= size2, got size1={size1} size2={size2}")
    if size1 in (0, size2):
        return []
    last = size1 - 1
    shift = trailing_zeros(size1)
    proof: list[bytes] = []
    if size1 != 1 << shift:
        proof.append(get_node(shift, last >> shift))
    _path_from_nodes(last, size2, shift, get_node, proof)
    return proof
