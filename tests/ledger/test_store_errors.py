"""How store failures reach a writer: races are retried and end as 409 conflict, other
integrity violations are bugs (not 'try again'), a connection lost mid-write never turns into
'nothing was stored', and the group-commit writer keeps each refusal's own code."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy.exc as sa
from eventsourcing.persistence import IntegrityError, OperationalError
from sqlalchemy import create_engine

from api.demo import build_demo
from domain.errors import DomainError
from domain.statements import Role
from ledger import application
from ledger.application import Ledger
from ledger.errors import (
    ConflictError,
    StoreError,
    is_outage,
    is_transient,
    lost_connection,
    write_refusal,
)
from ledger.group_commit import GroupCommitWriter
from ledger.home import LedgerHome
from ledger.signing.authoring import attestation_envelope, key_registration_envelope
from ledger.signing.keys import SigningKey


def _real_sqlite_error(tmp_path: Path, sql_setup: str, sql: str) -> sa.DBAPIError:
    """The exception chain SQLAlchemy really raises for ``sql`` on a SQLite file."""
    engine = create_engine(f"sqlite:///{tmp_path / 'errors.db'}")
    try:
        with engine.begin() as conn:
            for statement in sql_setup.split(";"):
                conn.exec_driver_sql(statement)
        with pytest.raises(sa.DBAPIError) as caught, engine.begin() as conn:
            conn.exec_driver_sql(sql)
        return caught.value
    finally:
        engine.dispose()


def _wrapped(cls: type[Exception], cause: BaseException) -> Exception:
    """As eventsourcing raises it: its own class, from the SQLAlchemy error."""
    try:
        raise cls(str(cause)) from cause
    except cls as exc:
        return exc


def test_a_taken_key_is_a_race_but_a_not_null_violation_is_not(tmp_path: Path) -> None:
    unique = _real_sqlite_error(
        tmp_path,
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL); INSERT INTO t VALUES (1, 1)",
        "INSERT INTO t VALUES (1, 2)",
    )
    assert is_transient(_wrapped(IntegrityError, unique))
    assert isinstance(write_refusal(_wrapped(IntegrityError, unique), 20), ConflictError)

    not_null = _real_sqlite_error(tmp_path, "SELECT 1", "INSERT INTO t (id) VALUES (2)")
    assert not is_transient(_wrapped(IntegrityError, not_null))
    assert not isinstance(write_refusal(_wrapped(IntegrityError, not_null), 1), ConflictError)


def test_a_missing_table_is_not_an_outage_but_a_refused_connection_is(tmp_path: Path) -> None:
    missing = _real_sqlite_error(tmp_path, "SELECT 1", "SELECT * FROM nowhere")
    assert not is_outage(missing)
    engine = create_engine("postgresql+psycopg://postgres@127.0.0.1:1/none")
    with pytest.raises(sa.OperationalError) as refused:
        engine.connect()
    engine.dispose()
    assert is_outage(refused.value)


def _busy() -> Exception:
    driver = sqlite3.OperationalError("database is locked")
    driver.sqlite_errorcode = 5  # SQLITE_BUSY, as the sqlite3 module sets it
    return _wrapped(OperationalError, sa.OperationalError("INSERT", {}, driver))


def _disconnect() -> Exception:
    driver = sqlite3.OperationalError("server closed the connection unexpectedly")
    error = sa.OperationalError("COMMIT", {}, driver, connection_invalidated=True)
    return _wrapped(OperationalError, error)


def _refused(tmp_path: Path) -> Exception:
    engine = create_engine("postgresql+psycopg://postgres@127.0.0.1:1/none")
    try:
        engine.connect()
    except sa.OperationalError as exc:
        return _wrapped(OperationalError, exc)
    finally:
        engine.dispose()
    raise AssertionError("connecting to port 1 succeeded")


@pytest.fixture
def demo(tmp_path: Path) -> Any:
    ledger, seed = build_demo(LedgerHome.at(tmp_path / "home"))
    yield ledger, seed
    ledger.close()


def _attestation(ledger: Ledger, seed: str, body: str) -> dict[str, Any]:
    key = SigningKey.generate()
    ledger.append(key_registration_envelope(key.public, [Role.ATTESTER], key))
    return attestation_envelope(seed, "sol-submission-38823", key, type_="note", body=body)


def test_writers_that_keep_losing_hear_409_through_the_group_writer(
    demo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, seed = demo
    envelope = _attestation(ledger, seed, "busy")
    monkeypatch.setattr(application, "MAX_APPEND_ATTEMPTS", 3)
    monkeypatch.setattr(
        ledger, "_append_group", lambda envelopes, **_: (_ for _ in ()).throw(_busy())
    )
    writer = GroupCommitWriter(ledger)
    try:
        with pytest.raises(ConflictError) as refused:
            writer.append(envelope)
        assert refused.value.status == 409
    finally:
        writer.close()


def test_a_write_whose_connection_was_lost_is_never_called_unstored(
    demo: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The first attempt commits and then loses its connection; the database then refuses
    connections. The event IS stored: the client must be told to resend, not that nothing
    was stored — and resending returns the original receipt."""
    ledger, seed = demo
    envelope = _attestation(ledger, seed, "lost commit")
    real = ledger._append_group
    calls = {"n": 0}

    def flaky(envelopes: Any, **options: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            real(envelopes, **options)  # committed
            raise _disconnect()
        raise _refused(tmp_path)

    monkeypatch.setattr(ledger, "_append_group", flaky)
    with pytest.raises(StoreError) as refused:
        ledger.append(envelope)
    assert lost_connection(_disconnect())
    assert "send the same envelope again" in refused.value.message
    assert "nothing was stored" not in refused.value.message
    monkeypatch.setattr(ledger, "_append_group", real)
    again = ledger.append(envelope)
    assert again.duplicate is True


def test_the_group_writer_keeps_a_refusal_code(demo: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ledger, seed = demo
    envelope = _attestation(ledger, seed, "domain error")

    def refuse(envelopes: Any) -> Any:
        raise StoreError("the database is being restored")

    monkeypatch.setattr(ledger, "append_many", refuse)
    writer = GroupCommitWriter(ledger)
    try:
        with pytest.raises(DomainError, match="being restored"):
            writer.append(envelope)
    finally:
        writer.close()
