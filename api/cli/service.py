"""A command's door to a local ledger: the one service (``api.service``), open for one command.

A command is one request: it opens the home's ledger, makes the service over it, and every
read it makes shares one freshness check (``api.service.freshness.one_request``: the views
are folded up to what the log held when the command began, once). The service is closed,
and the ledger with it, when the command is done.

A command imports this module when it runs, never at start-up: it loads the database stack
and the read models, which ``--help`` and ``kernelindex verify`` never need.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from api.cli.local import open_ledger
from api.service.freshness import one_request
from api.service.ledger_service import LedgerService
from domain.statements import PredicateType
from ledger.application import Ledger
from ledger.logged_event import LoggedEvent


@contextmanager
def local_service(
    home: Path | None, db: str | None, *, read_only: bool = True
) -> Iterator[LedgerService]:
    """The service over the home's ledger (``read_only``: a command that never appends)."""
    ledger = open_ledger(home, db, read_only=read_only)
    try:
        with service_over(ledger) as service:
            yield service
    finally:
        ledger.close()


@contextmanager
def service_over(ledger: Ledger) -> Iterator[LedgerService]:
    """The service over a ledger the command holds open itself (the demo's)."""
    service = LedgerService(ledger)
    try:
        with one_request():
            yield service
    finally:
        service.close()


def append_signed(
    service: LedgerService,
    envelope: dict[str, Any],
    accepts: set[PredicateType],
    subject: str | None = None,
) -> LoggedEvent:
    """An envelope signed here, admitted as the API admits one posted to the endpoint for
    ``accepts`` about ``subject`` (``LedgerService.append``: the service's one write)."""
    return service.append(json.dumps(envelope).encode("utf-8"), accepts, subject)
