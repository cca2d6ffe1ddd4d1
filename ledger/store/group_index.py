"""The ledger's own index of comparison-group membership, for heads (``ledger.proofs.heads``).

A bundle that claims a rank must prove it holds every member of the group, so the log must
say who the members were at a checkpoint. Membership is a function of each run's ingestion
(``domain.run_facts.comparison_key_of``); the ledger records it in the transaction that
stores the ingestion, so the index is exactly as old as the log, never a projection's lag.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import BigInteger, Column, Index, MetaData, Table, Text, select

from ledger.store.event_store import StoreSession
from ledger.store.transparency_log import leaves

metadata = MetaData()
group_members = Table(
    "kernelindex_group_members",
    metadata,
    Column("run_digest", Text, primary_key=True),
    Column("comparison_key", Text, nullable=False),
    Column("position", BigInteger, nullable=False),  # the ingestion's event position
    Index("kernelindex_group_members_key", "comparison_key"),
)


def record_members(session: StoreSession, rows: Sequence[tuple[str, str, int]]) -> None:
    """(run digest, comparison key, ingestion position) of runs ingested in this transaction."""
    if rows:
        session.execute(
            group_members.insert(),
            [{"run_digest": r, "comparison_key": k, "position": p} for r, k, p in rows],
        )


def group_of(session: StoreSession, run_digest: str) -> str | None:
    return session.execute(
        select(group_members.c.comparison_key).where(group_members.c.run_digest == run_digest)
    ).scalar()


def members_at(session: StoreSession, comparison_key: str, size: int) -> list[str]:
    """The runs of a group whose ingestion is among the first ``size`` leaves of the log."""
    rows = session.execute(
        select(group_members.c.run_digest)
        .join(leaves, leaves.c.position == group_members.c.position)
        .where(group_members.c.comparison_key == comparison_key, leaves.c.leaf_index < size)
        .order_by(group_members.c.run_digest)
    )
    return [str(r) for r in rows.scalars()]
