"""Fixtures for the HTTP API: a demo ledger on each backend and a Litestar test client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from served_app import Served, serve

from api.demo import build_demo
from ledger.home import LedgerHome
from ledger.writer_process import WriterProcess


@pytest.fixture
def served(db_url: str, tmp_path: Path) -> Iterator[Served]:
    """The demo ledger (seed run, its cohort, an attester) behind the API, per backend."""
    yield from serve(LedgerHome.at(tmp_path / "home", db_url))


@pytest.fixture
def served_sqlite(tmp_path: Path) -> Iterator[Served]:
    yield from serve(LedgerHome.at(tmp_path / "home"))


@pytest.fixture
def writer(db_url: str, tmp_path: Path) -> Iterator[tuple[WriterProcess, LedgerHome, str]]:
    """A writer process over the demo's ledger: (the process, its home, the seed run)."""
    home = LedgerHome.at(tmp_path / "home", db_url)
    ledger, seed = build_demo(home)
    ledger.close()
    process = WriterProcess(home.path, home.db_url).start()
    try:
        yield process, home, seed
    finally:
        process.stop()
