"""Tests for ledger.proofs.merkle: transparency-dev conformance vectors, RFC 6962 known values,
and property tests tying the reference builders, the node-based builders, CompactRange and
the RFC 9162 verifiers together."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.proofs.merkle import (
    EMPTY_ROOT,
    CompactRange,
    IndexOutOfRange,
    InvalidConsistencyRange,
    InvalidHashLength,
    ProofError,
    RootMismatch,
    WrongProofSize,
    consistency_proof,
    consistency_proof_from_nodes,
    inclusion_proof,
    inclusion_proof_from_nodes,
    inclusion_proofs_from_nodes,
    leaf_hash,
    node_hash,
    root,
    root_from_nodes,
    verify_consistency,
    verify_inclusion,
)
from tests.paths import CONFORMANCE

SHARED = CONFORMANCE
VECTORS = SHARED / "vectors" / "merkle"


def _vector_params(kind: str) -> list[Any]:
    folder = VECTORS / kind
    assert folder.is_dir(), f"the conformance vectors {folder} are part of the repository"
    files = sorted(folder.rglob("*.json"))
    return [pytest.param(f, id=f.relative_to(folder).as_posix()) for f in files]


def _b64(value: str) -> bytes:
    return base64.b64decode(value, validate=True)


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


# --------------------------------------------------------------------------------------------
# Conformance vectors (transparency-dev/merkle testdata)


@pytest.mark.parametrize("path", _vector_params("inclusion"))
def test_inclusion_vector(path: Path) -> None:
    v = _load(path)
    proof = [_b64(p) for p in (v["proof"] or [])]
    args = (_b64(v["leafHash"]), v["leafIdx"], v["treeSize"], proof, _b64(v["root"]))
    if v["wantErr"]:
        with pytest.raises(ProofError) as info:
            verify_inclusion(*args)
        assert info.value.message
    else:
        verify_inclusion(*args)


@pytest.mark.parametrize("path", _vector_params("consistency"))
def test_consistency_vector(path: Path) -> None:
    v = _load(path)
    proof = [_b64(p) for p in (v["proof"] or [])]
    args = (v["size1"], v["size2"], proof, _b64(v["root1"]), _b64(v["root2"]))
    if v["wantErr"]:
        with pytest.raises(ProofError) as info:
            verify_consistency(*args)
        assert info.value.message
    else:
        verify_consistency(*args)


def test_vector_folders_are_populated() -> None:
    inclusion = list((VECTORS / "inclusion").rglob("*.json"))
    consistency = list((VECTORS / "consistency").rglob("*.json"))
    assert len(inclusion) >= 80
    assert len(consistency) >= 80
    happy = [p for p in inclusion + consistency if not _load(p)["wantErr"]]
    assert len(happy) >= 10


# RFC 6962 / certificate-transparency test leaves, from which transparency-dev's vectors
# were built: the 8-leaf tree has the well-known root 5dc9da79...
RFC6962_LEAVES = [
    b"",
    b"\x00",
    b"\x10",
    b"\x20\x21",
    b"\x30\x31",
    b"\x40\x41\x42\x43",
    b"\x50\x51\x52\x53\x54\x55\x56\x57",
    bytes(range(0x60, 0x70)),
]


def test_known_values() -> None:
    assert hashlib.sha256(b"").digest() == EMPTY_ROOT
    assert root([]) == EMPTY_ROOT
    assert leaf_hash(b"") == hashlib.sha256(b"\x00").digest()
    assert leaf_hash(b"").hex().startswith("6e340b9c")
    a, b = leaf_hash(b"a"), leaf_hash(b"b")
    assert node_hash(a, b) == hashlib.sha256(b"\x01" + a + b).digest()
    leaves = [leaf_hash(d) for d in RFC6962_LEAVES]
    assert root(leaves).hex() == (
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"
    )


def test_happy_vectors_match_reference_builders() -> None:
    """Our builders regenerate the proofs and roots of every happy-path vector that lies
    within the RFC 6962 8-leaf test tree."""
    leaves = [leaf_hash(d) for d in RFC6962_LEAVES]
    checked = 0
    for path in sorted((VECTORS / "inclusion").rglob("happy-path.json")):
        v = _load(path)
        size, index = v["treeSize"], v["leafIdx"]
        if size > len(leaves) or _b64(v["leafHash"]) != leaves[index]:
            continue
        assert root(leaves[:size]) == _b64(v["root"])
        assert inclusion_proof(index, leaves[:size]) == [_b64(p) for p in v["proof"] or []]
        checked += 1
    for path in sorted((VECTORS / "consistency").rglob("happy-path.json")):
        v = _load(path)
        size1, size2 = v["size1"], v["size2"]
        assert root(leaves[:size1]) == _b64(v["root1"])
        assert root(leaves[:size2]) == _b64(v["root2"])
        assert consistency_proof(size1, size2, leaves) == [_b64(p) for p in v["proof"] or []]
        checked += 1
    assert checked >= 8


# --------------------------------------------------------------------------------------------
# A shared tree of MAX leaves with every complete node recorded by CompactRange.append

MAX = 300
LEAVES = [leaf_hash(b"leaf %d" % i) for i in range(MAX)]
NODES: dict[tuple[int, int], bytes] = {}
ROOTS: list[bytes] = [EMPTY_ROOT]
_builder = CompactRange()
for _leaf in LEAVES:
    for _node in _builder.append(_leaf):
        NODES[(_node.level, _node.index)] = _node.hash
    ROOTS.append(_builder.root())


class CountingNodes:
    """get_node over NODES that rejects nodes not complete within ``size`` and counts calls."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.calls = 0

    def __call__(self, level: int, index: int) -> bytes:
        self.calls += 1
        assert level >= 0
        assert index >= 0
        assert (index + 1) << level <= self.size, f"node ({level}, {index}) is not complete"
        return NODES[(level, index)]


