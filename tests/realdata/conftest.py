"""One ledger holding the whole KernelIndex catalog and every source fixture, with the seed
run ingested as the README says: the ledger a new user has (issue 14). Built once per
session (the catalog import takes minutes), on SQLite; the tests here are ``slow``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from real_ledger import CATALOG, SOURCES, RealLedger

from tests.cli_session import Cli


@pytest.fixture(scope="session")
def real(tmp_path_factory: pytest.TempPathFactory, shared: Path) -> Iterator[RealLedger]:
    base = tmp_path_factory.mktemp("real")
    cli = Cli(base / "home", f"sqlite:///{base / 'ledger.db'}")
    cli("init")
    reports = {"kernelindex-catalog": cli.json("import", "kernelindex-catalog", shared / CATALOG)}
    for kind, target in SOURCES:
        reports[target] = cli.json("import", kind, shared / target)
    cli("ingest", shared / "fixtures/seed/run-38823.manifest.json")
    yield RealLedger(cli, base / "home", reports)
