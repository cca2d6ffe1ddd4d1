"""`kernelindex witness ...`: run a witness, and a ledger's side of its witnesses.

- ``serve``: a C2SP tlog-witness for the logs it is told to follow (``--follow ORIGIN=VKEY``
  or ``--follow-trust-root FILE``), with a state folder of its own and no ledger database;
- ``key``: make (or read) a witness key and print its cosigner vkey, for a ledger's policy;
- ``status``: how far the ledger's checkpoints are cosigned, by whom, and the lag;
- ``sync``: ask the ledger's witnesses now (what the writer process does in the background);
- ``proofs``: one C2SP tlog-proof file per event of a bundle;
- ``check-proof``: verify tlog-proof files offline, against a trust root and a policy.

Only ``status``, ``sync`` and ``proofs`` open a ledger: the database stack loads inside them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from api.cli.common import (
    EXIT_REJECTED,
    DbOption,
    HomeOption,
    JsonOption,
    err,
    fail,
    handles_errors,
    out,
    print_json,
)
from api.cli.files import written_into, written_whole
from ledger.proofs.signed_note import Verifier, verifier_key_string
from ledger.signing.keys import SigningKey
from ledger.signing.trust import TrustRoot
from ledger.witness.cosignature import CosignerKey
from ledger.witness.policy import Policy, PolicyError, parse_policy, read_policy_file
from ledger.witness.server import DEFAULT_PORT, ASGIApp, WitnessServeConfig, serve
from ledger.witness.tlog_proof import TlogProofError, verify_tlog_proof

if TYPE_CHECKING:
    from ledger.home import LedgerHome

witness_app = typer.Typer(
    help="Witnesses: run one, and see or ask a ledger's (C2SP tlog-witness).",
    no_args_is_help=True,
)
app = typer.Typer()
app.add_typer(witness_app, name="witness")

PolicyOption = Annotated[
    Path | None,
    typer.Option(
        "--policy",
        help="A C2SP tlog-policy file: the witnesses whose quorum must have cosigned "
        "(default: the one the trust root names).",
    ),
]


def follow_of(trust_root: Path) -> str:
    """``ORIGIN=VKEY`` of the log a ledger's trust root names."""
    root = TrustRoot.load(trust_root)
    return f"{root.origin}={verifier_key_string(root.origin, root.log_key.raw)}"


def _uvicorn(app: ASGIApp, host: str, port: int) -> None:
    import uvicorn  # noqa: PLC0415 - the web server only once serving

    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


@witness_app.command("serve")
@handles_errors
def serve_witness(
    name: Annotated[str, typer.Option("--name", help="The witness's name (its key's name).")],
    key: Annotated[Path, typer.Option("--key", help="Its Ed25519 key (`witness key`).")],
    follow: Annotated[
        list[str] | None,
        typer.Option("--follow", help="A log to cosign for: ORIGIN=VKEY (repeatable)."),
    ] = None,
    follow_trust_root: Annotated[
        list[Path] | None,
        typer.Option(
            "--follow-trust-root", help="The log a ledger's trust-root.json names (repeatable)."
        ),
    ] = None,
    state: Annotated[
        Path, typer.Option("--state", help="Its state folder (witness.sqlite3, evidence).")
    ] = Path("witness-state"),
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = DEFAULT_PORT,
    prefix: Annotated[str, typer.Option(help="URL path prefix of both APIs.")] = "",
) -> None:
    """Run a C2SP tlog-witness: cosign each checkpoint that extends the last one cosigned."""
    logs = [*(follow or []), *(follow_of(p) for p in follow_trust_root or [])]
    config = WitnessServeConfig(name, key, tuple(logs), state, host, port, prefix)
    try:
        vkey = CosignerKey.from_private_key(name, SigningKey.load(key).private_key())
    except ValueError as exc:
        raise fail("bad-witness", str(exc)) from None
    # What a log's operator needs, on stdout, before the server takes over the terminal.
    sys.stdout.write(f"vkey {vkey.key_string()}\nlistening http://{host}:{port}{prefix}\n")
    sys.stdout.flush()
    try:
        serve(config, _uvicorn)
    except ValueError as exc:
        raise fail("bad-witness", str(exc)) from None


