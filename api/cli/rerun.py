"""`kernelindex submit` and `kernelindex rerun request`: getting a kernel measured again.

``submit`` turns a SOL-ExecBench solution folder and a measured latency into a signed run,
storing the solution and workload artifacts a rerun agent fetches (``ledger.submission``).
``rerun request`` signs, as admin, a request that an agent re-measure a run on stated hardware;
what it asks for defaults to what the run's own manifests say.
"""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

import typer

from api.cli.common import DbOption, HomeOption, JsonOption, handles_errors, out, print_json
from api.cli.local import load_key
from api.client import LedgerClient, remote_run
from domain.statements import PredicateType
from domain.timestamps import format_time, utc_now
from ledger.errors import NotFoundError
from ledger.home import LedgerHome
from ledger.rerun_request import RerunTarget, check_rerun_artifacts, rerun_target
from ledger.signing.authoring import rerun_request_envelope
from ledger.signing.keys import SigningKey
from ledger.submission import read_submission_folder, submit_solution

rerun_app = typer.Typer(help="Controlled reruns of a run's kernel.", no_args_is_help=True)

DEFAULT_EXPIRY = "24h"
_DURATION_PART = re.compile(r"(\d+)([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> timedelta:
    """``90s``, ``30m``, ``24h``, ``7d`` or a sum of them (``1h30m``); positive."""
    value = text.strip().lower()
    parts = list(_DURATION_PART.finditer(value))
    if not parts or "".join(p.group(0) for p in parts) != value:
        raise typer.BadParameter(
            f"{text!r} is not a duration like 90s, 30m, 24h, 7d or 1h30m", param_hint="--expires-in"
        )
    seconds = sum(int(p.group(1)) * _UNIT_SECONDS[p.group(2)] for p in parts)
    if seconds <= 0:
        raise typer.BadParameter("the duration must be positive", param_hint="--expires-in")
    return timedelta(seconds=seconds)


@handles_errors
def submit(
    folder: Annotated[
        Path,
        typer.Argument(help="A folder with definition.json, workload.jsonl and solution.json."),
    ],
    latency_ns: Annotated[
        int, typer.Option("--latency-ns", help="Your measured mean latency over the workloads.")
    ],
    gpu: Annotated[str, typer.Option("--gpu", help='GPU product, e.g. "NVIDIA H200".')],
    arch: Annotated[str, typer.Option("--arch", help="GPU architecture, e.g. sm_90.")],
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Submit a solution with its measured latency: store its artifacts and ingest the run.

    Submitting the same folder with the same figures again appends nothing.
    """
    target = LedgerHome.at(home, db)
    files = read_submission_folder(folder)
    ledger = target.open()
    submission = submit_solution(
        ledger,
        target.key("ingester"),
        files,
        latency_ns=latency_ns,
        product=gpu,
        architecture=arch,
    )
    if as_json:
        print_json(submission.to_json())
        return
    receipt = submission.receipt
    if receipt is None:
        out.print(f"run already ingested: {submission.run_digest} (nothing appended)")
    else:
        out.print(
            f"run ingested: {submission.run_digest} at position {receipt.position} "
            f"(received {receipt.received_at})"
        )
    out.print(f"  name      {submission.run_name}")
    out.print(f"  solution  {submission.solution_digest}")
    out.print(f"  workload  {submission.workload_digest}")


def _admin_key(key: Path | None, home: Path | None) -> SigningKey:
    return load_key(key) if key else LedgerHome.at(home).key("admin")


def _request(
    target: RerunTarget, signer: SigningKey, expires_in: timedelta
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The signed envelope and what to print about its job."""
    expires_at = utc_now() + expires_in
    job_id = str(uuid.uuid4())
    envelope = rerun_request_envelope(
        target.run_digest,
        target.run_name,
        signer,
        artifact_digest=target.solution_digest,
        workload_digest=target.workload_digest,
        product=target.product,
        architecture=target.architecture,
        expires_at=expires_at,
        job_id=job_id,
    )
    summary = {
        "runDigest": target.run_digest,
        "jobId": job_id,
        "expiresAt": format_time(expires_at),
        "requirements": {"product": target.product, "architecture": target.architecture},
        "artifactDigest": target.solution_digest,
        "workloadDigest": target.workload_digest,
    }
    return envelope, summary


@rerun_app.command("request")
@handles_errors
def request(
    run: Annotated[str, typer.Argument(help="Run digest or unique prefix.")],
    gpu: Annotated[
        str | None,
        typer.Option("--gpu", help="Required GPU product (default: the run's environment)."),
    ] = None,
    arch: Annotated[
        str | None,
        typer.Option("--arch", help="Required architecture (default: the run's environment)."),
    ] = None,
    expires_in: Annotated[
        str, typer.Option("--expires-in", help="How long the job stays open: 90s, 30m, 24h, 7d.")
    ] = DEFAULT_EXPIRY,
    key: Annotated[
        Path | None, typer.Option("--key", help="Admin key (default: the home's admin key).")
    ] = None,
    home: HomeOption = None,
    db: DbOption = None,
    server: Annotated[
        str | None,
        typer.Option("--server", help="A KernelIndex server's base URL (not with --home/--db)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Request a controlled rerun of a run (admin): an agent on the GPU re-measures it.

    The job names the solution and workload artifacts the run's own manifests name (recorded
    by `submit` and by SOL-ExecBench and FlashInfer-Bench imports): a rerun measures the
    run's own code, or nothing."""
    lifetime = parse_duration(expires_in)
    if server is not None and (home is not None or db is not None):
        raise typer.BadParameter("give --server or --home/--db, not both", param_hint="--server")
    overrides: dict[str, Any] = {"product": gpu, "architecture": arch}
    if server is not None:
        signer = _admin_key(key, None)
        with LedgerClient(server) as client:
            run_digest, _ = remote_run(client, run)
            record = client.run(run_digest)
            # rerun_target checks that these manifests digest to the run: the server's reply
            # is not trusted beyond that before it is signed.
            target = rerun_target(run_digest, record.get("manifests") or {}, **overrides)
            check_rerun_artifacts(client.artifact, target)  # re-hashed: the server is not trusted
            envelope, summary = _request(target, signer, lifetime)
            reply = client.post_rerun_request(run_digest, envelope)
        _print_request(summary, reply, as_json)
        return
    from api.cli.service import append_signed, local_service  # noqa: PLC0415 - when it runs

    signer = load_key(key) if key else LedgerHome.at(home, db).key("admin")
    with local_service(home, db, read_only=False) as service:
        run_digest = service.runs.resolve(run)
        manifests = service.ledger.run_manifests(run_digest)
        if not manifests:
            raise NotFoundError(f"no run with digest {run_digest}")
        target = rerun_target(run_digest, manifests, **overrides)
        log = service.log
        check_rerun_artifacts(
            lambda d: log.artifact(d).content if log.has_artifact(d) else None, target
        )
        envelope, summary = _request(target, signer, lifetime)
        receipt = append_signed(service, envelope, {PredicateType.RERUN_REQUEST}, run_digest)
    _print_request(summary, receipt.to_json(), as_json)


def _print_request(summary: dict[str, Any], receipt: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(summary | {"receipt": receipt})
        return
    requirements = summary["requirements"]
    out.print(f"rerun requested: job {summary['jobId']} for run {summary['runDigest']}")
    out.print(f"  expires   {summary['expiresAt']}")
    out.print(f"  requires  {requirements['product']} ({requirements['architecture']})")
    out.print(f"  solution  {summary['artifactDigest']}")
    out.print(f"  workload  {summary['workloadDigest']}")
    out.print(f"  event     {receipt.get('event')} at position {receipt.get('position')}")


# What this module adds to `kernelindex` (api/cli/main.py lists it).
app = typer.Typer()
app.command("submit")(submit)
app.add_typer(rerun_app, name="rerun")
