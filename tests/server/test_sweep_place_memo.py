"""A run record's place in its workload sweep is worked out once per position of the views
(``api.service.sweeps.SweepPlaces``, issue 34): a second record read at the same position
reads no sweep, with fewer statements, and says the same as a service that never
remembered anything; once the views move, it is worked out again."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import msgspec
import pytest
from sqlalchemy import event

from api.service import sweeps
from api.service.ledger_service import LedgerService
from domain.statements import Role
from ledger.home import LedgerHome
from ledger.signing.authoring import key_registration_envelope
from ledger.signing.keys import SigningKey
from tests.cli_session import Cli


@pytest.fixture
def home(db_url: str, tmp_path: Path, shared: Path) -> Iterator[LedgerHome]:
    cli = Cli(tmp_path / "home", db_url)
    cli("init")
    cli("import", "flashinfer-trace", shared / "fixtures/flashinfer-trace")
    yield LedgerHome.at(tmp_path / "home", db_url)


def records(service: LedgerService) -> dict[str, Any]:
    digests = [r.digest for r in service.runs.list_page(limit=100).items]
    return {d: msgspec.to_builtins(service.runs.record(d)) for d in digests}


def test_a_warm_record_reads_no_sweep_and_says_what_a_cold_one_does(home: LedgerHome) -> None:
    ledger = home.open()
    try:
        service = LedgerService(ledger)
        calls: Counter[str] = Counter()
        made = sweeps.group_place

        def counted(session: Any, key: str) -> Any:
            calls[key] += 1
            return made(session, key)

        with mock.patch.object(sweeps, "group_place", counted):
            first = records(service)
            in_sweeps = [d for d, r in first.items() if any("sweep" in str(s) for s in r.values())]
            assert in_sweeps, "the fixture's runs stand in a sweep"
            assert calls and max(calls.values()) == 1, "each group worked out once"
            computed = sum(calls.values())

            statements: list[str] = []

            def seen(*args: Any) -> None:
                statements.append(args[2])

            event.listen(ledger.store.engine, "before_cursor_execute", seen)
            run = in_sweeps[0]
            warm = msgspec.to_builtins(service.runs.record(run))
            assert sum(calls.values()) == computed, "a warm record worked its sweep out again"
            warm_statements = len(statements)
            service.runs.sweeps = sweeps.SweepPlaces()  # forgets: a cold read of the same
            statements.clear()
            cold = msgspec.to_builtins(service.runs.record(run))
            event.remove(ledger.store.engine, "before_cursor_execute", seen)
            assert warm == cold == first[run]
            assert sum(calls.values()) == computed + 1
            assert warm_statements < len(statements)

            # The views move (a key registered): the next record works its sweep out again.
            key = SigningKey.generate()
            ledger.append(key_registration_envelope(key.public, [Role.ATTESTER], key))
            assert msgspec.to_builtins(service.runs.record(run)) == first[run]
            assert sum(calls.values()) == computed + 2
    finally:
        ledger.close()
