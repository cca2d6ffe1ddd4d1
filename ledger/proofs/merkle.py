"""RFC 6962 / RFC 9162 Merkle tree hashing, proofs and proof verification.

Pure functions over bytes; no I/O. Terminology:

* a **leaf hash** is ``SHA-256(0x00 || data)``, an interior **node hash** is
  ``SHA-256(0x01 || left || right)`` and the root of the empty tree is ``SHA-256("")``;
* a **node** ``(level, index)`` is the *complete* subtree covering the leaves
  ``[index * 2**level, (index + 1) * 2**level)``; level 0 nodes are the leaf hashes.
  Every complete, aligned subtree of a tree of size ``n`` is a node of that RFC 6962 tree,
  and so is every *ragged* right-edge subtree ``[start, n)``; the hash of a ragged subtree
  is derived from at most ``log2(n)`` complete ones.

Three families of functions live here:

* reference builders over an in-memory list of leaf hashes (:func:`root`,
  :func:`inclusion_proof`, :func:`consistency_proof`), written directly from the RFC 6962
  definitions (``MTH``, ``PATH``, ``PROOF``/``SUBPROOF``) for tests and small trees;
* builders over stored complete subtrees (:class:`CompactRange`,
  :func:`root_from_nodes`, :func:`inclusion_proof_from_nodes`,
  :func:`consistency_proof_from_nodes`) that cost ``O(log n)`` hashes and lookups, for the
  sequencer and the proof server;
* verifiers (:func:`verify_inclusion`, :func:`verify_consistency`) following the
  algorithms of RFC 9162 §2.1.3.2 and §2.1.4.2, which raise a :class:`ProofError` subclass
  that says why a proof was rejected.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "CompactRange",
    "GetNode",
    "IndexOutOfRange",
    "InvalidConsistencyRange",
    "InvalidHashLength",
    "Node",
    "ProofError",
    "RootMismatch",
    "WrongProofSize",
    "consistency_proof",
    "consistency_proof_from_nodes",
    "inclusion_proof",
    "inclusion_proof_from_nodes",
    "leaf_hash",
    "node_hash",
    "root",
    "root_from_nodes",
    "verify_consistency",
    "verify_inclusion",
]

HASH_SIZE = 32
"""Length in bytes of every hash in the tree (SHA-256)."""

_LEAF_PREFIX = b"\x00"
_NODE_PREFIX = b"\x01"

EMPTY_ROOT: bytes = hashlib.sha256(b"").digest()
"""Root hash of the empty tree: ``SHA-256("")`` (RFC 6962 §2.1)."""

GetNode = Callable[[int, int], bytes]
"""``get_node(level, index)``: the stored hash of the complete subtree covering leaves
``[index * 2**level, (index + 1) * 2**level)``; ``get_node(0, i)`` is leaf hash ``i``."""


# --------------------------------------------------------------------------------------------
# Errors


class ProofError(Exception):
    """A Merkle proof (or one of its inputs) was rejected.

    ``code`` is a stable machine-readable reason; ``message`` says what was wrong.
    """

    code = "invalid-proof"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def reason(self) -> str:
        """Alias of :attr:`code`."""
        return self.code


class InvalidHashLength(ProofError):
    """A leaf hash, root or proof element is not exactly 32 bytes."""

    code = "invalid-hash-length"


class IndexOutOfRange(ProofError):
    """The leaf index is negative or not below the tree size."""

    code = "index-out-of-range"


class InvalidConsistencyRange(ProofError):
    """The sizes of a consistency proof are negative or decreasing."""

    code = "invalid-consistency-range"


class WrongProofSize(ProofError):
    """The proof has more or fewer hashes than the index and size(s) require."""

    code = "wrong-proof-size"


class RootMismatch(ProofError):
    """The root(s) recomputed from the proof differ from the expected root(s)."""

    code = "root-mismatch"


# --------------------------------------------------------------------------------------------
# Hashing


def leaf_hash(data: bytes) -> bytes:
    """RFC 6962 leaf hash: ``SHA-256(0x00 || data)``."""
    return hashlib.sha256(_LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 6962 interior node hash: ``SHA-256(0x01 || left || right)``."""
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()


def _check_hash(value: bytes, what: str) -> None:
    if len(value) != HASH_SIZE:
        raise InvalidHashLength(f"{what} is {len(value)} bytes, expected {HASH_SIZE}")


def _fold_right(hashes: Sequence[bytes]) -> bytes:
    """Hash a left-to-right run of complete subtrees of strictly decreasing size into the
    root of the (ragged) tree they form: ``H(h0, H(h1, ... H(h[k-2], h[k-1])))``."""
    result = hashes[-1]
    for h in reversed(hashes[:-1]):
        result = node_hash(h, result)
    return result


def _split_point(n: int) -> int:
    """The largest power of two strictly smaller than ``n`` (``n >= 2``)."""
    return 1 << ((n - 1).bit_length() - 1)


