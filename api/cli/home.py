"""`kernelindex init`, `digest` and `demo`: a ledger home, manifest digests, the demo."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from api.cli.common import (
    EXIT_REJECTED,
    DbOption,
    HomeOption,
    JsonOption,
    handles_errors,
    out,
    print_error,
    print_json,
)
from api.cli.local import passphrase
from api.cli.runs import print_history, print_summary  # the demo shows what `show` does
from api.demo import DEMO_HOME, build_demo, demo_home
from domain.documents import parse_document
from domain.errors import DomainError
from domain.manifests.canonical_form import manifest_digest
from domain.manifests.collection import manifests_in
from ledger.home import LedgerHome, parse_witness_option

app = typer.Typer()


@app.command()
@handles_errors
def init(
    home: HomeOption = None,
    db: DbOption = None,
    origin: Annotated[str | None, typer.Option(help="Log origin name for checkpoints.")] = None,
    witness: Annotated[
        list[str] | None,
        typer.Option(
            "--witness",
            help="A witness the log asks to cosign its checkpoints: URL=VKEY "
            "(`kernelindex witness key`); repeatable.",
        ),
    ] = None,
    witness_quorum: Annotated[
        int | None,
        typer.Option(
            "--witness-quorum",
            min=1,
            help="How many witnesses a bundle needs (default: a majority).",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Create a ledger home: database, admin/ingester/log keys and trust-root.json."""
    target = LedgerHome.at(home, db)
    ledger = target.initialise(
        origin=origin,
        passphrase=passphrase(),
        witnesses=[parse_witness_option(w) for w in witness or []],
        quorum=witness_quorum,
    )
    from api.service.admin import prepare_views  # noqa: PLC0415 - the read models' tables

    prepare_views(target.db_url)
    root = ledger.trust_root
    keys = {name: target.key(name).key_id for name in ("admin", "ingester", "log")}
    if as_json:
        print_json(
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
        print_json(results)
    else:
        for row in results:
            if "error" in row:
                print_error(row["error"], f"{row['file']}: {row['message']}")
            else:
                role = f"{row['role']:<12}" if row["role"] else ""
                out.print(f"{role}{row['kind']:<24} {row['name']:<40} {row['digest']}")
    if failed:
        raise typer.Exit(EXIT_REJECTED)


@app.command()
@handles_errors
def demo(
    home: Annotated[
        Path | None,
        typer.Option(
            "--home",
            help=f"Where to build the demo ledger (default {DEMO_HOME}; its own SQLite file "
            "unless --db is given).",
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Build (or reuse) a demo ledger with the seed run, then show its record and history."""
    target = demo_home(home, db)
    ledger, run_digest = build_demo(target)
    out.print(f"Demo ledger at [bold]{target.path}[/] ({target.db_url})\n")
    from api.cli.service import service_over  # noqa: PLC0415 - the database, when it runs

    with service_over(ledger) as service:
        record = service.runs.record(run_digest)
        history = service.history.run(run_digest)
    print_summary(record)
    out.print()
    print_history(history.events, f"History of {run_digest}")
    out.print(f"\nTry: kernelindex --help;  KERNELINDEX_HOME={target.path} kernelindex keys list")