def _inclusion_ok(leaf: bytes, index: int, size: int, proof: list[bytes], r: bytes) -> bool:
    try:
        verify_inclusion(leaf, index, size, proof, r)
    except ProofError:
        return False
    return True


def _consistency_ok(size1: int, size2: int, proof: list[bytes], root1: bytes, root2: bytes) -> bool:
    try:
        verify_consistency(size1, size2, proof, root1, root2)
    except ProofError:
        return False
    return True


def test_compact_range_roots_match_reference_for_every_size() -> None:
    for n in range(MAX + 1):
        assert ROOTS[n] == root(LEAVES[:n]), n
        nodes = CountingNodes(n)
        assert root_from_nodes(n, nodes) == ROOTS[n]
        assert nodes.calls == n.bit_count()
        restored = CompactRange.from_nodes(n, CountingNodes(n))
        assert restored.size == n
        assert restored.root() == ROOTS[n]
        if n < MAX:
            restored.append(LEAVES[n])
            assert restored.root() == ROOTS[n + 1]


def test_compact_range_state_and_nodes() -> None:
    cr = CompactRange()
    assert cr.root() == EMPTY_ROOT
    created = cr.extend(LEAVES[:7])
    assert cr.size == 7
    assert len(cr.hashes) == 3
    assert cr.hashes == (NODES[(2, 0)], NODES[(1, 2)], NODES[(0, 6)])
    assert [(n.level, n.index) for n in created] == [
        (0, 0),
        (0, 1),
        (1, 0),
        (0, 2),
        (0, 3),
        (1, 1),
        (2, 0),
        (0, 4),
        (0, 5),
        (1, 2),
        (0, 6),
    ]
    clone = cr.copy()
    clone.append(LEAVES[7])
    assert cr.size == 7
    assert clone.root() == ROOTS[8]
    assert CompactRange(7, cr.hashes).root() == ROOTS[7]
    with pytest.raises(ValueError, match="holds 3 hashes"):
        CompactRange(7, cr.hashes[:2])
    with pytest.raises(ValueError, match="non-negative"):
        CompactRange(-1)
    with pytest.raises(InvalidHashLength):
        cr.append(b"short")


def test_exhaustive_small_trees() -> None:
    """Every inclusion and consistency proof of every tree up to 40 leaves."""
    for n in range(1, 41):
        leaves = LEAVES[:n]
        for i in range(n):
            proof = inclusion_proof(i, leaves)
            nodes = CountingNodes(n)
            assert inclusion_proof_from_nodes(i, n, nodes) == proof, (i, n)
            verify_inclusion(leaves[i], i, n, proof, ROOTS[n])
            if n <= 16:
                for j in range(n):
                    if j != i:
                        assert not _inclusion_ok(leaves[i], j, n, proof, ROOTS[n])
                for s in range(i + 1, 33):
                    ok = _inclusion_ok(leaves[i], i, s, proof, ROOTS[s])
                    assert ok == (inclusion_proof(i, LEAVES[:s]) == proof), (i, n, s)
        for m in range(n + 1):
            proof = consistency_proof(m, n, leaves)
            assert consistency_proof_from_nodes(m, n, CountingNodes(n)) == proof, (m, n)
            verify_consistency(m, n, proof, ROOTS[m], ROOTS[n])


# --------------------------------------------------------------------------------------------
# Property tests

PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
sizes = st.integers(min_value=1, max_value=MAX)


def _flip(value: bytes, bit: int) -> bytes:
    out = bytearray(value)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


