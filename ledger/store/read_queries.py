"""The reads that run without SQLAlchemy, defined once in Core (issue 33).

A short read command (``kernelindex keys list``) spends most of its time importing
SQLAlchemy. The statements it needs are defined here, over the ledger's own table
definitions (``ledger.store.read_only``, ``ledger.store.schema``), and compiled ahead, per
dialect, into ``ledger.store.read_statements`` (generated: ``python -m
ledger.store.read_queries`` rewrites it; tests/ledger/test_read_statements.py fails when it
differs from what these definitions compile to). Every face runs that text: a command
through the driver (``ledger.store.read_door``), the server on its own connection
(``exec_driver_sql``), so there is one query, not a copy beside it.

Parameters are named (``bindparam``): SQLite's ``:name`` and psycopg's ``%(name)s`` both
take the same dict.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Select, bindparam, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect

from ledger.store.artifacts import artifacts
from ledger.store.log_tables import leaves
from ledger.store.read_only import events_table
from ledger.store.schema import SCHEMA_VERSION, schema_table

GENERATED = Path(__file__).with_name("read_statements.py")


def _schema_version() -> Select[Any]:
    """The schema version stamped in the database (``ledger.store.schema``)."""
    return select(schema_table.c.version).where(schema_table.c.id == 1)


def _key_page() -> Select[Any]:
    """Every stored event of the keys registered after log position ``after`` (at most
    ``limit`` registrations of ``topic``), in log order: a page of the key list and each
    key's events, in one statement. A key's aggregate is its registration's originator."""
    registered = events_table.alias("registered")
    page = (
        select(registered.c.originator_id)
        .where(registered.c.topic == bindparam("topic"), registered.c.id > bindparam("after"))
        .order_by(registered.c.id)
        .limit(bindparam("limit"))
    )
    e = events_table.alias("e")
    return (
        select(e.c.originator_id, e.c.id, e.c.originator_version, e.c.topic, e.c.state)
        .where(e.c.originator_id.in_(page.scalar_subquery()))
        .order_by(e.c.id)
    )


def _aggregate_events() -> Select[Any]:
    """Every stored event of one aggregate, in version order."""
    e = events_table.c
    return (
        select(e.id, e.originator_version, e.topic, e.state)
        .where(e.originator_id == bindparam("aggregate"))
        .order_by(e.originator_version)
    )


# The leaderboard's reads of the ledger's own tables (helper board): a run's ingestion (its
# SOL score is in the run manifest it carries) and the operation's definition artifacts.


def _run_ingestions() -> Select[Any]:
    """The first stored event of each run of ``aggregates``: its ingestion, which carries its
    run manifest (no later event can replace that one: only an implementation or a
    workload can be attached)."""
    e = events_table.c
    return select(e.originator_id, e.id, e.topic, e.state).where(
        e.originator_id.in_(bindparam("aggregates", expanding=True)),
        e.originator_version == 1,
    )


def _named_artifacts() -> Select[Any]:
    """The stored artifacts of ``media_type`` named any of ``names``, by digest."""
    a = artifacts.c
    return (
        select(a.content)
        .where(
            a.media_type == bindparam("media_type"), a.name.in_(bindparam("names", expanding=True))
        )
        .order_by(a.digest)
    )


def _reference_artifacts() -> Select[Any]:
    """At most ``limit`` artifacts of ``media_types`` named any of ``names``, definitions
    first (by media type, then digest)."""
    a = artifacts.c
    return (
        select(a.digest, a.media_type, a.content)
        .where(
            a.media_type.in_(bindparam("media_types", expanding=True)),
            a.name.in_(bindparam("names", expanding=True)),
        )
        .order_by(a.media_type, a.digest)
        .limit(bindparam("limit"))
    )


def _artifact_count() -> Select[Any]:
    """How many artifacts are stored (one more stored: the reference code is looked up
    again). Counted by digest: the text is then long enough that ``ruff format`` keeps the
    generated lines as they are."""
    return select(func.count(artifacts.c.digest).label("stored_artifacts"))


# A run's history and record through the door (issue 33, helper "runs").
def _aggregate_page() -> Select[Any]:
    """A page of one aggregate's events: from version ``start``, at most ``limit``."""
    return (
        _aggregate_events()
        .where(events_table.c.originator_version >= bindparam("start"))
        .limit(bindparam("limit"))
    )


def _aggregate_topics() -> Select[Any]:
    """One aggregate's events of ``topics`` only, in version order."""
    return _aggregate_events().where(events_table.c.topic.in_(bindparam("topics", expanding=True)))


def _aggregate_newest() -> Select[Any]:
    """The ``limit`` newest of one aggregate's events of ``topics``, newest first."""
    e = events_table.c
    return (
        select(e.id, e.originator_version, e.topic, e.state)
        .where(
            e.originator_id == bindparam("aggregate"),
            e.topic.in_(bindparam("topics", expanding=True)),
        )
        .order_by(e.originator_version.desc())
        .limit(bindparam("limit"))
    )


def _aggregate_version() -> Select[Any]:
    """One aggregate's last version (how many events it has): one row, 0 for none."""
    e = events_table.c
    return select(func.coalesce(func.max(e.originator_version), 0)).where(
        e.originator_id == bindparam("aggregate")
    )


