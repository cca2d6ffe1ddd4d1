"""A ledger home: database, operator keys and trust root in one folder.

Layout (``KERNELINDEX_HOME``, default ``~/.kernelindex``)::

    ledger.db            SQLite event store (unless KERNELINDEX_DB / --db names another)
    trust-root.json      admin and log public keys: what verifiers start from
    keys/admin.pem       registers and revokes keys, requests reruns, retracts runs
    keys/ingester.pem    signs ingestion statements
    keys/log.pem         signs log checkpoints
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from domain.errors import DomainError
from domain.statements import Role
from domain.timestamps import format_time, utc_now
from ledger.application import Ledger
from ledger.signing.authoring import key_registration_envelope
from ledger.signing.keys import SigningKey
from ledger.signing.trust import TrustRoot
from ledger.store.schema import upgrade

HOME_ENV = "KERNELINDEX_HOME"
DB_ENV = "KERNELINDEX_DB"
PASSPHRASE_ENV = "KERNELINDEX_KEY_PASSPHRASE"  # noqa: S105 - a variable name, not a secret


class HomeError(DomainError):
    code = "bad-home"


def default_home() -> Path:
    return Path(os.environ.get(HOME_ENV) or Path.home() / ".kernelindex").expanduser()


@dataclass(frozen=True)
class LedgerHome:
    path: Path
    db_url: str

    @classmethod
    def at(cls, path: Path | None = None, db_url: str | None = None) -> LedgerHome:
        home = (path or default_home()).expanduser().resolve()
        url = db_url or os.environ.get(DB_ENV) or f"sqlite:///{home / 'ledger.db'}"
        return cls(home, url)

    @property
    def trust_root_path(self) -> Path:
        return self.path / "trust-root.json"

    def key_path(self, name: str) -> Path:
        return self.path / "keys" / f"{name}.pem"

    @property
    def exists(self) -> bool:
        return self.trust_root_path.exists()

    def trust_root(self) -> TrustRoot:
        if not self.exists:
            raise HomeError(f"no ledger at {self.path}: run 'kernelindex init' first")
        return TrustRoot.load(self.trust_root_path)

    def key(self, name: str) -> SigningKey:
        passphrase = os.environ.get(PASSPHRASE_ENV)
        return SigningKey.load(self.key_path(name), passphrase.encode() if passphrase else None)

    def open(self, *, read_only: bool = False) -> Ledger:
        """The ledger; ``read_only`` for a command that never appends (it starts faster)."""
        log_key = self.key("log") if self.key_path("log").exists() else None
        return Ledger(self.db_url, self.trust_root(), log_key=log_key, read_only=read_only)

    def initialise(self, origin: str | None = None, passphrase: bytes | None = None) -> Ledger:
        """Create keys and trust root, then register the operator keys in the ledger itself."""
        if self.exists:
            raise HomeError(f"{self.path} already holds a ledger (trust-root.json exists)")
        (self.path / "keys").mkdir(parents=True, exist_ok=True, mode=0o700)
        keys = {name: SigningKey.generate() for name in ("admin", "ingester", "log")}
        for name, key in keys.items():
            key.save(self.key_path(name), passphrase)
        now = utc_now()
        root = TrustRoot(
            origin=origin or f"kernelindex.local/{keys['log'].key_id[7:19]}",
            admin_keys=(keys["admin"].public,),
            log_key=keys["log"].public,
            created_at=format_time(now),
        )
        try:
            ledger = self._register_operators(root, keys, now)
        except BaseException:
            # Nothing of this init is kept (the registrations are one transaction), so the
            # keys go too: running init again starts clean instead of refusing to overwrite.
            for name in keys:
                self.key_path(name).unlink(missing_ok=True)
            raise
        root.save(self.trust_root_path)  # last: it is what marks the home as initialised
        return ledger

    def _register_operators(
        self, root: TrustRoot, keys: dict[str, SigningKey], now: datetime
    ) -> Ledger:
        upgrade(self.db_url)  # a new ledger's database gets its schema here, explicitly
        ledger = Ledger(self.db_url, root, log_key=keys["log"])
        admin = keys["admin"]
        # One group, one transaction: the operator keys are all registered or none are.
        results = ledger.append_many(
            [
                key_registration_envelope(keys[name].public, roles, admin, label=name, now=now)
                for name, roles in (
                    ("admin", [Role.ADMIN]),
                    ("ingester", [Role.INGESTER]),
                    ("log", [Role.LOG]),
                )
            ]
        )
        refused = [r for r in results if isinstance(r, DomainError)]
        if refused:
            ledger.close()
            raise refused[0]
        return ledger
