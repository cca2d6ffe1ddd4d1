"""The ``kernelindex`` command line: a thin edge over the ledger services.

Every refusal prints ``error[<code>]: <reason>`` on stderr and exits non-zero; ``--json``
prints machine-readable output on stdout.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from api.demo import build_demo
from domain.documents import parse_document
from domain.errors import DomainError
from domain.manifests.canonical_form import manifest_digest
from domain.manifests.collection import as_manifest_set, manifests_in
from domain.statements import AttestationType, Role
from domain.timestamps import parse_time
from ledger.application import Ledger, Receipt
from ledger.authoring import (
    attestation_envelope,
    ingestion_envelope,
    key_registration_envelope,
    key_revocation_envelope,
    lifecycle_envelope,
)
from ledger.event_verification import EventVerification
from ledger.history import describe, key_history, run_history
from ledger.home import PASSPHRASE_ENV, HomeError, LedgerHome
from ledger.keys import KeyFileError, PublicKey, SigningKey, load_public_key
from ledger.run_summary import run_summary

EXIT_REJECTED = 1
EXIT_USAGE = 2

app = typer.Typer(
    name="kernelindex",
    help="KernelIndex Ledger: signed, append-only, offline-verifiable GPU-kernel benchmarks.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
keys_app = typer.Typer(
    help="Generate, register, revoke and list signing keys.", no_args_is_help=True
)
app.add_typer(keys_app, name="keys")

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

P = ParamSpec("P")
R = TypeVar("R")

HomeOption = Annotated[
    Path | None,
    typer.Option("--home", help="Ledger home (default $KERNELINDEX_HOME or ~/.kernelindex)."),
]
DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="SQLAlchemy URL of the event store (default $KERNELINDEX_DB or the home's SQLite).",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]


def _print_error(code: str, message: str) -> None:
    err.print(f"[bold red]error{escape('[' + code + ']')}[/]: {escape(message)}")


def _fail(code: str, message: str, exit_code: int = EXIT_REJECTED) -> typer.Exit:
    _print_error(code, message)
    return typer.Exit(exit_code)


def handles_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn every expected refusal into a clear message and a non-zero exit, never a traceback."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except DomainError as exc:
            raise _fail(exc.code, exc.message) from None
        except KeyFileError as exc:
            raise _fail("bad-key-file", str(exc)) from None
        except OSError as exc:
            raise _fail("io", f"{exc.filename or ''}: {exc.strerror}") from None

    return wrapper


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def _open(home: Path | None, db: str | None) -> Ledger:
    return LedgerHome.at(home, db).open()


def _passphrase() -> bytes | None:
    value = os.environ.get(PASSPHRASE_ENV)
    return value.encode() if value else None


def _load_key(path: Path) -> SigningKey:
    return SigningKey.load(path, _passphrase())


def _print_receipt(receipt: Receipt, as_json: bool, what: str) -> None:
    if as_json:
        _print_json(receipt.to_json())
        return
    verb = "already recorded" if receipt.duplicate else "appended"
    out.print(
        f"{what} {verb}: {receipt.event} at position {receipt.position} "
        f"(subject {receipt.subject_digest}, received {receipt.received_at})"
    )


# ------------------------------------------------------------------ commands


@app.command()
@handles_errors
def init(
    home: HomeOption = None,
    db: DbOption = None,
    origin: Annotated[str | None, typer.Option(help="Log origin name for checkpoints.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Create a ledger home: database, admin/ingester/log keys and trust-root.json."""
    target = LedgerHome.at(home, db)
    ledger = target.initialise(origin=origin, passphrase=_passphrase())
    root = ledger.trust_root
    keys = {name: target.key(name).key_id for name in ("admin", "ingester", "log")}
    if as_json:
        _print_json(
            {
                "home": str(target.path),
                "db": target.db_url,
                "trustRoot": root.to_json(),
                "keys": keys,
            }
        )
        return
    out.print(f"Initialised ledger at [bold]{target.path}[/] (origin {root.origin})")
    out.print(f"  database    {target.db_url}")
    out.print(f"  trust root  {target.trust_root_path}")
    for name, key_id in keys.items():
        out.print(f"  {name:<10}  {key_id}  ({target.key_path(name)})")


