"""The served checkpoint under witnesses, on SQLite and PostgreSQL: a write served over HTTP
(by the server's own writer thread, or by the ledger's writer process) is cosigned by the
ledger's three witnesses soon after, and `GET /v1/log/checkpoint` and the C2SP monitoring
path `GET /checkpoint` say so; a ledger without witnesses answers as it always did."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import TestClient
from served_app import TEST_CONFIG

from api.server.app import create_app
from domain.statements import Role
from ledger.home import LedgerHome
from ledger.proofs.signed_note import Verifier, open_checkpoint
from ledger.signing.authoring import key_registration_envelope
from ledger.signing.keys import SigningKey
from ledger.witness.policy import quorum_met
from ledger.witnessing import Witnessing
from ledger.writer_process import RemoteWriter, WriterProcess
from tests.witness.ledger_witnesses import all_serving, follows, local_witnesses

NOTE = "text/plain; charset=utf-8"


@contextmanager
def served(home: LedgerHome, writer: str) -> Iterator[TestClient[Litestar]]:
    """The API over ``home``: writes by this process's writer thread (``thread``), or by
    the ledger's writer process that the server hands them to (``process``)."""
    if writer == "thread":
        ledger = home.open()
        try:
            with TestClient(create_app(ledger, TEST_CONFIG, home=home)) as client:
                yield client
        finally:
            ledger.close()
        return
    process = WriterProcess(home.path, home.db_url).start()
    remote = RemoteWriter(process.address, process.key)
    reader = home.open(read_only=True)
    try:
        with TestClient(create_app(reader, TEST_CONFIG, remote, home)) as client:
            yield client
    finally:
        reader.close()
        remote.close()
        process.stop()


def register(client: TestClient[Litestar]) -> dict[str, Any]:
    alice = SigningKey.generate()
    envelope = key_registration_envelope(alice.public, [Role.ATTESTER], alice, label="alice")
    reply = client.post("/v1/keys", json=envelope)
    assert reply.status_code == 201, reply.text
    receipt: dict[str, Any] = reply.json()
    return receipt


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_a_served_write_is_cosigned_and_both_checkpoint_paths_serve_it(
    db_url: str, tmp_path: Path, writer: str
) -> None:
    witnesses = local_witnesses(tmp_path / "witnesses", 3)
    home = LedgerHome.at(tmp_path / "home", db_url)
    home.initialise(witnesses=[(w.vkey, w.url) for w in witnesses]).close()
    policy = home.witness_policy()
    assert policy is not None
    with all_serving(witnesses, [follows(home.trust_root())]), served(home, writer) as client:
        receipt = register(client)
        size = receipt["log"]["treeSize"]
        # The receipt is at once; the witnesses are asked after it (in the background, and
        # here once more at once, so the test waits on no clock): both paths then serve it.
        asked = home.open()
        rounds = Witnessing(asked.tlog, home.witnesses(), timeout=5.0)
        try:
            rounds.round()
        finally:
            rounds.close()
            asked.close()
        reply = client.get("/v1/log/checkpoint")
        assert reply.status_code == 200, reply.text
        checkpoint = reply.json()
        assert checkpoint["witnessLag"] == 0 and checkpoint["size"] >= size, checkpoint
        cosigned = checkpoint["cosigned"]
        assert cosigned["size"] == checkpoint["size"]
        assert cosigned["rootHash"] == checkpoint["rootHash"]
        assert cosigned["note"].startswith(checkpoint["note"])  # the log's note, and lines
        assert sorted(cosigned["witnesses"]) == sorted(w.name for w in witnesses)
        assert set(checkpoint["newestByWitness"].values()) == {checkpoint["size"]}
        assert len(checkpoint["newestByWitness"]) == 3

        monitored = client.get("/checkpoint")
        assert monitored.status_code == 200
        assert monitored.headers["content-type"] == NOTE
        assert monitored.text == cosigned["note"]
        verdict = quorum_met(policy, monitored.text)
        assert verdict.met, verdict.reason
        assert verdict.code == "quorum-met"


def test_without_witnesses_the_checkpoint_is_the_log_signed_one(
    db_url: str, tmp_path: Path
) -> None:
    home = LedgerHome.at(tmp_path / "home", db_url)
    home.initialise().close()
    with served(home, "thread") as client:
        register(client)
        checkpoint = client.get("/v1/log/checkpoint").json()
        # The reply of a ledger without witnesses is what it always was.
        assert set(checkpoint) == {"origin", "size", "rootHash", "note", "signedAt"}
        monitored = client.get("/checkpoint")
        assert monitored.status_code == 200
        assert monitored.headers["content-type"] == NOTE
        assert monitored.text == checkpoint["note"]
        log = home.trust_root()

        body, _ = open_checkpoint(
            monitored.text, [Verifier.from_public_key(log.origin, log.log_key.raw)]
        )
        assert body.size == checkpoint["size"]
