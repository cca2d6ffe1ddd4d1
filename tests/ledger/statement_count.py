"""The SQL a block of code sends to a database, caught at the engine (SQLAlchemy's
``before_cursor_execute``), and the statements among it that write or take a write lock."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

# What a statement that writes, or waits for writers, starts with: SQLite takes its write
# lock with BEGIN IMMEDIATE (or EXCLUSIVE), PostgreSQL's writers with LOCK TABLE or an
# advisory lock; REPLACE, CREATE and DROP write too.
_WRITING = (
    "INSERT",
    "UPDATE",
    "DELETE",
    "REPLACE",
    "CREATE",
    "DROP",
    "BEGIN IMMEDIATE",
    "BEGIN EXCLUSIVE",
    "LOCK ",
    "SELECT PG_ADVISORY",
)


@contextmanager
def statements_sent(engine: Engine) -> Iterator[list[str]]:
    """Every statement sent on ``engine`` inside the block, in order."""
    sent: list[str] = []

    def capture(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
    ) -> None:
        sent.append(statement)

    event.listen(engine, "before_cursor_execute", capture)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", capture)


def writing(sent: list[str]) -> list[str]:
    """The statements among ``sent`` that write or take a write lock."""
    return [s for s in sent if s.lstrip().upper().startswith(_WRITING)]
