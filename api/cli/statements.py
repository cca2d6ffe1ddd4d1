"""`kernelindex attest` and `retract`: signed statements about a run, appended locally or (for
an attestation) sent to a server."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from api.cli.common import (
    DbOption,
    HomeOption,
    JsonOption,
    ServerOption,
    handles_errors,
    remote_server,
)
from api.cli.local import load_key, print_receipt
from domain.statements import AttestationType, PredicateType, ReportReason
from ledger.errors import NotFoundError
from ledger.home import LedgerHome
from ledger.signing.authoring import attestation_envelope, lifecycle_envelope

if TYPE_CHECKING:
    from api.service.ledger_service import LedgerService

app = typer.Typer()


def _named_run(service: LedgerService, reference: str) -> tuple[str, str]:
    """(digest, name) of the run a digest, prefix or name names: statements about it need
    both."""
    run_digest = service.runs.resolve(reference)
    record = service.ledger.run_state(run_digest)
    if record is None:
        raise NotFoundError(f"no run with digest {run_digest}")
    return run_digest, record.run_name


@app.command()
@handles_errors
def attest(
    run: Annotated[str, typer.Argument(help="Run digest or unique prefix.")],
    type_: Annotated[AttestationType, typer.Option("--type", help="What you observed.")],
    body: Annotated[str, typer.Option(help="What you did and saw (at most 2000 characters).")],
    key: Annotated[Path, typer.Option(help="Your registered attester key (PEM).")],
    evidence_url: Annotated[
        str | None, typer.Option("--evidence-url", help="https:// link to evidence.")
    ] = None,
    observed_ns: Annotated[
        int | None, typer.Option("--observed-ns", help="Latency you measured, in ns.")
    ] = None,
    environment: Annotated[
        str | None, typer.Option(help="Short summary of your environment.")
    ] = None,
    reason: Annotated[
        ReportReason | None,
        typer.Option(help="Why you report the run (only with --type issue_report)."),
    ] = None,
    home: HomeOption = None,
    db: DbOption = None,
    server: ServerOption = None,
    as_json: JsonOption = False,
) -> None:
    """Append a signed attestation about a run. It never changes the run's evidence level.

    To report an issue with a run: --type issue_report --reason incorrect_result |
    wrong_attribution | license | comparability | other."""
    remote = remote_server(server, home, db)
    signer = load_key(key)

    def signed(run_digest: str, run_name: str) -> dict[str, Any]:
        return attestation_envelope(
            run_digest,
            run_name,
            signer,
            type_=type_.value,
            body=body,
            evidence_url=evidence_url,
            observed_ns=observed_ns,
            environment_summary=environment,
            reason=reason.value if reason is not None else None,
        )

    if remote is not None:
        from api.cli import remote as over_http  # noqa: PLC0415 - HTTP client only with --server

        over_http.attest(remote, run, signed, as_json)
        return
    from api.cli.service import append_signed, local_service  # noqa: PLC0415 - when it runs

    with local_service(home, db, read_only=False) as service:
        run_digest, run_name = _named_run(service, run)
        envelope = signed(run_digest, run_name)
        receipt = append_signed(service, envelope, {PredicateType.ATTESTATION}, run_digest)
    print_receipt(receipt, as_json, "attestation")


@app.command()
@handles_errors
def retract(
    run: Annotated[str, typer.Argument(help="Run digest or unique prefix.")],
    reason: Annotated[str, typer.Option(help="Why the run is withdrawn from ranking.")],
    key: Annotated[
        Path | None, typer.Option(help="Admin key (default: the home's admin key).")
    ] = None,
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Retract a run (admin): it leaves rankings; its history and level stay visible."""
    from api.cli.service import append_signed, local_service  # noqa: PLC0415 - when it runs

    signer = load_key(key) if key else LedgerHome.at(home, db).key("admin")
    with local_service(home, db, read_only=False) as service:
        run_digest, run_name = _named_run(service, run)
        envelope = lifecycle_envelope(run_digest, run_name, signer, action="retract", reason=reason)
        receipt = append_signed(service, envelope, {PredicateType.LIFECYCLE}, run_digest)
    print_receipt(receipt, as_json, "retraction")
