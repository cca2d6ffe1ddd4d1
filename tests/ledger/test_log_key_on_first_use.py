"""A ledger opened to read reads its home's log key only when it must sign (issue 33).

A read command signs nothing: every size a commit left the log at was signed in that commit.
So a reader opens without reading ``keys/log.pem`` (nor decrypting it); the rare read that
must sign (a size inside a commit) reads it then, and a key that cannot be read or is not
the trust root's refuses then, with the reason. A writer signs every commit: its key is read
when it opens, and a bad one refuses there, before anything is appended. On SQLite and
PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from domain.errors import DomainError
from ledger.home import PASSPHRASE_ENV, LedgerHome
from ledger.proofs.signed_note import open_checkpoint
from ledger.signing.keys import KeyFileError, SigningKey
from ledger.store.log_queries import checkpoint_json

PASSPHRASE = b"correct horse"
ORIGIN = "test.kernelindex/lazy"


@pytest.fixture
def home(empty_db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LedgerHome:
    """A home whose keys are encrypted; its three registrations are one commit (size 3)."""
    monkeypatch.delenv(PASSPHRASE_ENV, raising=False)
    made = LedgerHome.at(tmp_path / "home", empty_db_url)
    made.initialise(origin=ORIGIN, passphrase=PASSPHRASE).close()
    return made


def test_a_reader_opens_and_reads_without_the_passphrase_and_signs_once_given_it(
    home: LedgerHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = home.open(read_only=True)  # the key file stays unread: no passphrase asked
    try:
        assert checkpoint_json(reader)["size"] == 3  # stored by the commit: nothing signed
        assert reader.tlog.can_sign
        # Size 1 is inside the commit, so it has no stored checkpoint: signing it needs the
        # key, and a key that cannot be decrypted refuses, saying why.
        with pytest.raises(KeyFileError):
            reader.tlog.checkpoint(1)
        monkeypatch.setenv(PASSPHRASE_ENV, PASSPHRASE.decode())
        signed = reader.tlog.checkpoint(1)
        opened, _ = open_checkpoint(signed.note, [reader.tlog.verifier], origin=ORIGIN)
        assert opened.size == 1
    finally:
        reader.close()


def test_a_writer_still_refuses_at_open_without_the_passphrase(home: LedgerHome) -> None:
    with pytest.raises(KeyFileError):
        home.open(read_only=False).close()


def test_a_log_key_that_is_not_the_trust_roots_refuses_when_read(
    home: LedgerHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PASSPHRASE_ENV, PASSPHRASE.decode())
    home.key_path("log").unlink()
    SigningKey.generate().save(home.key_path("log"), PASSPHRASE)  # an impostor's key
    reader = home.open(read_only=True)
    try:
        assert checkpoint_json(reader)["size"] == 3
        with pytest.raises(DomainError, match="not the trust root's log key"):
            reader.tlog.checkpoint(1)
    finally:
        reader.close()
    with pytest.raises(DomainError, match="not the trust root's log key"):
        home.open(read_only=False).close()
