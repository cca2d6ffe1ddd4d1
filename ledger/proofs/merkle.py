"""RFC 6962 / RFC 9162 Merkle trees: the one import for hashing, proofs and verification.

Pure functions over bytes; no I/O. This module only gathers the names of the small modules
that hold them, in the shape of transparency-dev/merkle:

* :mod:`.hasher`: leaf hashes ``SHA-256(0x00 || data)``, node hashes
  ``SHA-256(0x01 || left || right)`` and the empty-tree root ``SHA-256("")``;
* :mod:`.nodes`: a node ``(level, index)`` is the complete subtree covering leaves
  ``[index * 2**level, (index + 1) * 2**level)``; the shape of trees and proofs;
* :mod:`.reference`: builders over an in-memory list of leaf hashes (:func:`root`,
  :func:`inclusion_proof`, :func:`consistency_proof`), straight from RFC 6962, for tests
  and small trees;
* :mod:`.compact` and :mod:`.proof`: builders over stored complete subtrees
  (:class:`CompactRange`, :func:`root_from_nodes`, :func:`inclusion_proof_from_nodes` and
  its batch :func:`inclusion_proofs_from_nodes`, :func:`consistency_proof_from_nodes`)
  that cost ``O(log n)`` hashes and lookups, for the sequencer and the proof server;
* :mod:`.verify`: the verifiers (:func:`verify_inclusion`, :func:`verify_consistency`) of
  RFC 9162 §2.1.3.2 and §2.1.4.2, which raise a :class:`ProofError` subclass
  (:mod:`.errors`) that says why a proof was rejected.
"""

from __future__ import annotations

from ledger.proofs.compact import CompactRange
from ledger.proofs.errors import (
    IndexOutOfRange,
    InvalidConsistencyRange,
    InvalidHashLength,
    ProofError,
    RootMismatch,
    WrongProofSize,
)
from ledger.proofs.hasher import EMPTY_ROOT, HASH_SIZE, leaf_hash, node_hash
from ledger.proofs.nodes import GetNode, Node
from ledger.proofs.proof import (
    consistency_proof_from_nodes,
    inclusion_proof_from_nodes,
    inclusion_proofs_from_nodes,
    root_from_nodes,
)
from ledger.proofs.reference import consistency_proof, inclusion_proof, root
from ledger.proofs.verify import verify_consistency, verify_inclusion

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
    "inclusion_proofs_from_nodes",
    "leaf_hash",
    "node_hash",
    "root",
    "root_from_nodes",
    "verify_consistency",
    "verify_inclusion",
]
