"""The views' statements every face runs as the same text (issue 33): compiled ahead from
their Core definitions (``projections.view_queries``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from ledger.store.read_door import SessionRows, open_driver
from projections.tables import manifests
from projections.view_queries import GENERATED, generate
from projections.view_statements import STATEMENTS

REPO = Path(__file__).resolve().parents[2]


def test_the_generated_view_statements_are_what_the_core_definitions_compile_to() -> None:
    """A change to a view table or to one of these queries that is not regenerated
    (``python -m projections.view_queries``) fails here, not in a read."""
    assert GENERATED.read_text("utf-8") == generate()


def test_the_reads_of_the_generated_statements_load_no_database_stack() -> None:
    """What a short command reading through the driver imports of the views' reads: no
    SQLAlchemy, eventsourcing, psycopg, table definition or Core query module."""
    probe = (
        "import sys, projections.view_reads; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'sqlalchemy', 'eventsourcing', 'eventsourcing_sqlalchemy', 'psycopg', 'litestar'} "
        "or m in {'projections.tables', 'projections.queries', 'projections.view_queries', "
        "'ledger.store.event_store'}); "
        "print(' '.join(bad))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert result.stdout.strip() == ""


def test_an_in_list_runs_alike_through_the_driver_and_a_session(db_url: str) -> None:
    """A list parameter (an expanding ``IN``) is one value a parameter on either door, on
    SQLite and PostgreSQL; an empty one is refused before anything runs."""
    engine = create_engine(db_url)
    kept = [
        {"digest": f"sha256:{n:064x}", "role": "workload", "kind": "Workload", "name": f"w{n}"}
        | {"document": json.dumps({"n": n}), "position": n}
        for n in range(1, 5)
    ]
    with engine.begin() as conn:
        conn.execute(manifests.insert(), kept)
    wanted = [kept[0]["digest"], kept[2]["digest"], "sha256:absent"]
    door = open_driver(db_url)
    assert door is not None
    try:
        with engine.connect() as conn:
            found = [
                sorted(tuple(r) for r in rows.run(STATEMENTS, "manifest_documents", digests=wanted))
                for rows in (door, SessionRows(conn))
            ]
        with pytest.raises(ValueError, match="IN list digests is empty"):
            door.run(STATEMENTS, "manifest_documents", digests=[])
    finally:
        door.close()
        engine.dispose()
    assert (
        found[0]
        == found[1]
        == [
            (kept[0]["digest"], "w1", '{"n": 1}'),
            (kept[2]["digest"], "w3", '{"n": 3}'),
        ]
    )