def _trailing_zeros(n: int) -> int:
    """Number of trailing zero bits of ``n > 0``."""
    return (n & -n).bit_length() - 1


# --------------------------------------------------------------------------------------------
# Incremental builder


@dataclass(frozen=True, slots=True)
class Node:
    """A complete subtree hash: leaves ``[index * 2**level, (index + 1) * 2**level)``."""

    level: int
    index: int
    hash: bytes


class CompactRange:
    """Incremental Merkle tree builder keeping only ``O(log n)`` state.

    It holds the hashes of the complete subtrees that make up the tree ``[0, size)``, one per
    set bit of ``size``, largest (leftmost) first. :meth:`append` adds a leaf hash and
    returns every complete node it created, so a store can persist them for
    :func:`inclusion_proof_from_nodes` / :func:`consistency_proof_from_nodes`.
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
            _check_hash(h, f"compact range hash {i}")
        self._size = size
        self._hashes = stored

    @classmethod
    def from_nodes(cls, size: int, get_node: GetNode) -> CompactRange:
        """Restore the state for a tree of ``size`` leaves from stored complete subtrees
        (``popcount(size)`` lookups)."""
        if size < 0:
            raise ValueError(f"size must be non-negative, got {size}")
        return cls(size, (n.hash for n in _complete_cover(0, size, get_node)))

    @property
    def size(self) -> int:
        """Number of leaves appended so far."""
        return self._size

    @property
    def hashes(self) -> tuple[bytes, ...]:
        """The complete subtree hashes covering ``[0, size)``, leftmost (largest) first."""
        return tuple(self._hashes)

    def append(self, leaf: bytes) -> list[Node]:
        """Append one leaf *hash*; return the nodes completed by it, the leaf itself first
        and then each new parent going up."""
        _check_hash(leaf, "leaf hash")
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
        return _fold_right(self._hashes)

    def copy(self) -> CompactRange:
        return CompactRange(self._size, self._hashes)

    def __repr__(self) -> str:
        return f"CompactRange(size={self._size}, root={self.root().hex()})"


# --------------------------------------------------------------------------------------------
# Reference builders over an in-memory list of leaf hashes


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
    return _fold_right(stack)


def root(leaf_hashes: Sequence[bytes]) -> bytes:
    """RFC 6962 Merkle Tree Hash ``MTH(D[n])`` of the given leaf hashes (``O(n)`` hashes,
    ``O(log n)`` memory)."""
    for i, h in enumerate(leaf_hashes):
        _check_hash(h, f"leaf hash {i}")
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
        k = _split_point(end - start)
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
        k = _split_point(end - start)
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


# --------------------------------------------------------------------------------------------
# Builders over stored complete subtrees


def _complete_cover(start: int, end: int, get_node: GetNode) -> list[Node]:
    """The maximal aligned complete subtrees covering ``[start, end)``, left to right."""
    nodes: list[Node] = []
    pos = start
    while pos < end:
        level = (end - pos).bit_length() - 1
        if pos:
            level = min(level, _trailing_zeros(pos))
        index = pos >> level
        nodes.append(Node(level, index, get_node(level, index)))
        pos += 1 << level
    return nodes


def _subtree_hash(level: int, index: int, size: int, get_node: GetNode) -> bytes:
    """Hash of the RFC 6962 subtree at ``(level, index)`` in a tree of ``size`` leaves,
    deriving it from complete subtrees if it is ragged (cut off by the right edge)."""
    start = index << level
    end = start + (1 << level)
    if end <= size:
        return get_node(level, index)
    return _fold_right([n.hash for n in _complete_cover(start, size, get_node)])


def root_from_nodes(size: int, get_node: GetNode) -> bytes:
    """Root of the tree ``[0, size)`` from stored complete subtrees (``popcount(size)``
    lookups)."""
    if size < 0:
        raise ValueError(f"size must be non-negative, got {size}")
    if size == 0:
        return EMPTY_ROOT
    return _fold_right([n.hash for n in _complete_cover(0, size, get_node)])


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
        out.append(_subtree_hash(level, (index >> level) ^ 1, size, get_node))
    for level in range(inner, size.bit_length()):
        if (index >> level) & 1:
            out.append(get_node(level, (index >> level) - 1))


def inclusion_proof_from_nodes(index: int, size: int, get_node: GetNode) -> list[bytes]:
    """The inclusion proof of leaf ``index`` in the tree ``[0, size)``, from stored complete
    subtrees, in ``O(log size)`` lookups. Equal to :func:`inclusion_proof`."""
    if not 0 <= index < size:
        raise ValueError(f"leaf index {index} is out of range for a tree of size {size}")
    proof: list[bytes] = []
    _path_from_nodes(index, size, 0, get_node, proof)
    return proof


def consistency_proof_from_nodes(size1: int, size2: int, get_node: GetNode) -> list[bytes]:
    """The consistency proof from ``[0, size1)`` to ``[0, size2)``, from stored complete
    subtrees, in ``O(log size2)`` lookups. Equal to :func:`consistency_proof`.

    It is the audit path of the last old leaf ``size1 - 1`` in the new tree, starting at
    the level of the largest complete subtree ending at ``size1`` (the "seed"), which is
    itself sent first unless it is the whole old tree (``size1`` a power of two).
    """
    if not 0 <= size1 <= size2:
        raise ValueError(f"need 0 <= size1 <= size2, got size1={size1} size2={size2}")
    if size1 in (0, size2):
        return []
    last = size1 - 1
    shift = _trailing_zeros(size1)
    proof: list[bytes] = []
    if size1 != 1 << shift:
        proof.append(get_node(shift, last >> shift))
    _path_from_nodes(last, size2, shift, get_node, proof)
    return proof


# --------------------------------------------------------------------------------------------
# Verification (RFC 9162 §2.1.3.2, §2.1.4.2)


def _inclusion_proof_size(index: int, size: int) -> int:
    inner = (index ^ (size - 1)).bit_length()
    return inner + (index >> inner).bit_count()


def _consistency_proof_size(size1: int, size2: int) -> int:
    last = size1 - 1
    shift = _trailing_zeros(size1)
    inner = (last ^ (size2 - 1)).bit_length()
    seed = 0 if size1 == 1 << shift else 1
    return seed + (inner - shift) + (last >> inner).bit_count()


def verify_inclusion(
    leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """Check that ``leaf_hash`` is leaf ``index`` of the tree of ``size`` leaves with hash
    ``root``; raise a :class:`ProofError` subclass otherwise.

    The proof binds the tree size only through ``root``: always verify against a
    (size, root) pair taken together from a signed checkpoint.
    """
    _check_hash(leaf_hash, "leaf hash")
    _check_hash(root, "root")
    for i, p in enumerate(proof):
        _check_hash(p, f"proof[{i}]")
    if size <= 0:
        raise IndexOutOfRange(f"tree size {size} has no leaves to prove inclusion in")
    if not 0 <= index < size:
        raise IndexOutOfRange(f"leaf index {index} is out of range for a tree of size {size}")
    want = _inclusion_proof_size(index, size)
    if len(proof) != want:
        raise WrongProofSize(
            f"inclusion proof for leaf {index} in a tree of size {size} must have "
            f"{want} hashes, got {len(proof)}"
        )
    fn, sn = index, size - 1
    r = leaf_hash
    for p in proof:
        if sn == 0:  # pragma: no cover - excluded by the length check above
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
    if sn != 0:  # pragma: no cover - excluded by the length check above
        raise WrongProofSize("inclusion proof is shorter than the path to the root")
    if r != root:
        raise RootMismatch(
            f"inclusion proof for leaf {index} in a tree of size {size} leads to root "
            f"{r.hex()}, expected {root.hex()}"
        )


def verify_consistency(
    size1: int, size2: int, proof: Sequence[bytes], root1: bytes, root2: bytes
) -> None:
    """Check that the tree of ``size2`` leaves with hash ``root2`` extends the tree of
    ``size1`` leaves with hash ``root1``; raise a :class:`ProofError` subclass otherwise.

    Edge cases beyond RFC 9162 (which defines proofs for ``0 < size1 < size2``): equal
    sizes need an empty proof and equal roots; ``size1 == 0`` needs an empty proof and
    ``root1`` equal to the empty-tree root (every tree extends the empty tree).
    """
    _check_hash(root1, "root1")
    _check_hash(root2, "root2")
    for i, p in enumerate(proof):
        _check_hash(p, f"proof[{i}]")
    if size1 < 0 or size2 < size1:
        raise InvalidConsistencyRange(f"need 0 <= size1 <= size2, got size1={size1} size2={size2}")
    if size1 in (0, size2):
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
        return
    want = _consistency_proof_size(size1, size2)
    if len(proof) != want:
        raise WrongProofSize(
            f"consistency proof from size {size1} to size {size2} must have {want} hashes, "
            f"got {len(proof)}"
        )
    path = list(proof)
    if size1 & (size1 - 1) == 0:  # size1 is a power of two: the old root is the seed
        path.insert(0, root1)
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:  # pragma: no cover - excluded by the length check above
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
    if sn != 0:  # pragma: no cover - excluded by the length check above
        raise WrongProofSize("consistency proof is shorter than the path to the root")
    if fr != root1:
        raise RootMismatch(
            f"consistency proof from size {size1} to size {size2} leads to old root "
            f"{fr.hex()}, expected {root1.hex()}"
        )
    if sr != root2:
        raise RootMismatch(
            f"consistency proof from size {size1} to size {size2} leads to new root "
            f"{sr.hex()}, expected {root2.hex()}"
        )
