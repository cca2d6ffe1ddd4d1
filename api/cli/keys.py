"""`kernelindex keys`: generate, register, revoke and list signing keys."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from api.cli.common import (
    DbOption,
    HomeOption,
    JsonOption,
    ServerOption,
    handles_errors,
    out,
    print_json,
    print_remote_receipt,
    print_reply,
    remote_server,
)
from api.cli.files import FileExistsRefusal, written_whole
from api.cli.local import load_key, passphrase, print_receipt
from domain.rerun_binding import DeviceClass, parse_device_class
from domain.statements import Role
from domain.timestamps import parse_time
from ledger.home import HomeError, LedgerHome
from ledger.signing.authoring import (
    key_registration_envelope,
    key_revocation_envelope,
)
from ledger.signing.keys import (
    KeyFileError,
    PublicKey,
    SigningKey,
    load_public_key,
    save_public_key,
)

keys_app = typer.Typer(
    help="Generate, register, revoke and list signing keys.", no_args_is_help=True
)


@keys_app.command("generate")
@handles_errors
def keys_generate(
    out_file: Annotated[
        Path, typer.Argument(help="Where to write the private key (PEM, mode 0600).")
    ],
    as_json: JsonOption = False,
) -> None:
    """Generate an Ed25519 key (and FILE.pub to share). $KERNELINDEX_KEY_PASSPHRASE encrypts it."""
    key = SigningKey.generate()
    # Each file whole or not at all; a key never replaces one that is there.
    try:
        with written_whole(out_file, replace=False) as partial:
            key.save(partial, passphrase())
    except FileExistsRefusal:
        raise KeyFileError(f"{out_file} already exists; refusing to overwrite a key") from None
    public_file = out_file.with_name(out_file.name + ".pub")
    with written_whole(public_file) as partial:
        save_public_key(partial, key.public)
    if as_json:
        print_json(
            {
                "file": str(out_file),
                "publicFile": str(public_file),
                "keyId": key.key_id,
                "publicKey": key.public.b64,
            }
        )
    else:
        out.print(
            f"wrote {out_file} (and {public_file.name} to share)\n"
            f"  key id      {key.key_id}\n  public key  {key.public.b64}"
        )


def _subject_key(spec: str) -> PublicKey:
    """A public key from a PEM file (public or private) or a base64 raw key."""
    path = Path(spec)
    if path.exists():
        return (
            load_key(path).public if b"PRIVATE KEY" in path.read_bytes() else load_public_key(path)
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
    device: Annotated[
        list[str] | None,
        typer.Option(
            "--device",
            help="With --role agent (required): a device class the key may measure on, "
            '"PRODUCT/ARCH" of a GPU (e.g. "NVIDIA B200/sm_100") or a test backend '
            "(cpu-test); repeat for several. GPUs and test backends take separate keys.",
        ),
    ] = None,
    home: HomeOption = None,
    db: DbOption = None,
    server: ServerOption = None,
    as_json: JsonOption = False,
) -> None:
    """Register a key with roles (admin-signed, or --self for an attester), in a local
    ledger or on a server (--server: signed here, only the envelope is sent). An agent key
    is bound to the device classes it names (--device): it may claim and report no other."""
    remote = remote_server(server, home, db)
    if remote is not None and not self_signed and admin_key is None:
        raise typer.BadParameter("with --server, sign with --self or --admin-key")
    devices = [parse_device_class(d) for d in device or ()]
    if (Role.AGENT in role) != bool(devices):
        raise typer.BadParameter(
            "an agent key names the device classes it may measure on, and only an agent key "
            'does: give --device "PRODUCT/ARCH" (a GPU) or --device cpu-test with --role agent',
            param_hint="--device",
        )
    target = LedgerHome.at(home, db)
    until: datetime | None = parse_time(valid_until, "--valid-until") if valid_until else None
    if self_signed:
        signer = load_key(Path(key_file))
        subject = signer.public
    else:
        subject = _subject_key(key_file)
        signer = load_key(admin_key) if admin_key else target.key("admin")
    envelope = key_registration_envelope(
        subject, list(role), signer, label=label, valid_until=until, devices=devices
    )
    if remote is not None:
        from api.client import LedgerClient  # noqa: PLC0415 - HTTP client only with --server

        with LedgerClient(remote) as client:
            print_remote_receipt(client.post_key(envelope), as_json, f"key {subject.key_id}")
        return
    print_receipt(target.open().append(envelope), as_json, f"key {subject.key_id}")


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
        record = ledger.key_state(key)
        if record is None:
            raise HomeError(f"key {key} is not registered")
        subject = record.public_key
    else:
        subject = _subject_key(key)
    signer = (
        load_key(self_signed)
        if self_signed
        else (load_key(admin_key) if admin_key else target.key("admin"))
    )
    envelope = key_revocation_envelope(subject, signer, reason=reason)
    print_receipt(ledger.append(envelope), as_json, f"revocation of {subject.key_id}")


@keys_app.command("list")
@handles_errors
def keys_list(
    cursor: Annotated[
        str | None,
        typer.Option("--cursor", help="Start after the page this cursor ended (from the last)."),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, help="Keys to show at most (default: the API's page)."),
    ] = None,
    home: HomeOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Registered keys with their roles, validity and status, in registration order, a page
    at a time; --json prints the page as GET /v1/keys/ sends it."""
    from api.cli.driver import quick_reads  # noqa: PLC0415 - only this command's door
    from api.service.key_pages import LIMIT, VerifiedKeys  # noqa: PLC0415 - as above

    size = LIMIT if limit is None else limit  # the API's own page size, unless asked
    listed: VerifiedKeys | None = None
    # Read through the driver where it can be (issue 33), else through the full service:
    # the same reads either way (api/service/key_pages.py).
    with quick_reads(home, db) as reads:
        if reads is not None and as_json:
            print_reply(reads.keys.list_page(cursor, size))
            return
        if reads is not None:
            listed = reads.keys.verified_page(cursor, size)
    if listed is None:
        from api.cli.service import local_service  # noqa: PLC0415 - the database, when it runs

        with local_service(home, db) as service:
            if as_json:
                print_reply(service.keys.list_page(cursor, size))
                return
            listed = service.keys.verified_page(cursor, size)
    # Each key's events re-verified, as its history shows them (at most two each).
    page, verified = listed.page, listed.verified
    table = Table(title="Registered keys", title_justify="left")
    for column in ("key id", "label", "roles", "registered", "status", "events"):
        table.add_column(column, overflow="fold")
    for k in page.items:
        devices = sorted(DeviceClass(**d).label() for d in k.devices)
        revoked = k.revoked_at.isoformat() if k.revoked_at is not None else ""
        table.add_row(
            k.key_id,
            k.label or "",
            ",".join(k.roles) + (f" ({', '.join(devices)})" if devices else ""),
            k.registered_at.isoformat(),
            k.status if k.status == "active" else f"[red]revoked {revoked}[/]",
            "[green]verified[/]" if verified[k.key_id] else "[bold red]FAILED[/]",
        )
    out.print(table)
    if page.next is not None:
        out.print(f"more: kernelindex keys list --cursor {page.next}")


# What this module adds to `kernelindex` (api/cli/main.py lists it).
app = typer.Typer()
app.add_typer(keys_app, name="keys")
