"""A read command's quick door: the service's driver reads (``api.service.driver_reads``)
over the home's ledger, where they can answer; None where the command must take the full
path (``api.cli.service.local_service``), which then says what is wrong, if anything.

Imports nothing of the database stack: that is the point of it (issue 33).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from api.service.driver_reads import DriverReads, driver_reads
from ledger.home import LedgerHome


@contextmanager
def quick_reads(
    home: Path | None, db: str | None, *, views: bool = False
) -> Iterator[DriverReads | None]:
    """The driver's reads (``views``: of fresh views too), or None: take the full path."""
    ledger_home = LedgerHome.at(home, db)
    if not ledger_home.exists:  # the full path refuses it, in its words
        yield None
        return
    with driver_reads(ledger_home.db_url, ledger_home.trust_root(), views=views) as reads:
        yield reads
