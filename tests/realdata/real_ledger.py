"""The real-data ledger the tests of this folder share (built by conftest.py)."""

from __future__ import annotations

from pathlib import Path

from ledger.application import Ledger
from ledger.home import LedgerHome
from tests.cli_session import Cli

CATALOG = "fixtures/kernelindex-catalog/catalog-2026-08-16-0022af0b.jsonl.zst"
SOURCES = [
    ("sol-leaderboard", "fixtures/sol-leaderboard"),
    ("flashinfer-trace", "fixtures/flashinfer-trace"),
    ("gpumode", "fixtures/gpumode/fp8-mm-top.json"),
    *(
        ("sol-execbench", f"fixtures/sol-execbench/{name}")
        for name in ("cuda_cpp-rmsnorm", "cuda_cpp-flux_rope", "triton-rmsnorm")
    ),
]


class RealLedger:
    def __init__(self, cli: Cli, home: Path, reports: dict[str, dict[str, object]]) -> None:
        self.cli = cli
        self.home = home
        self.reports = reports  # the first import of each source, as `--json` printed it

    def open(self) -> Ledger:
        return LedgerHome.at(self.home, self.cli.db_url).open()
