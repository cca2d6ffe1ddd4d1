"""`kernelindex artifact get`: a stored artifact's bytes, re-hashed on read."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from api.cli.common import DbOption, HomeOption, err, handles_errors
from ledger.home import LedgerHome
from ledger.store.artifacts import ArtifactStore

artifact_app = typer.Typer(help="Content-addressed artifacts.", no_args_is_help=True)
app = typer.Typer()
app.add_typer(artifact_app, name="artifact")


@artifact_app.command("get")
@handles_errors
def artifact_get(
    digest: Annotated[str, typer.Argument(help="sha256:… digest of the artifact.")],
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="File to write (default stdout).")
    ] = None,
    home: HomeOption = None,
    db: DbOption = None,
) -> None:
    """Write an artifact's bytes (re-hashed on read: a damaged one is refused)."""
    ledger = LedgerHome.at(home, db).open()
    stored = ArtifactStore(ledger.store).get(digest)
    if output is None:
        sys.stdout.buffer.write(stored.content)
    else:
        output.write_bytes(stored.content)
        err.print(f"wrote {output} ({len(stored.content)} bytes, {stored.media_type})")
