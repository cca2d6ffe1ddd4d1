"""The views' statements every face runs as the same text (issue 33): compiled ahead from
their Core definitions (``projections.view_queries``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from projections.view_queries import GENERATED, generate

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
