"""Reading the stored tree's nodes for a root or proof computation, in one query."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

from ledger.errors import LogIntegrityError
from ledger.store.driver_rows import dialect_of, select_rows
from ledger.store.event_store import StoreSession
from ledger.store.log_tables import nodes

T = TypeVar("T")
NodeKey = tuple[int, int]  # (level, index)
_ZERO = b"\x00" * 32
# How many indices of each level asked for, in level order: the shape of one node query's
# text (the levels themselves are parameters).
Shape = tuple[int, ...]
# A shape of more nodes than this (an export's batch of scattered proofs) is built each
# time: kept, 1,024 such texts of up to ~24 KB would crowd out the few hot proof shapes.
_KEPT_NODES = 64


def nodes_sql(dialect: str, shape: Shape) -> str:
    """The node query of ``shape``, in the driver's parameter style: one equality-plus-IN
    term per level, which both SQLite and PostgreSQL answer from the primary key. (A
    row-value IN ((level, idx), ...) made SQLite scan the whole node table, so every append
    cost O(n) instead of O(log n).) Built once per shape and handed to the driver: building
    the same select through SQLAlchemy's expression language, its cache key and its
    compiled form cost ~1 ms a proof, ~20x SQLite's own work for its ~17 rows (growth
    benchmark, issue 36). Proofs of one tree size share a shape, so few texts are made."""
    if sum(shape) > _KEPT_NODES:
        return _nodes_sql(dialect, shape)
    return _kept_nodes_sql(dialect, shape)


def _nodes_sql(dialect: str, shape: Shape) -> str:
    mark = "?" if dialect == "sqlite" else "%s"
    terms = " OR ".join(
        f"(level = {mark} AND idx IN ({', '.join([mark] * count)}))" for count in shape
    )
    return f"SELECT level, idx, hash FROM {nodes.name} WHERE {terms}"  # noqa: S608 - constants


_kept_nodes_sql = functools.lru_cache(maxsize=1024)(_nodes_sql)


def read_nodes(session: StoreSession, wanted: set[tuple[int, int]]) -> dict[NodeKey, bytes]:
    """The stored hashes of the nodes ``wanted`` that are stored, in one query (the caller
    says what a missing one means)."""
    if not wanted:
        return {}
    by_level: dict[int, list[int]] = {}
    for level, index in sorted(wanted):
        by_level.setdefault(level, []).append(index)
    shape = tuple(len(indices) for indices in by_level.values())
    params = tuple(v for level, indices in by_level.items() for v in (level, *indices))
    rows = select_rows(session, nodes_sql(dialect_of(session), shape), params)
    return {(int(r[0]), int(r[1])): bytes(r[2]) for r in rows}


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
        found.update(read_nodes(session, set(wanted)))

    def lookup(level: int, index: int) -> bytes:
        try:
            return found[(level, index)]
        except KeyError:
            raise LogIntegrityError(f"stored tree node ({level}, {index}) is missing") from None

    return compute(lookup)
