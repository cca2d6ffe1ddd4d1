"""The service's reads that run through the database driver alone (issue 33).

A short command that asks only these opens no SQLAlchemy, no eventsourcing application and
no read models: its statements are compiled ahead (``ledger.store.read_statements``) and run
on a ``sqlite3`` or psycopg connection (``ledger.store.read_door``). Each read is the same
function the full service calls (``Keys.list_page`` runs ``key_page`` on its own
connection), so both answer alike. Where the door cannot open the ledger exactly as the full
stack reads it (another URL, a schema to upgrade), ``driver_reads`` yields None and the
command takes the full path, which opens, or refuses, the ledger as it always did.

The key list reads the event table alone. A read of the views asks for them (``views=True``)
and gets the door only where they are fresh (``projections.view_reads.views_fresh``): where a
command's catch-up would fold or re-rank something first, the full path does that.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from api.service.driver_boards import DriverBoards
from api.service.driver_runs import DriverRuns
from api.service.driver_search import DriverSearch
from api.service.key_pages import LIMIT, VerifiedKeys, key_page, verified_key_page
from api.service.models.keys import KeyList
from ledger.signing.trust import TrustRoot
from ledger.store.read_door import Rows, open_driver


class DriverKeys:
    """``api.service.keys.Keys``'s pages, read through the driver."""

    def __init__(self, rows: Rows, trust_root: TrustRoot) -> None:
        self.rows = rows
        self.trust_root = trust_root

    def list_page(self, cursor: str | None = None, limit: int = LIMIT) -> KeyList:
        return key_page(self.rows, cursor, limit)

    def verified_page(self, cursor: str | None = None, limit: int = LIMIT) -> VerifiedKeys:
        return verified_key_page(self.rows, self.trust_root, cursor, limit)


class DriverReads:
    """The reads a command makes through the driver (``LedgerService``'s, by feature)."""

    def __init__(self, rows: Rows, trust_root: TrustRoot) -> None:
        self.keys = DriverKeys(rows, trust_root)
        self.boards = DriverBoards(rows)
        self.runs = DriverRuns(rows, trust_root)
        self.search = DriverSearch(rows)


@contextmanager
def driver_reads(
    url: str, trust_root: TrustRoot, *, views: bool = False
) -> Iterator[DriverReads | None]:
    """The driver's reads of the ledger at ``url`` (whose trust root is ``trust_root``),
    or None: take the full path. ``views``: the reads need the views, fresh."""
    door = open_driver(url)
    if door is None:
        yield None
        return
    if views:
        # Only a read of the views loads their reads (the key list does not).
        from projections.view_reads import views_fresh  # noqa: PLC0415

        try:
            fresh = views_fresh(door)
        except door.errors:  # no views yet, say: the full path makes and folds them
            fresh = False
        if not fresh:
            door.close()
            yield None
            return
    try:
        yield DriverReads(door, trust_root)
    finally:
        door.close()
