"""The transparency log's tables: leaves, stored subtree hashes (nodes), signed checkpoints and
the witnesses' cosignatures of them.

One leaf per stored event, unique on both its index and the event's position; every complete
subtree hash, stored once as it is created; one checkpoint per tree size (the primary key:
the ledger can never store two roots for one size); one cosignature per tree size and
witness key, kept apart from the log's own note, which never changes once signed.
``kernelindex db upgrade`` creates them (``ledger.store.schema``).
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
cosignatures = Table(
    "kernelindex_log_cosignatures",
    metadata,
    Column("size", BigInteger, primary_key=True),
    Column("witness", Text, primary_key=True),  # the cosigner key's name
    Column("key_id", Text, primary_key=True),  # its 4-byte key id, hex
    Column("cosigned_at", BigInteger, nullable=False),  # the cosignature's own timestamp
    Column("line", Text, nullable=False),  # the note signature line, as the witness sent it
)
