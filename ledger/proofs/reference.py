"""Reference Merkle builders over an in-memory list of leaf hashes, written directly from
the RFC 6962 definitions (``MTH``, ``PATH``, ``PROOF``/``SUBPROOF``): for tests and small
trees. They cost ``O(n)`` hashes per root or proof; the sequencer uses :mod:`.proof`."""

from __future__ import annotations

from collections.abc import Sequence

from ledger.proofs.hasher import EMPTY_ROOT, check_hash, fold_right, node_hash
from ledger.proofs.nodes import split_point

__all__ = ["consistency_proof", "inclusion_proof", "root"]


def _range_root(leaf_hashes: Sequence[bytes], start: int, end: int) -> bytes:
    """MTH of ``leaf_hashes[start:end]`` without copying: a stack of complete subtrees."""
    if start == end:
        return EMPTY_ROOT
    stack: list[bytes] = []
    for i in range(start, end):
        stack.append(leaf_hashes[i])
        pending = i - start  # number of leaves before this one: its set bits are merges
        while pending & 1:
            right = stack.pop()
            stack[-1] = node_hash(stack[-1], right)
            pending >>= 1
    return fold_right(stack)


def root(leaf_hashes: Sequence[bytes]) -> bytes:
    """RFC 6962 Merkle Tree Hash ``MTH(D[n])`` of the given leaf hashes (``O(n)`` hashes,
    ``O(log n)`` memory)."""
    for i, h in enumerate(leaf_hashes):
        check_hash(h, f"leaf hash {i}")
    return _range_root(leaf_hashes, 0, len(leaf_hashes))


def inclusion_proof(index: int, leaf_hashes: Sequence[bytes]) -> list[bytes]:
    """RFC 6962 §2.1.1 ``PATH(index, D[n])`` with ``n = len(leaf_hashes)``, bottom-up.

    Reference implementation (``O(n)`` hashes per proof).
    """
    size = len(leaf_hashes)
    if not 0 <= index < size:
        raise ValueError(f"leaf index {index} is out of range for a tree of size {size}")
    proof: list[bytes] = []
    start, end, m = 0, size, index
    # Walk down from the root recording the other side at each split, then reverse.
    while end - start > 1:
        k = split_point(end - start)
        if m < k:
            proof.append(_range_root(leaf_hashes, start + k, end))
            end = start + k
        else:
            proof.append(_range_root(leaf_hashes, start, start + k))
            start += k
            m -= k
    proof.reverse()
    return proof


def consistency_proof(size1: int, size2: int, leaf_hashes: Sequence[bytes]) -> list[bytes]:
    """RFC 6962 §2.1.2 ``PROOF(size1, D[size2])`` over ``leaf_hashes[:size2]``, bottom-up.

    Empty when ``size1`` is 0 or equal to ``size2``. Reference implementation.
    """
    if not 0 <= size1 <= size2 <= len(leaf_hashes):
        raise ValueError(
            f"need 0 <= size1 <= size2 <= {len(leaf_hashes)}, got size1={size1} size2={size2}"
        )
    if size1 in (0, size2):
        return []
    proof: list[bytes] = []
    # SUBPROOF(m, D[start:end], b), unrolled.
    start, end, m, whole = 0, size2, size1, True
    while m != end - start:
        k = split_point(end - start)
        if m <= k:
            proof.append(_range_root(leaf_hashes, start + k, end))
            end = start + k
        else:
            proof.append(_range_root(leaf_hashes, start, start + k))
            start += k
            m -= k
            whole = False
    if not whole:
        proof.append(_range_root(leaf_hashes, start, end))
    proof.reverse()
    return proof
