"""Fixtures for the HTTP API: a demo ledger on each backend and a Litestar test client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from served_app import Served, serve

from ledger.home import LedgerHome


@pytest.fixture
def served(db_url: str, tmp_path: Path) -> Iterator[Served]:
    """The demo ledger (seed run, its cohort, an attester) behind the API, per backend."""
    yield from serve(LedgerHome.at(tmp_path / "home", db_url))


@pytest.fixture
def served_sqlite(tmp_path: Path) -> Iterator[Served]:
    yield from serve(LedgerHome.at(tmp_path / "home"))
