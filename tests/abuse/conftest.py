"""Fixtures for the abuse tests (helpers live in abuse_support, imported by name)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from abuse_support import Served, serve

from ledger.home import LedgerHome


@pytest.fixture
def served(db_url: str, tmp_path: Path) -> Iterator[Served]:
    """The demo ledger (seed run, its cohort, an attester) behind the API, per backend."""
    yield from serve(LedgerHome.at(tmp_path / "home", db_url))
