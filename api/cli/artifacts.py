"""`kernelindex artifact get`: a stored artifact's bytes, re-hashed on read (the service's
``log.artifact``, as ``GET /v1/artifacts/{digest}``); a file is written whole or not at all."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from api.cli.common import DbOption, HomeOption, err, handles_errors
from api.cli.files import written_whole

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
    from api.cli.service import local_service  # noqa: PLC0415 - the database, when it runs

    with local_service(home, db) as service:
        stored = service.log.artifact(digest)
    if output is None:
        sys.stdout.buffer.write(stored.content)
    else:
        with written_whole(output) as partial:
            partial.write_bytes(stored.content)
        err.print(f"wrote {output} ({len(stored.content)} bytes, {stored.media_type})")