@PROPS
@given(size=sizes, data=st.data())
def test_inclusion_properties(size: int, data: st.DataObject) -> None:
    index = data.draw(st.integers(0, size - 1), label="index")
    leaves = LEAVES[:size]
    proof = inclusion_proof(index, leaves)
    nodes = CountingNodes(size)
    assert inclusion_proof_from_nodes(index, size, nodes) == proof
    assert nodes.calls <= 2 * size.bit_length()
    verify_inclusion(leaves[index], index, size, proof, ROOTS[size])

    bit = data.draw(st.integers(0, 255), label="bit")
    assert not _inclusion_ok(_flip(leaves[index], bit), index, size, proof, ROOTS[size])
    assert not _inclusion_ok(leaves[index], index, size, proof, _flip(ROOTS[size], bit))
    if proof:
        k = data.draw(st.integers(0, len(proof) - 1), label="element")
        bad = [*proof[:k], _flip(proof[k], bit), *proof[k + 1 :]]
        assert not _inclusion_ok(leaves[index], index, size, bad, ROOTS[size])
        assert not _inclusion_ok(leaves[index], index, size, proof[:-1], ROOTS[size])
    assert not _inclusion_ok(leaves[index], index, size, [*proof, ROOTS[size]], ROOTS[size])

    # Another index in the same tree: the same leaf and proof never verify there.
    if size > 1:
        other = data.draw(st.integers(0, size - 1).filter(lambda j: j != index), label="other")
        assert not _inclusion_ok(leaves[index], other, size, proof, ROOTS[size])
    assert not _inclusion_ok(leaves[index], size, size, proof, ROOTS[size])
    assert not _inclusion_ok(leaves[index], -1, size, proof, ROOTS[size])

    # Another size, checked against that tree's real root: the proof only verifies if it
    # happens to be that tree's proof too (e.g. the path of leaf 0 is the same in trees of
    # sizes 3 and 4 up to the last element, which then differs).
    new_size = data.draw(st.integers(1, MAX).filter(lambda s: s != size), label="new_size")
    if index < new_size:
        same = inclusion_proof(index, LEAVES[:new_size]) == proof
        ok = _inclusion_ok(leaves[index], index, new_size, proof, ROOTS[new_size])
        assert ok == same


@PROPS
@given(size=sizes, data=st.data())
def test_batched_inclusion_proofs_are_each_leafs_own(size: int, data: st.DataObject) -> None:
    """``inclusion_proofs_from_nodes`` (a commit's receipts, an export's batch) gives each
    leaf the proof ``inclusion_proof_from_nodes`` and the reference builder give it: any
    set of leaves, the last ones a commit appended most of all."""
    last = data.draw(st.integers(1, size), label="last appended")
    picked = data.draw(st.lists(st.integers(0, size - 1), max_size=12), label="others")
    indices = sorted({*range(size - last, size), *picked})
    nodes = CountingNodes(size)
    proofs = inclusion_proofs_from_nodes(indices, size, nodes)
    assert proofs == {i: inclusion_proof(i, LEAVES[:size]) for i in indices}
    for i in indices:
        assert proofs[i] == inclusion_proof_from_nodes(i, size, CountingNodes(size))
    assert inclusion_proofs_from_nodes([], size, nodes) == {}
    with pytest.raises(ValueError, match="out of range"):
        inclusion_proofs_from_nodes([size], size, nodes)


def test_batched_inclusion_proofs_exhaustive_small_trees() -> None:
    """Every leaf of every tree up to 40 leaves, as one batch and as each last run."""
    for n in range(1, 41):
        expected = {i: inclusion_proof(i, LEAVES[:n]) for i in range(n)}
        assert inclusion_proofs_from_nodes(range(n), n, CountingNodes(n)) == expected
        for first in range(n):
            got = inclusion_proofs_from_nodes(range(first, n), n, CountingNodes(n))
            assert got == {i: expected[i] for i in range(first, n)}, (first, n)


@PROPS
@given(size2=sizes, data=st.data())
def test_consistency_properties(size2: int, data: st.DataObject) -> None:
    size1 = data.draw(st.integers(0, size2), label="size1")
    leaves = LEAVES[:size2]
    proof = consistency_proof(size1, size2, leaves)
    nodes = CountingNodes(size2)
    assert consistency_proof_from_nodes(size1, size2, nodes) == proof
    assert nodes.calls <= 3 * size2.bit_length()
    root1, root2 = ROOTS[size1], ROOTS[size2]
    verify_consistency(size1, size2, proof, root1, root2)

    bit = data.draw(st.integers(0, 255), label="bit")
    assert not _consistency_ok(size1, size2, proof, _flip(root1, bit), root2)
    if size1 > 0:  # a proof from the empty tree says nothing about the new root
        assert not _consistency_ok(size1, size2, proof, root1, _flip(root2, bit))
    if proof:
        k = data.draw(st.integers(0, len(proof) - 1), label="element")
        bad = [*proof[:k], _flip(proof[k], bit), *proof[k + 1 :]]
        assert not _consistency_ok(size1, size2, bad, root1, root2)
        assert not _consistency_ok(size1, size2, proof[:-1], root1, root2)
    assert not _consistency_ok(size1, size2, [*proof, root1], root1, root2)
    if root1 != root2:
        assert not _consistency_ok(size1, size2, proof, root2, root1)

    # Other sizes, checked against those trees' real roots: accepted only when the proof
    # happens to be the proof between those sizes too.
    new1 = data.draw(st.integers(0, MAX), label="new_size1")
    new2 = data.draw(st.integers(0, MAX), label="new_size2")
    if (new1, new2) != (size1, size2):
        ok = _consistency_ok(new1, new2, proof, ROOTS[new1], ROOTS[new2])
        same = new1 <= new2 and consistency_proof(new1, new2, LEAVES) == proof
        assert ok == same


