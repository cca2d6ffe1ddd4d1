"""The writer process logs as the server does: `serve` hands it the server's logging, so a
record written there (a warning of the ledger's) is a line of the same JSON log, not Python's
bare text on stderr (a spawned interpreter starts with no logging configured)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from test_lost_commits import _lose_since, _snapshot

from api.demo import build_demo
from api.server.observability import configure_logging
from ledger.home import LedgerHome
from ledger.remote_writer import RemoteWriter
from ledger.signing.authoring import attestation_envelope
from ledger.writer_process import WriterProcess

SEED_NAME = "sol-submission-38823"


def test_the_writer_processs_warning_is_a_json_line_of_the_log(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    home = LedgerHome.at(tmp_path / "home")
    ledger, seed = build_demo(home)
    attester = home.key("demo-attester")
    before = _snapshot(ledger)
    ledger.close()
    setup = functools.partial(configure_logging, True)
    process = WriterProcess(home.path, home.db_url, log_setup=setup).start()
    try:
        remote = RemoteWriter(process.address, process.key)
        try:
            note = attestation_envelope(seed, SEED_NAME, attester, type_="note", body="one")
            remote.append(note)
            # The database goes back under the running writer (a backup restored): its
            # next group notices and warns.
            behind = home.open()
            try:
                _lose_since(behind, before)
            finally:
                behind.close()
            again = attestation_envelope(seed, SEED_NAME, attester, type_="note", body="two")
            remote.append(again)
        finally:
            remote.close()
    finally:
        process.stop()
    lines = [line for line in capfd.readouterr().err.splitlines() if "went back" in line]
    assert lines, "the writer did not warn that the log went back"
    record = json.loads(lines[0])
    assert record["logger"] == "ledger.application" and record["level"] == "warning"
    assert record["event"].startswith("the log went back")
