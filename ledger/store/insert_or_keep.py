"""An INSERT that keeps the row already stored under the same key (ON CONFLICT DO NOTHING),
for the dialect a session talks to.

Built on first use per (table, dialect), so a process loads only the dialect module it
talks to: ``kernelindex show`` on SQLite loads no PostgreSQL code."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Insert, Table

_BUILT: dict[tuple[str, str, tuple[str, ...]], Insert] = {}


def insert_or_keep(table: Table, dialect: str, keys: Sequence[str]) -> Insert:
    """``table``'s insert that leaves a row whose ``keys`` are taken as it is (a plain
    insert on a dialect with no such clause)."""
    cache_key = (table.name, dialect, tuple(keys))
    found = _BUILT.get(cache_key)
    if found is None:
        if dialect == "postgresql":
            from sqlalchemy.dialects import postgresql  # noqa: PLC0415

            found = postgresql.insert(table).on_conflict_do_nothing(index_elements=list(keys))
        elif dialect == "sqlite":
            from sqlalchemy.dialects import sqlite  # noqa: PLC0415

            found = sqlite.insert(table).on_conflict_do_nothing(index_elements=list(keys))
        else:
            found = table.insert()
        _BUILT[cache_key] = found
    return found
