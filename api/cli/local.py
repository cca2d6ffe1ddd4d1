"""The commands' side of a local ledger: opening it, loading signing keys, printing receipts.

Apart from ``api.cli.common`` because opening a ledger loads the database stack, which the
offline verifier never needs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from api.cli.common import out, print_json
from ledger.home import PASSPHRASE_ENV, LedgerHome
from ledger.signing.keys import SigningKey

if TYPE_CHECKING:
    from ledger.application import Ledger
    from ledger.logged_event import LoggedEvent


def open_ledger(home: Path | None, db: str | None, *, read_only: bool = False) -> Ledger:
    return LedgerHome.at(home, db).open(read_only=read_only)


def passphrase() -> bytes | None:
    value = os.environ.get(PASSPHRASE_ENV)
    return value.encode() if value else None


def load_key(path: Path) -> SigningKey:
    return SigningKey.load(path, passphrase())


def print_receipt(receipt: LoggedEvent, as_json: bool, what: str) -> None:
    if as_json:
        print_json(receipt.to_json())
        return
    verb = "already recorded" if receipt.duplicate else "appended"
    out.print(
        f"{what} {verb}: {receipt.event} at position {receipt.position} "
        f"(subject {receipt.subject_digest}, received {receipt.received_at})"
    )
