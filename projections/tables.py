"""Read-model tables, in the same database as the events they are built from.

The read models own their tables: they are a function of the log, so a change to them is
made by dropping them and folding the log again, never by a migration of the ledger's
schema (``ledger/store/schema.py`` knows nothing of them). ``VIEWS_VERSION`` is stamped in
``kernelindex_view_schema``; :func:`ensure_views` creates the tables where missing and, when
the stamp is not this build's, drops and recreates them all, so the next catch-up refolds."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    insert,
    inspect,
    select,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.schema import CreateTable

metadata = MetaData()

# Bump when a table or what is folded into it changes: every view is then refolded once.
# 3: the views of ledger schema version 3 (manifests by digest), the first stamped here.
# 4: evidence-v2 (a rerun counts only for a job bound to its run's code, issue 32).
# 5: the records view (each group's #1 history, kept by the fold).
# 6: records dated (the source's date, else the admission time) and walked in date order;
#    the runs view indexed by author, the records by run (the registry's pages).
# 7: the runs view names each run's implementation by digest, indexed (search's license
#    and installable facets read its manifest; a project's runs are found by it).
VIEWS_VERSION = 7

runs = Table(
    "kernelindex_view_runs",
    metadata,
    Column("run_digest", String(71), primary_key=True),
    Column("name", Text, nullable=False),
    Column("title", Text),
    Column("source", Text, nullable=False),
    Column("external_id", Text),
    Column("benchmark", Text),
    Column("status", Text, nullable=False),
    Column("comparison_key", String(71)),
    Column("metric", Text, nullable=False),
    Column("statistic", Text),
    Column("unit", Text),
    Column("claimed", Float),
    Column("product", Text),
    Column("architecture", Text),
    Column("observed_at", Text),
    Column("protocol_digest", String(71)),
    Column("environment_digest", String(71)),
    Column("workload_digest", String(71)),
    Column("author", Text),
    Column("implementation_digest", String(71)),
    Column("ingested_position", BigInteger, nullable=False),
    Column("ingested_at", Text, nullable=False),
    Column("retracted", Boolean, nullable=False),
    Column("superseded_by", Text),
    Column("attestations", Integer, nullable=False),
    Column("reruns", Integer, nullable=False),
    Column("evidence_level", Text, nullable=False),
    Column("evidence_order", Integer, nullable=False),
    Column("evidence_reasons", Text, nullable=False),
    Column("evidence_caused_by", BigInteger, nullable=False),
    Column("policy_version", Text, nullable=False),
    Column("rerun_median_ns", Float),
    Column("rerun_ci95_low", Float),
    Column("rerun_ci95_high", Float),
    Column("last_position", BigInteger, nullable=False),
    Index("kernelindex_view_runs_group", "comparison_key"),
    Index("kernelindex_view_runs_product", "product", "benchmark"),
    Index("kernelindex_view_runs_author", "author"),
    Index("kernelindex_view_runs_implementation", "implementation_digest"),
)

ranks = Table(
    "kernelindex_view_ranks",
    metadata,
    Column("run_digest", String(71), primary_key=True),
    Column("view", String(20), primary_key=True),
    Column("comparison_key", String(71), nullable=False),
    Column("rank", Integer, nullable=False),
    Column("of_count", Integer, nullable=False),
    Column("value", Float, nullable=False),
    Column("tied_with", Text, nullable=False),
    Column("policy_version", Text, nullable=False),
    Index("kernelindex_view_ranks_board", "comparison_key", "view", "rank"),
)

# Every time a run took #1 in its group (``projections.records.record_history``), rewritten
# with the group's ranks: the records timeline reads a page of it, not every run. ``at`` is
# the date the record is dated by, ``dated`` says what that date is ("observed": the
# source's date of the run; "admitted": the ledger's admission, the source having given none).
records = Table(
    "kernelindex_view_records",
    metadata,
    Column("comparison_key", String(71), primary_key=True),
    Column("position", BigInteger, primary_key=True),
    Column("run_digest", String(71), nullable=False),
    Column("value", Float, nullable=False),
    Column("previous_run", String(71)),
    Column("previous_value", Float),
    Column("withdrawn", String(20)),
    Column("at", String(30), nullable=False),
    Column("dated", String(10), nullable=False),
    Index("kernelindex_view_records_position", "position"),
    Index("kernelindex_view_records_timeline", "at", "position"),
    # A GPU's or an author's records: their runs' records, found by run.
    Index("kernelindex_view_records_run", "run_digest"),
)

# Groups whose ranks are stale: marked in the batch that changed them, cleared when re-ranked
# (so a crash between the two leaves the mark, and the next catch-up re-ranks).
stale_groups = Table(
    "kernelindex_view_stale_groups",
    metadata,
    Column("comparison_key", String(71), primary_key=True),
)

tracking = Table(
    "kernelindex_view_tracking",
    metadata,
    Column("name", String(50), primary_key=True),
    Column("position", BigInteger, nullable=False),
)

# Every manifest the admitted events carry, by digest (first event that carried it): what
# lets an ingestion or an attachment name a workload the ledger already holds.
manifests = Table(
    "kernelindex_view_manifests",
    metadata,
    Column("digest", String(71), primary_key=True),
    Column("role", String(20), nullable=False),
    Column("kind", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("document", Text, nullable=False),
    Column("position", BigInteger, nullable=False),
)

VIEW_TABLES = (runs, ranks, records, manifests)


view_schema = Table(
    "kernelindex_view_schema",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("version", Integer, nullable=False),
)


def views_current(conn: Connection) -> bool:
    """Whether the views are as this build folds them, every index made: what
    ``ensure_views`` would leave as it is. Reads only, so it needs no lock."""
    inspector = inspect(conn)
    if not inspector.has_table(view_schema.name):
        return False
    stamped = conn.execute(select(view_schema.c.version).where(view_schema.c.id == 1)).first()
    if stamped is None or int(stamped[0]) != VIEWS_VERSION:
        return False
    for table in VIEW_TABLES:
        made = {index["name"] for index in inspector.get_indexes(table.name)}
        if any(index.name not in made for index in table.indexes):
            return False
    return True


def ensure_views(conn: Connection) -> bool:
    """The read-model tables as this build folds them, in ``conn``'s transaction (the caller
    serialises concurrent callers): created where missing, or all dropped and created again
    when their stamp is another build's. True when the views are new (nothing is folded).
    An index a rebuild had not made yet when it stopped is made here."""
    if inspect(conn).has_table(view_schema.name):
        stamped = conn.execute(select(view_schema.c.version).where(view_schema.c.id == 1)).first()
        if stamped is not None and int(stamped[0]) == VIEWS_VERSION:
            # As this build made them. A table dropped since is damage for an operator to see
            # (kernelindex db status), not to paper over with an empty one.
            create_indexes(conn, VIEW_TABLES)
            return False
    recreate_views(conn)
    return True


def recreate_views(conn: Connection, *, indexed: bool = True) -> None:
    """Every read-model table dropped and made empty, stamped as this build's: the next
    catch-up folds the whole log into them. ``indexed=False`` leaves out the secondary
    indexes of the views (a rebuild makes each once its rows are in: ``create_indexes``)."""
    metadata.drop_all(conn, checkfirst=True)
    if indexed:
        metadata.create_all(conn)
    else:
        for table in metadata.sorted_tables:
            conn.execute(CreateTable(table))
    conn.execute(view_schema.insert().values(id=1, version=VIEWS_VERSION))


def create_indexes(conn: Connection, tables: Iterable[Table]) -> None:
    """The secondary indexes of ``tables`` that are missing, made."""
    for table in tables:
        for index in sorted(table.indexes, key=lambda i: str(i.name)):
            index.create(conn, checkfirst=True)


# --- positional inserts (SQLite) ---------------------------------------------------------------

RowMaker = Callable[[dict[str, Any]], tuple[Any, ...]]
_INSERTS: dict[tuple[Table, str], tuple[str, RowMaker]] = {}


def _positional(table: Table, dialect: Dialect) -> tuple[str, RowMaker]:
    key = (table, dialect.name)
    found = _INSERTS.get(key)
    if found is None:
        compiled = insert(table).compile(dialect=dialect)
        if not compiled.positional or compiled.positiontup is None:
            raise ValueError(f"{dialect.name} does not take positional parameters")
        order = list(compiled.positiontup)
        convert = [
            (index, processor)
            for index, name in enumerate(order)
            if (processor := table.c[name].type.bind_processor(dialect)) is not None
        ]
        values = operator.itemgetter(*order)

        def row_of(row: dict[str, Any]) -> tuple[Any, ...]:
            item = values(row)
            if len(order) == 1:
                item = (item,)
            if not convert:
                return tuple(item)
            converted = list(item)
            for index, processor in convert:
                converted[index] = processor(converted[index])
            return tuple(converted)

        found = _INSERTS[key] = (str(compiled), row_of)
    return found


def positional_insert(table: Table, dialect: Dialect) -> str:
    """``INSERT`` of every column of ``table``, as ``dialect`` writes it with positional
    parameters (SQLite), for rows made by :func:`positional_rows`."""
    return _positional(table, dialect)[0]


def positional_rows(table: Table, dialect: Dialect) -> RowMaker:
    """A row of ``table`` (a dict of every column) as the driver takes it: the values in
    parameter order, each converted by its column's bind processor, as SQLAlchemy would."""
    return _positional(table, dialect)[1]
