"""A COMMIT that fails leaves nothing of its group behind, even where the driver raised without
rolling back (a failure that leaves the transaction open on its connection: the engine's
``handle_error`` rolls it back, ``ledger.store.connections.roll_back_failed_commits``): the
caller told "nothing was stored" reads the log as it was, and the next write stores as if the
failed one never ran. Found by the pipe helper (benchmarks/README.md, session 5 "pipe")."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from api.demo import build_demo
from domain.errors import DomainError
from domain.statements import Role
from ledger.home import LedgerHome
from ledger.logged_event import LoggedEvent
from ledger.signing.authoring import key_registration_envelope
from ledger.signing.keys import SigningKey


def _registration(label: str) -> dict[str, Any]:
    key = SigningKey.generate()
    return key_registration_envelope(key.public, [Role.ATTESTER], key, label=label)


def _tree_size(ledger: Any) -> int:
    with ledger.store.transaction(commit=False) as session:
        return int(ledger.tlog.tree_size(session))


@pytest.mark.parametrize("next_write", ["same envelope", "another envelope"])
def test_a_commit_that_raised_without_rolling_back_leaves_nothing(
    db_url: str, tmp_path: Path, next_write: str
) -> None:
    ledger, _ = build_demo(LedgerHome.at(tmp_path / "home", db_url))
    dialect: Any = ledger.store.engine.dialect
    real = dialect.do_commit
    failing = [True]

    def commit(connection: Any) -> None:
        if failing:
            failing.pop()
            # The driver's failure, the transaction left as it was (no rollback).
            raise dialect.loaded_dbapi.OperationalError("injected: COMMIT failed")
        real(connection)

    try:
        before = ledger.store.last_position()
        first = _registration("first")
        dialect.do_commit = commit
        with pytest.raises(DomainError, match="nothing was stored"):
            ledger.append_many([first])
        assert ledger.store.last_position() == before  # not the failed group's rows
        seen: list[int] = []  # nor on another thread, whichever pooled connection it takes
        reader = threading.Thread(target=lambda: seen.append(ledger.store.last_position()))
        reader.start()
        reader.join()
        assert seen == [before]
        assert _tree_size(ledger) == before  # nor its leaves
        again = first if next_write == "same envelope" else _registration("second")
        (receipt,) = ledger.append_many([again])
        assert isinstance(receipt, LoggedEvent) and not receipt.duplicate
        # (PostgreSQL's positions come from a sequence, which a failed transaction moved on;
        # the log's leaves stay dense.)
        assert receipt.position > before and ledger.store.last_position() == receipt.position
        assert _tree_size(ledger) == before + 1
    finally:
        del dialect.do_commit
        ledger.close()
