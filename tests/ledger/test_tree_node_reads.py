"""The stored tree's node reads (``ledger.store.tree_nodes``), handed to the driver as SQL
text built per query shape, give exactly what the RFC 6962 reference builds from the leaf
hashes in memory: roots, inclusion proofs (one and a batch) and consistency proofs, for any
tree size and leaves, on SQLite and PostgreSQL; a node not stored is refused, never guessed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection

from ledger.errors import LogIntegrityError
from ledger.proofs.merkle import (
    consistency_proof,
    consistency_proof_from_nodes,
    inclusion_proof,
    inclusion_proof_from_nodes,
    inclusion_proofs_from_nodes,
    leaf_hash,
    node_hash,
    root,
    root_from_nodes,
)
from ledger.store.log_tables import metadata, nodes
from ledger.store.tree_nodes import nodes_sql, read_nodes, with_prefetch

FULL = 300  # leaves of the stored tree; every smaller tree's complete nodes are a prefix
LEAVES = [leaf_hash(hashlib.sha256(str(i).encode()).digest()) for i in range(FULL)]


def _complete_nodes() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    level, hashes = 0, list(LEAVES)
    while hashes:
        rows.extend({"level": level, "idx": i, "hash": h} for i, h in enumerate(hashes))
        hashes = [node_hash(hashes[i], hashes[i + 1]) for i in range(0, len(hashes) - 1, 2)]
        level += 1
    return rows


@pytest.fixture
def stored(empty_db_url: str) -> Iterator[Connection]:
    """A node table holding every complete subtree of a tree of ``FULL`` leaves."""
    engine = create_engine(empty_db_url)
    metadata.create_all(engine, tables=[nodes])
    with engine.begin() as conn:
        conn.execute(nodes.insert(), _complete_nodes())
    try:
        with engine.connect() as conn:
            yield conn
            conn.rollback()
    finally:
        engine.dispose()


PROPERTY = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@PROPERTY
@given(data=st.data())
def test_driver_node_reads_equal_the_reference(stored: Connection, data: st.DataObject) -> None:
    size = data.draw(st.integers(1, FULL), label="size")
    prefix = LEAVES[:size]
    assert with_prefetch(stored, lambda get: root_from_nodes(size, get)) == root(prefix)
    leaf = data.draw(st.integers(0, size - 1), label="leaf")
    proof = with_prefetch(stored, lambda get: inclusion_proof_from_nodes(leaf, size, get))
    assert proof == inclusion_proof(leaf, prefix)
    batch = sorted(set(data.draw(st.lists(st.integers(0, size - 1), max_size=8), label="batch")))
    proofs = with_prefetch(stored, lambda get: inclusion_proofs_from_nodes(batch, size, get))
    assert proofs == {i: inclusion_proof(i, prefix) for i in batch}
    old = data.draw(st.integers(1, size), label="old")
    found = with_prefetch(stored, lambda get: consistency_proof_from_nodes(old, size, get))
    assert found == consistency_proof(old, size, prefix)


def test_a_node_not_stored_is_refused(stored: Connection) -> None:
    """Beyond the stored tree the read finds nothing, and says so."""
    with pytest.raises(LogIntegrityError, match="missing"):
        with_prefetch(stored, lambda get: root_from_nodes(FULL + 5, get))


def test_one_text_per_shape_with_its_parameters_in_order() -> None:
    sql = nodes_sql("sqlite", (2, 1))
    assert sql.endswith("WHERE (level = ? AND idx IN (?, ?)) OR (level = ? AND idx IN (?))")
    assert nodes_sql("postgresql", (1,)).endswith("WHERE (level = %s AND idx IN (%s))")
    assert nodes_sql("sqlite", (2, 1)) is sql  # built once
    large = (40, 40)  # an export batch's shape: built each time, not kept
    assert nodes_sql("sqlite", large) == nodes_sql("sqlite", large)
    assert nodes_sql("sqlite", large) is not nodes_sql("sqlite", large)


def test_no_nodes_wanted_reads_nothing() -> None:
    assert read_nodes(None, set()) == {}  # type: ignore[arg-type] - no session is touched
