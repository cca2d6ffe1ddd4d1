"""The transparency log's tables: leaves, stored subtree hashes (nodes) and signed checkpoints.

One leaf per stored event, unique on both its index and the event's position; every complete
subtree hash, stored once as it is created; one checkpoint per tree size (the primary key:
the ledger can never store two roots for one size). ``kernelindex db upgrade`` creates them
(``ledger.store.schema``).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Integer, LargeBinary, MetaData, SmallInteger, Table, Text

metadata = MetaData()
leaves = Table(
    "kernelindex_log_leaves",
    metadata,
    Column("leaf_index", BigInteger().with_variant(Integer(), "sqlite"), primary_key=True),
    Column("position", BigInteger, nullable=False, unique=True),
    Column("leaf_hash", LargeBinary, nullable=False),
)
nodes = Table(
    "kernelindex_log_nodes",
    metadata,
    Column("level", SmallInteger, primary_key=True),
    Column("idx", BigInteger, primary_key=True),
    Column("hash", LargeBinary, nullable=False),
)
checkpoints = Table(
    "kernelindex_log_checkpoints",
    metadata,
    Column("size", BigInteger, primary_key=True),
    Column("root", LargeBinary, nullable=False),
    Column("note", Text, nullable=False),
    Column("signed_at", Text, nullable=False),
)
