"""`kernelindex ingest` and `kernelindex attach`: a run and the manifests it names.

Both complete a run from the manifests the ledger already holds (``api.run_intake``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated, Any

import typer

from api.cli.common import DbOption, HomeOption, JsonOption, handles_errors, out
from api.cli.local import load_key, print_receipt
from api.run_intake import attach_lacking, ingest_run
from domain.documents import parse_document
from domain.manifests.collection import as_manifest_set
from ledger.errors import NotFoundError
from ledger.home import LedgerHome

JsonObject = dict[str, Any]


def _say(documents: dict[str, JsonObject], how: str, as_json: bool) -> None:
    if as_json:
        return
    for role, document in sorted(documents.items()):
        name = (document.get("metadata") or {}).get("name")
        out.print(f"{role} {name} {how}")


def ingest(
    file: Annotated[
        Path,
        typer.Argument(
            help="A run with its manifests: {run, protocol, environment, ...} or a list."
        ),
    ],
    key: Annotated[
        Path | None, typer.Option(help="Ingester key (default: the home's ingester key).")
    ] = None,
    source: Annotated[
        str | None,
        typer.Option(help="Source slug (default: the run's sourceNative.source or 'direct')."),
    ] = None,
    external_id: Annotated[
        str | None, typer.Option("--external-id", help="The source's id for this run.")
    ] = None,
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Sign an ingestion statement for a run and append it.

    The implementation and workload the run names by digest are taken from the ledger when
    the file lacks them; a run already ingested is attached what it lacks instead."""
    target = LedgerHome.at(home, db)
    raw = file.read_bytes()
    manifests = as_manifest_set(parse_document(raw, filename=file.name))
    signer = load_key(key) if key else target.key("ingester")
    intake = ingest_run(
        target.open(),
        manifests,
        signer,
        source=source,
        external_id=external_id,
        snapshot_digest="sha256:" + hashlib.sha256(raw).hexdigest(),
    )
    if intake.attached:
        _say(intake.taken, "attached (the run was already ingested without it)", as_json)
        print_receipt(intake.receipt, as_json, "attachment")
    else:
        _say(intake.taken, "taken from the ledger, by the digest the run names", as_json)
        print_receipt(intake.receipt, as_json, "run")


def attach(
    run: Annotated[str, typer.Argument(help="Run digest or unique prefix.")],
    file: Annotated[
        Path | None,
        typer.Option(help="Manifests to attach (default: those the ledger holds by digest)."),
    ] = None,
    key: Annotated[
        Path | None, typer.Option(help="Ingester key (default: the home's ingester key).")
    ] = None,
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Attach the implementation or workload manifest a run names by digest but lacks
    (signed by an ingester; never changes the evidence level)."""
    from api.cli.service import local_service  # noqa: PLC0415 - the database, when it runs

    target = LedgerHome.at(home, db)
    supplied = (
        as_manifest_set(parse_document(file.read_bytes(), filename=file.name)) if file else {}
    )
    signer = load_key(key) if key else target.key("ingester")
    with local_service(home, db, read_only=False) as service:
        run_digest = service.runs.resolve(run)
        intake = attach_lacking(service.ledger, run_digest, signer, supplied)
    if intake is None:
        raise NotFoundError(
            f"run {run_digest} lacks no manifest that "
            + ("the file or " if file else "")
            + "the ledger holds by the digest it names"
        )
    _say(intake.taken, "attached", as_json)
    print_receipt(intake.receipt, as_json, "attachment")


# What this module adds to `kernelindex` (api/cli/main.py lists it).
app = typer.Typer()
app.command()(handles_errors(ingest))
app.command()(handles_errors(attach))
