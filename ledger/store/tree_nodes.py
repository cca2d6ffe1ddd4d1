"""Reading the stored tree's nodes for a root or proof computation, in one query."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import and_, or_, select

from ledger.errors import LogIntegrityError
from ledger.store.event_store import StoreSession
from ledger.store.log_tables import nodes

T = TypeVar("T")
NodeKey = tuple[int, int]  # (level, index)
_ZERO = b"\x00" * 32


def with_prefetch(
    session: StoreSession,
    compute: Callable[[Callable[[int, int], bytes]], T],
    known: dict[NodeKey, bytes] | None = None,
) -> T:
    """Run a proof/root computation with all its node lookups fetched in one query (none for
    the nodes in ``known``: those this transaction wrote).

    The computations choose which nodes to read from sizes and indices only, never from hash
    values, so a dry run with placeholder hashes names exactly the nodes needed.
    """
    held = known or {}
    if held:
        # Most often (a group's receipts) the nodes held are all it needs: compute once,
        # looking each up in the dict itself (the computations are pure arithmetic over the
        # nodes: a KeyError is a node not held, then they are read below).
        try:
            return compute(lambda level, index: held[(level, index)])
        except KeyError:
            pass
    wanted: list[tuple[int, int]] = []

    def record(level: int, index: int) -> bytes:
        if (level, index) not in held:
            wanted.append((level, index))
        return _ZERO

    compute(record)
    found: dict[tuple[int, int], bytes] = dict(held)
    if wanted:
        by_level: dict[int, set[int]] = {}
        for level, index in wanted:
            by_level.setdefault(level, set()).add(index)
        # One equality-plus-IN term per level: both SQLite and PostgreSQL answer it from the
        # primary key. A row-value IN ((level, idx), ...) made SQLite scan the whole node
        # table, so every append cost O(n) instead of O(log n).
        rows = session.execute(
            select(nodes.c.level, nodes.c.idx, nodes.c.hash).where(
                or_(
                    *(
                        and_(nodes.c.level == level, nodes.c.idx.in_(sorted(indices)))
                        for level, indices in sorted(by_level.items())
                    )
                )
            )
        )
        found.update({(r[0], r[1]): bytes(r[2]) for r in rows})

    def lookup(level: int, index: int) -> bytes:
        try:
            return found[(level, index)]
        except KeyError:
            raise LogIntegrityError(f"stored tree node ({level}, {index}) is missing") from None

    return compute(lookup)