def _log_leaves() -> Select[Any]:
    """The transparency log's leaf index of each of these event positions (those sequenced)."""
    return select(leaves.c.position, leaves.c.leaf_index).where(
        leaves.c.position.in_(bindparam("positions", expanding=True))
    )


def _artifact_facts() -> Select[Any]:
    """Digest, name, media type and size of the stored artifacts among ``digests``."""
    t = artifacts.c
    return select(t.digest, t.name, t.media_type, t.size).where(
        t.digest.in_(bindparam("digests", expanding=True))
    )


def _artifact() -> Select[Any]:
    """One stored artifact's media type, name and content."""
    t = artifacts.c
    return select(t.media_type, t.name, t.content).where(t.digest == bindparam("digest"))


# A registry: each statement by name, its Core definition and the parameters it takes.
Queries = dict[str, tuple[Callable[[], Select[Any]], tuple[str, ...]]]

QUERIES: Queries = {
    "schema_version": (_schema_version, ()),
    "key_page": (_key_page, ("topic", "after", "limit")),
    "aggregate_events": (_aggregate_events, ("aggregate",)),
    # The leaderboard (helper board).
    "run_ingestions": (_run_ingestions, ("aggregates",)),
    "named_artifacts": (_named_artifacts, ("media_type", "names")),
    "reference_artifacts": (_reference_artifacts, ("media_types", "names", "limit")),
    "artifact_count": (_artifact_count, ()),
    # A run's history and record through the door (helper "runs").
    "aggregate_page": (_aggregate_page, ("aggregate", "start", "limit")),
    "aggregate_topics": (_aggregate_topics, ("aggregate", "topics")),
    "aggregate_newest": (_aggregate_newest, ("aggregate", "topics", "limit")),
    "aggregate_version": (_aggregate_version, ("aggregate",)),
    "log_leaves": (_log_leaves, ("positions",)),
    "artifact_facts": (_artifact_facts, ("digests",)),
    "artifact": (_artifact, ("digest",)),
}
_PSYCOPG: Any = postgresql.psycopg.dialect  # untyped in SQLAlchemy's stubs
DIALECTS: dict[str, Dialect] = {
    "sqlite": sqlite.dialect(paramstyle="named"),
    "postgresql": _PSYCOPG(paramstyle="pyformat"),
}


def compiled(dialect: str, queries: Queries = QUERIES) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each statement's SQL text in ``dialect`` and the values it fixes itself (a literal
    the compiler binds, such as ``id = 1`` or SQLite's ``OFFSET 0``)."""
    found = {}
    for name, (build, takes) in queries.items():
        statement = build().compile(dialect=DIALECTS[dialect])
        fixed = {k: v for k, v in statement.params.items() if k not in takes}
        if any(fixed[k] is None for k in fixed) or set(takes) - set(statement.params):
            raise ValueError(f"{name}: its parameters are not the ones it declares")
        found[name] = (str(statement), fixed)
    return found


def generate() -> str:
    """The text of ``ledger.store.read_statements`` (as ``ruff format`` leaves it)."""
    return generated_module(
        QUERIES,
        made_by="ledger.store.read_queries",
        tested_by="tests/ledger/test_read_statements.py",
        constants={"SCHEMA_VERSION": SCHEMA_VERSION},
    )


def generated_module(
    queries: Queries, *, made_by: str, tested_by: str, constants: dict[str, int]
) -> str:
    """A module of ``queries`` compiled for every dialect, as ``STATEMENTS`` (and the
    version ``constants`` they were written for), made by ``python -m MADE_BY``."""
    lines = [
        "# ruff: noqa: E501",
        f'"""Generated by ``python -m {made_by}`` from its Core definitions: do',
        f'not edit ({tested_by} compares it with them)."""',
        "",
        "from typing import Any",
        "",
        *(f"{name} = {value}" for name, value in constants.items()),
        "",
        "# dialect -> statement name -> (SQL text, the values it fixes itself)",
        "STATEMENTS: dict[str, dict[str, tuple[str, dict[str, Any]]]] = {",
    ]
    for dialect in DIALECTS:
        lines.append(f"    {_quoted(dialect)}: {{")
        for name, (sql, fixed) in compiled(dialect, queries).items():
            lines.append(f"        {_quoted(name)}: (")
            parts = sql.split("\n")
            for at, part in enumerate(parts):
                last = at == len(parts) - 1
                lines.append(
                    f"            {_quoted(part if last else part + chr(10))}"
                    + ("," if last else "")
                )
            values = ", ".join(f"{_quoted(k)}: {_literal(v)}" for k, v in fixed.items())
            lines.append(f"            {{{values}}},")
            lines.append("        ),")
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _literal(value: Any) -> str:
    return _quoted(value) if isinstance(value, str) else repr(value)


def _quoted(text: str) -> str:
    """A string literal as ``ruff format`` writes it: double quotes, unless the text holds
    a double quote and no single one (a quoted identifier, PostgreSQL's or SQLite's)."""
    quoted = json.dumps(text)
    if '"' in text and "'" not in text:
        return "'" + quoted[1:-1].replace('\\"', '"') + "'"
    return quoted


if __name__ == "__main__":
    GENERATED.write_text(generate(), "utf-8")
    sys.stdout.write(f"wrote {GENERATED}\n")