@app.command()
def digest(
    files: Annotated[list[Path], typer.Argument(help="Manifest files (JSON or YAML).")],
    as_json: JsonOption = False,
) -> None:
    """Print the kind, name and sha256 digest of every manifest in FILES."""
    results: list[dict[str, Any]] = []
    failed = False
    for path in files:
        try:
            document = parse_document(path.read_bytes(), filename=path.name)
            for role, manifest in manifests_in(document):
                results.append(
                    {
                        "file": str(path),
                        "role": role,
                        "kind": manifest.get("kind"),
                        "name": (manifest.get("metadata") or {}).get("name"),
                        "digest": manifest_digest(manifest),
                    }
                )
        except DomainError as exc:
            failed = True
            results.append({"file": str(path), "error": exc.code, "message": exc.message})
        except OSError as exc:
            failed = True
            results.append({"file": str(path), "error": "io", "message": str(exc.strerror)})
    if as_json:
        _print_json(results)
    else:
        for row in results:
            if "error" in row:
                _print_error(row["error"], f"{row['file']}: {row['message']}")
            else:
                role = f"{row['role']:<12}" if row["role"] else ""
                out.print(f"{role}{row['kind']:<24} {row['name']:<40} {row['digest']}")
    if failed:
        raise typer.Exit(EXIT_REJECTED)


@app.command()
@handles_errors
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
    """Sign an ingestion statement for a run and append it."""
    target = LedgerHome.at(home, db)
    raw = file.read_bytes()
    manifests = as_manifest_set(parse_document(raw, filename=file.name))
    signer = _load_key(key) if key else target.key("ingester")
    envelope = ingestion_envelope(
        manifests,
        signer,
        source=source,
        external_id=external_id,
        snapshot_digest="sha256:" + hashlib.sha256(raw).hexdigest(),
    )
    receipt = target.open().append(envelope)
    _print_receipt(receipt, as_json, "run")


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
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Append a signed attestation about a run. It never changes the run's evidence level."""
    ledger = _open(home, db)
    run_digest = ledger.resolve_run(run)
    record = ledger.run(run_digest)
    assert record is not None
    envelope = attestation_envelope(
        run_digest,
        record.run_name,
        _load_key(key),
        type_=type_.value,
        body=body,
        evidence_url=evidence_url,
        observed_ns=observed_ns,
        environment_summary=environment,
    )
    _print_receipt(ledger.append(envelope), as_json, "attestation")


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
    target = LedgerHome.at(home, db)
    ledger = target.open()
    run_digest = ledger.resolve_run(run)
    record = ledger.run(run_digest)
    assert record is not None
    signer = _load_key(key) if key else target.key("admin")
    envelope = lifecycle_envelope(
        run_digest, record.run_name, signer, action="retract", reason=reason
    )
    _print_receipt(ledger.append(envelope), as_json, "retraction")


