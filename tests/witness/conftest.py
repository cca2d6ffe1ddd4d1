"""A second database on the test's backend: two ledgers that share an origin and a log key
(a split view) need one each."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from ledger.store.schema import upgrade


@pytest.fixture
def other_db_url(db_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """Another empty ledger database beside ``db_url``, on the same backend."""
    if db_url.startswith("sqlite"):
        url = f"sqlite:///{tmp_path / 'other-ledger.db'}"
        upgrade(url)
        yield url
        return
    server = request.getfixturevalue("pg_server")
    name = f"kernelindex_test_{uuid.uuid4().hex[:16]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        url = make_url(server).set(database=name).render_as_string(hide_password=False)
        upgrade(url)
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