@witness_app.command("key")
@handles_errors
def witness_key(
    name: Annotated[str, typer.Option("--name", help="The witness's name (its key's name).")],
    key: Annotated[Path, typer.Argument(help="Key file: made if it does not exist.")],
) -> None:
    """Make (or read) a witness's key; print its cosigner vkey, for a ledger's policy."""
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True)
        # Whole or not at all, and never over a key made meanwhile (api.cli.files).
        with written_whole(key, replace=False) as partial:
            SigningKey.generate().save(partial)
    try:
        cosigner = CosignerKey.from_private_key(name, SigningKey.load(key).private_key())
    except ValueError as exc:
        raise fail("bad-witness", str(exc)) from None
    sys.stdout.write(cosigner.key_string() + "\n")


def _home(home: Path | None, db: str | None) -> LedgerHome:
    from ledger.home import LedgerHome  # noqa: PLC0415 - loads the database stack

    return LedgerHome.at(home, db)


def status_of(target: LedgerHome) -> dict[str, Any]:
    """The ledger's newest checkpoint, its newest cosigned one, the lag, and each witness."""
    from api.cli.service import service_over  # noqa: PLC0415 - loads the database stack
    from api.service.models import to_builtins  # noqa: PLC0415

    policy = target.witness_policy()
    ledger = target.open(read_only=True)
    try:
        with service_over(ledger) as service:
            found: dict[str, Any] = to_builtins(service.log.witnessed(policy))
    finally:
        ledger.close()
    found["witnesses"] = [
        {"name": w.name, "vkey": w.key.key_string(), "url": w.url}
        for w in (policy.witnesses if policy else ())
    ]
    found["quorum"] = policy.quorum if policy else None
    return found


def print_status(found: dict[str, Any]) -> None:
    out.print(f"log       {found['origin']}: {found['size']} leaves")
    cosigned = found["cosigned"]
    if cosigned is None:
        out.print("cosigned  nothing yet")
    else:
        by = ", ".join(cosigned["witnesses"])
        out.print(f"cosigned  {cosigned['size']} leaves by {by} (lag {found['witnessLag']})")
    newest = found["newestByWitness"]
    for w in found["witnesses"]:
        key = "+".join(w["vkey"].split("+", 2)[:2])  # name+key id (base64 may hold '+')
        out.print(f"witness   {w['name']}  {w['url'] or '-'}  cosigned up to {newest.get(key, 0)}")


@witness_app.command("status")
@handles_errors
def witness_status(
    home: HomeOption = None, db: DbOption = None, as_json: JsonOption = False
) -> None:
    """How far the ledger's checkpoints are cosigned, by whom, and by how much they lag."""
    found = status_of(_home(home, db))
    if as_json:
        print_json(found)
    else:
        print_status(found)


def sync(target: LedgerHome, timeout: float = 1.0) -> list[dict[str, Any]]:
    """Ask the home's witnesses to cosign the newest checkpoint now; what each one did."""
    from ledger.witnessing import Witnessing  # noqa: PLC0415 - loads the database stack

    endpoints = target.witnesses()
    if not endpoints:
        raise fail("no-witnesses", f"{target.path} names no witness (witness-policy)")
    ledger = target.open()
    witnessing = Witnessing(ledger.tlog, endpoints, timeout=timeout)
    try:
        outcomes = witnessing.round()
        states = witnessing.status()
    finally:
        witnessing.close()
        ledger.close()
    del outcomes  # each witness's last outcome is in its state, asked or not
    return [
        {
            "witness": s.name,
            "url": s.url,
            "outcome": s.outcome or "up to date",
            "detail": s.detail,
            "cosignedSize": s.cosigned_size,
            "alarm": s.alarm,
        }
        for s in states
    ]


