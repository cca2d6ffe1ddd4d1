"""Merkle proof verification, following RFC 9162 §2.1.3.2 (inclusion) and §2.1.4.2
(consistency). Each verifier returns nothing or raises the :class:`~.errors.ProofError`
subclass that says why the proof was rejected."""

from __future__ import annotations

from collections.abc import Sequence

from ledger.proofs.errors import (
    IndexOutOfRange,
    InvalidConsistencyRange,
    RootMismatch,
    WrongProofSize,
)
from ledger.proofs.hasher import EMPTY_ROOT, check_hash, node_hash
from ledger.proofs.nodes import consistency_proof_size, inclusion_proof_size

__all__ = ["verify_consistency", "verify_inclusion"]


def _check_proof_hashes(proof: Sequence[bytes]) -> None:
    for i, p in enumerate(proof):
        check_hash(p, f"proof[{i}]")


def verify_inclusion(
    leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """Check that ``leaf_hash`` is leaf ``index`` of the tree of ``size`` leaves with hash
    ``root``; raise a :class:`ProofError` subclass otherwise.

    The proof binds the tree size only through ``root``: always verify against a
    (size, root) pair taken together from a signed checkpoint.
    """
    check_hash(leaf_hash, "leaf hash")
    check_hash(root, "root")
    _check_proof_hashes(proof)
    if size <= 0:
        raise IndexOutOfRange(f"tree size {size} has no leaves to prove inclusion in")
    if not 0 <= index < size:
        raise IndexOutOfRange(f"leaf index {index} is out of range for a tree of size {size}")
    want = inclusion_proof_size(index, size)
    if len(proof) != want:
        raise WrongProofSize(
            f"inclusion proof for leaf {index} in a tree of size {size} must have "
            f"{want} hashes, got {len(proof)}"
        )
    r = _inclusion_root(leaf_hash, index, size, proof)
    if r != root:
        raise RootMismatch(
            f"inclusion proof for leaf {index} in a tree of size {size} leads to root "
            f"{r.hex()}, expected {root.hex()}"
        )


def _inclusion_root(leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes]) -> bytes:
    """The root a proof of the right length leads to from leaf ``index`` (RFC 9162 loop)."""
    fn, sn = index, size - 1
    r = leaf_hash
    for p in proof:
        if sn == 0:  # pragma: no cover - excluded by the length check of the caller
            raise WrongProofSize("inclusion proof is longer than the path to the root")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while fn and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:  # pragma: no cover - excluded by the length check of the caller
        raise WrongProofSize("inclusion proof is shorter than the path to the root")
    return r


def verify_consistency(
    size1: int, size2: int, proof: Sequence[bytes], root1: bytes, root2: bytes
) -> None:
    """Check that the tree of ``size2`` leaves with hash ``root2`` extends the tree of
    ``size1`` leaves with hash ``root1``; raise a :class:`ProofError` subclass otherwise.

    Edge cases beyond RFC 9162 (which defines proofs for ``0 < size1 < size2``): equal
    sizes need an empty proof and equal roots; ``size1 == 0`` needs an empty proof and
    ``root1`` equal to the empty-tree root (every tree extends the empty tree).
    """
    check_hash(root1, "root1")
    check_hash(root2, "root2")
    _check_proof_hashes(proof)
    if size1 < 0 or size2 < size1:
        raise InvalidConsistencyRange(f"need 0 <= size1 <= size2, got size1={size1} size2={size2}")
    if size1 in (0, size2):
        _verify_trivial_consistency(size1, size2, proof, root1, root2)
        return
    want = consistency_proof_size(size1, size2)
    if len(proof) != want:
        raise WrongProofSize(
            f"consistency proof from size {size1} to size {size2} must have {want} hashes, "
            f"got {len(proof)}"
        )
    old, new = _consistency_roots(size1, size2, proof, root1)
    if old != root1:
        raise RootMismatch(
            f"consistency proof from size {size1} to size {size2} leads to old root "
            f"{old.hex()}, expected {root1.hex()}"
        )
    if new != root2:
        raise RootMismatch(
            f"consistency proof from size {size1} to size {size2} leads to new root "
            f"{new.hex()}, expected {root2.hex()}"
        )


def _verify_trivial_consistency(
    size1: int, size2: int, proof: Sequence[bytes], root1: bytes, root2: bytes
) -> None:
    """From the empty tree, or between equal sizes: no proof, and roots that agree."""
    if proof:
        raise WrongProofSize(
            f"consistency proof from size {size1} to size {size2} must be empty, "
            f"got {len(proof)} hashes"
        )
    if size1 == 0 and root1 != EMPTY_ROOT:
        raise RootMismatch(f"root1 {root1.hex()} is not the empty-tree root")
    if size1 == size2 and root1 != root2:
        raise RootMismatch(
            f"trees of equal size {size1} have different roots {root1.hex()} and {root2.hex()}"
        )


def _consistency_roots(
    size1: int, size2: int, proof: Sequence[bytes], root1: bytes
) -> tuple[bytes, bytes]:
    """The (old, new) roots a proof of the right length leads to (RFC 9162 loop), for
    ``0 < size1 < size2``."""
    path = list(proof)
    if size1 & (size1 - 1) == 0:  # size1 is a power of two: the old root is the seed
        path.insert(0, root1)
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:  # pragma: no cover - excluded by the length check of the caller
            raise WrongProofSize("consistency proof is longer than the path to the root")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while fn and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:  # pragma: no cover - excluded by the length check of the caller
        raise WrongProofSize("consistency proof is shorter than the path to the root")
    return fr, sr
