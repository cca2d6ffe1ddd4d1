"""The ``kernelindex`` CLI driven in-process against one ledger home and database, for tests."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from api.cli.main import app


class Cli:
    """Runs ``kernelindex`` commands with this home and database; asserts their exit codes."""

    def __init__(self, home: Path, db_url: str) -> None:
        self.home = home
        self.db_url = db_url
        self.runner = CliRunner()

    def __call__(self, *args: object, ok: bool = True) -> Any:
        result = self.runner.invoke(
            app,
            [str(a) for a in args],
            env={
                "KERNELINDEX_HOME": str(self.home),
                "KERNELINDEX_DB": self.db_url,
                "KERNELINDEX_KEY_PASSPHRASE": "",
            },
        )
        if ok:
            assert result.exit_code == 0, f"{args}: exit {result.exit_code}\n{result.output}"
        else:
            assert result.exit_code != 0, f"{args} should have failed:\n{result.output}"
            assert result.exception is None or isinstance(result.exception, SystemExit), (
                result.exception
            )
        return result

    def json(self, *args: object) -> Any:
        return json.loads(self(*args, "--json").stdout)

    def event_count(self) -> int:
        engine = create_engine(self.db_url)
        try:
            with engine.connect() as conn:
                return int(
                    conn.execute(text("select count(*) from kernelindex_events")).scalar_one()
                )
        finally:
            engine.dispose()


def alter_stored_signature(db_url: str, query: str) -> None:
    """Flip a byte of the signature of the one stored event ``query`` selects (``id,
    state``), in the database itself: what a tampered store looks like to its readers."""
    engine = create_engine(db_url)
    with engine.begin() as conn:
        row = conn.execute(text(query)).one()
        state = json.loads(bytes(row.state))
        sig = bytearray(base64.b64decode(state["envelope"]["signatures"][0]["sig"]))
        sig[0] ^= 0xFF
        state["envelope"]["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
        conn.execute(
            text("update kernelindex_events set state = :s where id = :i"),
            {"s": json.dumps(state).encode(), "i": row.id},
        )
    engine.dispose()
