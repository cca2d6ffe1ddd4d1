"""A GET of the log's checkpoint after a served write writes nothing and is of the log the
write left (issue 33): the commit signed it, the GET only reads. Through a writer process
(``kernelindex serve`` on SQLite; here on both backends) and through the in-process writer
(each PostgreSQL worker's), with the statements the reading ledger's engine sends counted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from litestar import Litestar
from litestar.testing import TestClient
from served_app import TEST_CONFIG, Served

from api.demo import build_demo
from api.server.app import create_app
from domain.statements import Role
from ledger.application import Ledger
from ledger.home import LedgerHome
from ledger.proofs.signed_note import open_checkpoint
from ledger.signing.authoring import key_registration_envelope
from ledger.signing.keys import SigningKey
from ledger.writer_process import RemoteWriter, WriterProcess
from tests.ledger.statement_count import statements_sent, writing


@pytest.fixture
def behind_writer_process(
    db_url: str, tmp_path: Path
) -> Iterator[tuple[TestClient[Litestar], Ledger]]:
    """A worker as ``kernelindex serve`` makes one: the ledger opened to read, writes handed
    to the writer process."""
    home = LedgerHome.at(tmp_path / "home", db_url)
    ledger, _ = build_demo(home)
    ledger.close()
    process = WriterProcess(home.path, home.db_url).start()
    reader = home.open(read_only=True)
    try:
        app = create_app(reader, TEST_CONFIG, RemoteWriter(process.address, process.key))
        with TestClient(app) as client:
            yield client, reader
    finally:
        reader.close()
        process.stop()


def _write_then_read(client: TestClient[Litestar], reader: Ledger) -> None:
    before = client.get("/v1/log/checkpoint")  # whatever a read cache would keep
    assert before.status_code == 200, before.text
    alice = SigningKey.generate()
    posted = client.post(
        "/v1/keys", json=key_registration_envelope(alice.public, [Role.ATTESTER], alice)
    )
    assert posted.status_code == 201, posted.text
    acknowledged = posted.json()["log"]["treeSize"]
    assert acknowledged == before.json()["size"] + 1

    with statements_sent(reader.store.engine) as sent:
        got = client.get("/v1/log/checkpoint")
    assert got.status_code == 200, got.text
    assert writing(sent) == []
    checkpoint = got.json()
    with reader.store.transaction(commit=False) as session:
        assert checkpoint["size"] == acknowledged == reader.tlog.tree_size(session)
    body, _ = open_checkpoint(
        checkpoint["note"], [reader.tlog.verifier], origin=reader.trust_root.origin
    )
    assert body.size == acknowledged


def test_a_get_after_a_write_through_the_writer_process_writes_nothing(
    behind_writer_process: tuple[TestClient[Litestar], Ledger],
) -> None:
    _write_then_read(*behind_writer_process)


def test_a_get_after_a_write_through_the_writer_thread_writes_nothing(served: Served) -> None:
    served.stop_follower()  # its folds of the views are not the GET's statements
    _write_then_read(served.client, served.ledger)
