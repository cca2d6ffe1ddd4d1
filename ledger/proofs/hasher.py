"""The RFC 6962 hasher: leaf and interior node hashes, the empty-tree root, and folding a
run of subtree hashes into the root of the tree they form. Pure functions over bytes."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from ledger.proofs.errors import InvalidHashLength

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "check_hash",
    "fold_right",
    "leaf_hash",
    "node_hash",
]

HASH_SIZE = 32
"""Length in bytes of every hash in the tree (SHA-256)."""

# Domain separation (RFC 6962 §2.1): a leaf can never be mistaken for an interior node.
_LEAF_PREFIX = b"\x00"
_NODE_PREFIX = b"\x01"

EMPTY_ROOT: bytes = hashlib.sha256(b"").digest()
"""Root hash of the empty tree: ``SHA-256("")`` (RFC 6962 §2.1)."""


def leaf_hash(data: bytes) -> bytes:
    """RFC 6962 leaf hash: ``SHA-256(0x00 || data)``."""
    return hashlib.sha256(_LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 6962 interior node hash: ``SHA-256(0x01 || left || right)``."""
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()


def check_hash(value: bytes, what: str) -> None:
    """Raise :class:`InvalidHashLength` unless ``value`` is exactly one hash long."""
    if len(value) != HASH_SIZE:
        raise InvalidHashLength(f"{what} is {len(value)} bytes, expected {HASH_SIZE}")


def fold_right(hashes: Sequence[bytes]) -> bytes:
    """Hash a left-to-right run of complete subtrees of strictly decreasing size into the
    root of the (ragged) tree they form: ``H(h0, H(h1, ... H(h[k-2], h[k-1])))``."""
    result = hashes[-1]
    for h in reversed(hashes[:-1]):
        result = node_hash(h, result)
    return result