@witness_app.command("sync")
@handles_errors
def witness_sync(
    home: HomeOption = None,
    db: DbOption = None,
    timeout: Annotated[float, typer.Option(help="Seconds each request may take.")] = 1.0,
    as_json: JsonOption = False,
) -> None:
    """Ask the ledger's witnesses to cosign its newest checkpoint now, and wait for them."""
    target = _home(home, db)
    asked = sync(target, timeout)
    found = status_of(target)
    if as_json:
        print_json({"asked": asked, "status": found})
    else:
        for row in asked:
            mark = "[bold red]ALARM[/] " if row["alarm"] else ""
            out.print(f"{mark}{row['witness']}: {row['outcome']} {row['detail']}".rstrip())
        print_status(found)
    if any(row["alarm"] for row in asked):
        raise typer.Exit(EXIT_REJECTED)


@witness_app.command("proofs")
@handles_errors
def witness_proofs(
    bundle: Annotated[Path, typer.Argument(help="A bundle from `kernelindex export`.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Folder for the files.")],
    home: HomeOption = None,
    db: DbOption = None,
) -> None:
    """Write a C2SP tlog-proof file per event of a bundle (index, proof, cosigned checkpoint)."""
    from ledger.proof_files import bundle_leaves, write_tlog_proofs  # noqa: PLC0415

    ledger = _home(home, db).open(read_only=True)
    try:
        # Every file whole, and none moved into OUTPUT unless all were written.
        with written_into(output) as staging:
            written = write_tlog_proofs(ledger, bundle_leaves(bundle), staging)
    finally:
        ledger.close()
    err.print(
        f"wrote {written.files} tlog-proof files to {output}: against the checkpoint of "
        f"{written.checkpoint_size} leaves, {written.cosignatures} cosignatures"
    )


def proof_policy(policy: Path | None, root: TrustRoot) -> Policy | None:
    if policy is not None:
        return read_policy_file(policy)
    if root.witness_policy is None:
        return None
    try:
        return parse_policy(root.witness_policy)
    except PolicyError as exc:
        raise fail("bad-witness-policy", f"the trust root's policy: {exc.message}") from None


@witness_app.command("check-proof")
@handles_errors
def check_proof(
    files: Annotated[list[Path], typer.Argument(help="tlog-proof files.")],
    trust_root: Annotated[
        Path, typer.Option("--trust-root", help="The ledger's trust root, pinned.")
    ],
    policy: PolicyOption = None,
    as_json: JsonOption = False,
) -> None:
    """Verify C2SP tlog-proof files offline: the log key, the witness quorum, the inclusion."""
    root = TrustRoot.load(trust_root)
    held = proof_policy(policy, root)
    log = Verifier.from_public_key(root.origin, root.log_key.raw)
    results = []
    for path in files:
        try:
            proved = verify_tlog_proof(path.read_bytes(), [log], origin=root.origin, policy=held)
            results.append({"file": str(path), "ok": True, "index": proved.index})
        except TlogProofError as exc:
            results.append(
                {"file": str(path), "ok": False, "code": exc.code, "reason": exc.message}
            )
    if as_json:
        print_json(results)
    else:
        if held is None:
            out.print("[yellow]note[/]: no witness policy: the files prove what the log key signed")
        for r in results:
            if r["ok"]:
                out.print(f"[green]OK[/]      {r['file']}: leaf {r['index']}")
            else:
                out.print(f"[red]FAILED[/]  {r['file']}: {r['code']}: {r['reason']}")
    if not all(r["ok"] for r in results):
        raise typer.Exit(EXIT_REJECTED)


def main() -> None:
    """``python -m api.cli.witness ...``: these commands before the CLI lists them."""
    app(prog_name="kernelindex")


if __name__ == "__main__":
    main()