@app.command()
@handles_errors
def show(
    run: Annotated[str, typer.Argument(help="Run digest or unique prefix.")],
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Summarise one run record."""
    ledger = _open(home, db)
    summary = run_summary(ledger, ledger.resolve_run(run))
    if as_json:
        _print_json(summary)
        return
    _print_summary(summary)


def _print_summary(summary: dict[str, Any]) -> None:
    primary = summary["primary"]
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    rows: list[tuple[str, Any]] = [
        ("run", f"{summary['name']}  {summary['title'] or ''}"),
        ("digest", summary["digest"]),
        (
            "source",
            f"{summary['source']} #{summary['externalId']}"
            if summary["externalId"]
            else summary["source"],
        ),
        ("status", summary["status"]),
        (
            "primary",
            f"{primary['statistic']} latency {primary['latencyNs']} ns"
            if primary["statistic"]
            else "none",
        ),
        ("observed", summary["observedAt"]),
        ("protocol", f"{summary['protocol']['title'] or ''}  {summary['protocol']['digest']}"),
        (
            "environment",
            f"{summary['environment']['title'] or ''}  {summary['environment']['digest']}",
        ),
        ("implementation", summary["implementationDigest"]),
        ("workload", summary["workloadDigest"]),
        ("ingested", summary["ingestedAt"]),
        ("attestations", str(len(summary["attestations"]))),
        (
            "lifecycle",
            "retracted"
            if summary["retracted"]
            else f"superseded by {summary['supersededBy']}"
            if summary["supersededBy"]
            else "active",
        ),
        (
            "events",
            f"{summary['events']} "
            + ("(all verified)" if summary["allEventsVerified"] else "(FAILURES: see history)"),
        ),
    ]
    for label, value in rows:
        table.add_row(label, str(value) if value is not None else "—")
    out.print(table)


def _print_history(entries: list[EventVerification], title: str) -> None:
    """One block per event; reads at any terminal width, unlike a seven-column table."""
    out.print(f"[bold]{escape(title)}[/]")
    for h in entries:
        verdict = (
            "[green]✓ verified[/]"
            if h.ok
            else "[bold red]✗ FAILED[/] "
            + escape("; ".join(f"{c.name}: {c.detail}" for c in h.failures))
        )
        out.print(f"\n#{h.position}  {h.received_at or '?'}  [bold]{h.event}[/]  {verdict}")
        out.print(f"    signer {h.signer or 'unknown'} ({h.role or 'no verified role'})")
        out.print(f"    {escape(describe(h))}")


@app.command()
@handles_errors
def history(
    run: Annotated[str, typer.Argument(help="Run digest or unique prefix.")],
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Every event of a run: time, type, signer and role, signature check, what it says."""
    ledger = _open(home, db)
    run_digest = ledger.resolve_run(run)
    entries = run_history(ledger, run_digest)
    if as_json:
        _print_json(
            {"run": run_digest, "events": [h.to_json() | {"says": describe(h)} for h in entries]}
        )
    else:
        _print_history(entries, f"History of {run_digest}")
    if not all(h.ok for h in entries):
        raise typer.Exit(EXIT_REJECTED)


@app.command()
@handles_errors
def demo(
    home: Annotated[Path, typer.Option("--home", help="Where to build the demo ledger.")] = Path(
        ".kernelindex-demo"
    ),
    db: DbOption = None,
) -> None:
    """Build (or reuse) a demo ledger with the seed run, then show its record and history."""
    target = LedgerHome.at(home, db)
    ledger, run_digest = build_demo(target)
    out.print(f"Demo ledger at [bold]{target.path}[/] ({target.db_url})\n")
    _print_summary(run_summary(ledger, run_digest))
    out.print()
    _print_history(run_history(ledger, run_digest), f"History of {run_digest}")
    out.print(f"\nTry: kernelindex --help;  KERNELINDEX_HOME={target.path} kernelindex keys list")


# ---------------------------------------------------------------------- keys


@keys_app.command("generate")
@handles_errors
def keys_generate(
    out_file: Annotated[
        Path, typer.Argument(help="Where to write the private key (PEM, mode 0600).")
    ],
    as_json: JsonOption = False,
) -> None:
    """Generate an Ed25519 key. Set $KERNELINDEX_KEY_PASSPHRASE to encrypt it."""
    key = SigningKey.generate()
    key.save(out_file, _passphrase())
    if as_json:
        _print_json({"file": str(out_file), "keyId": key.key_id, "publicKey": key.public.b64})
    else:
        out.print(f"wrote {out_file}\n  key id      {key.key_id}\n  public key  {key.public.b64}")


def _subject_key(spec: str) -> PublicKey:
    """A public key from a PEM file (public or private) or a base64 raw key."""
    path = Path(spec)
    if path.exists():
        return (
            _load_key(path).public if b"PRIVATE KEY" in path.read_bytes() else load_public_key(path)
        )
    try:
        return PublicKey.from_b64(spec)
    except ValueError:
        raise HomeError(f"{spec} is neither a key file nor a base64 public key") from None


@keys_app.command("register")
@handles_errors
def keys_register(
    key_file: Annotated[
        str, typer.Argument(help="The key to register: PEM file or base64 public key.")
    ],
    role: Annotated[list[Role], typer.Option("--role", help="Role(s) to grant.")],
    self_signed: Annotated[
        bool,
        typer.Option(
            "--self", help="Sign with KEY_FILE itself (attester only): proof of possession."
        ),
    ] = False,
    admin_key: Annotated[
        Path | None, typer.Option("--admin-key", help="Admin key (default: the home's admin key).")
    ] = None,
    label: Annotated[str | None, typer.Option(help="A name for people.")] = None,
    valid_until: Annotated[
        str | None, typer.Option("--valid-until", help="RFC 3339 expiry.")
    ] = None,
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Register a key with roles (admin-signed, or --self for an attester)."""
    target = LedgerHome.at(home, db)
    until: datetime | None = parse_time(valid_until, "--valid-until") if valid_until else None
    if self_signed:
        signer = _load_key(Path(key_file))
        subject = signer.public
    else:
        subject = _subject_key(key_file)
        signer = _load_key(admin_key) if admin_key else target.key("admin")
    envelope = key_registration_envelope(
        subject, list(role), signer, label=label, valid_until=until
    )
    _print_receipt(target.open().append(envelope), as_json, f"key {subject.key_id}")


@keys_app.command("revoke")
@handles_errors
def keys_revoke(
    key: Annotated[str, typer.Argument(help="Key id, PEM file or base64 public key to revoke.")],
    reason: Annotated[str | None, typer.Option(help="Why (e.g. compromised).")] = None,
    self_signed: Annotated[
        Path | None, typer.Option("--self", help="Revoke by signing with the key itself.")
    ] = None,
    admin_key: Annotated[
        Path | None, typer.Option("--admin-key", help="Admin key (default: the home's admin key).")
    ] = None,
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Revoke a key: it signs nothing more from now on."""
    target = LedgerHome.at(home, db)
    ledger = target.open()
    if key.startswith("sha256:"):
        record = ledger.key_record(key)
        if record is None:
            raise HomeError(f"key {key} is not registered")
        subject = record.public_key
    else:
        subject = _subject_key(key)
    signer = (
        _load_key(self_signed)
        if self_signed
        else (_load_key(admin_key) if admin_key else target.key("admin"))
    )
    envelope = key_revocation_envelope(subject, signer, reason=reason)
    _print_receipt(ledger.append(envelope), as_json, f"revocation of {subject.key_id}")


@keys_app.command("list")
@handles_errors
def keys_list(home: HomeOption = None, db: DbOption = None, as_json: JsonOption = False) -> None:
    """Every registered key with its roles, validity and status."""
    ledger = _open(home, db)
    rows: list[dict[str, Any]] = []
    for key_id in ledger.key_ids():
        record = ledger.key_record(key_id)
        if record is None:
            continue
        verified = all(h.ok for h in key_history(ledger, key_id))
        rows.append(
            {
                "keyId": record.key_id,
                "label": record.label,
                "roles": sorted(record.roles),
                "validFrom": record.valid_from.isoformat(),
                "validUntil": record.valid_until.isoformat() if record.valid_until else None,
                "registeredAt": record.registered_at.isoformat(),
                "revokedAt": record.revoked_at.isoformat() if record.revoked_at else None,
                "status": "revoked" if record.revoked_at else "active",
                "verified": verified,
            }
        )
    if as_json:
        _print_json(rows)
        return
    table = Table(title="Registered keys", title_justify="left")
    for column in ("key id", "label", "roles", "registered", "status", "events"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(
            row["keyId"],
            row["label"] or "",
            ",".join(row["roles"]),
            row["registeredAt"],
            row["status"] if row["status"] == "active" else f"[red]revoked {row['revokedAt']}[/]",
            "[green]verified[/]" if row["verified"] else "[bold red]FAILED[/]",
        )
    out.print(table)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