@PROPS
@given(size=st.integers(0, MAX))
def test_compact_range_matches_root(size: int) -> None:
    cr = CompactRange()
    cr.extend(LEAVES[:size])
    assert cr.root() == root(LEAVES[:size]) == ROOTS[size]


# --------------------------------------------------------------------------------------------
# Errors


def test_inclusion_errors() -> None:
    leaves = LEAVES[:5]
    proof = inclusion_proof(1, leaves)
    r = ROOTS[5]
    with pytest.raises(IndexOutOfRange, match="out of range"):
        verify_inclusion(leaves[1], 5, 5, proof, r)
    with pytest.raises(IndexOutOfRange):
        verify_inclusion(leaves[1], 0, 0, [], EMPTY_ROOT)
    with pytest.raises(WrongProofSize, match="must have 3 hashes, got 2") as info:
        verify_inclusion(leaves[1], 1, 5, proof[:2], r)
    assert info.value.code == info.value.reason == "wrong-proof-size"
    with pytest.raises(RootMismatch, match="leads to root"):
        verify_inclusion(leaves[2], 1, 5, proof, r)
    with pytest.raises(InvalidHashLength, match="proof\\[1\\] is 31 bytes"):
        verify_inclusion(leaves[1], 1, 5, [proof[0], proof[1][:31], proof[2]], r)
    with pytest.raises(InvalidHashLength, match="root"):
        verify_inclusion(leaves[1], 1, 5, proof, r + b"\x00")
    with pytest.raises(InvalidHashLength, match="leaf hash"):
        verify_inclusion(b"", 1, 5, proof, r)
    with pytest.raises(ValueError, match="out of range"):
        inclusion_proof(5, leaves)
    with pytest.raises(ValueError, match="out of range"):
        inclusion_proof_from_nodes(5, 5, CountingNodes(5))


def test_consistency_errors() -> None:
    proof = consistency_proof(3, 7, LEAVES)
    with pytest.raises(InvalidConsistencyRange, match="size1 <= size2"):
        verify_consistency(7, 3, proof, ROOTS[7], ROOTS[3])
    with pytest.raises(InvalidConsistencyRange):
        verify_consistency(-1, 3, proof, ROOTS[0], ROOTS[3])
    with pytest.raises(WrongProofSize):
        verify_consistency(3, 7, [], ROOTS[3], ROOTS[7])
    with pytest.raises(WrongProofSize, match="must be empty"):
        verify_consistency(7, 7, proof, ROOTS[7], ROOTS[7])
    with pytest.raises(WrongProofSize, match="must be empty"):
        verify_consistency(0, 7, proof, EMPTY_ROOT, ROOTS[7])
    with pytest.raises(RootMismatch, match="different roots"):
        verify_consistency(7, 7, [], ROOTS[7], ROOTS[6])
    with pytest.raises(RootMismatch, match="empty-tree root"):
        verify_consistency(0, 7, [], ROOTS[1], ROOTS[7])
    with pytest.raises(RootMismatch, match="old root"):
        verify_consistency(3, 7, proof, ROOTS[4], ROOTS[7])
    with pytest.raises(RootMismatch, match="new root"):
        verify_consistency(3, 7, proof, ROOTS[3], ROOTS[6])
    with pytest.raises(InvalidHashLength, match="root2"):
        verify_consistency(3, 7, proof, ROOTS[3], b"")
    verify_consistency(0, 0, [], EMPTY_ROOT, EMPTY_ROOT)
    verify_consistency(0, 7, [], EMPTY_ROOT, ROOTS[7])
    with pytest.raises(ValueError, match="size1 <= size2"):
        consistency_proof(4, 3, LEAVES)
    with pytest.raises(ValueError, match="size1 <= size2"):
        consistency_proof_from_nodes(4, 3, CountingNodes(4))
    with pytest.raises(InvalidHashLength):
        root([b"x" * 31])
