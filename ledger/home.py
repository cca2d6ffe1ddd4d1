"""A ledger home: database, operator keys and trust root in one folder.

Layout (``KERNELINDEX_HOME``, default ``~/.kernelindex``)::

    ledger.db            SQLite event store (unless KERNELINDEX_DB / --db names another)
    trust-root.json      admin and log public keys: what verifiers start from
    witness-policy       (optional) the witnesses the log asks to cosign its checkpoints,
                         with their URLs, and the default quorum: a C2SP tlog-policy file
    keys/admin.pem       registers and revokes keys, requests reruns, retracts runs
    keys/ingester.pem    signs ingestion statements
    keys/log.pem         signs log checkpoints

A home without a witness policy works as it always did: nothing is asked of anyone.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from domain.errors import DomainError
from domain.statements import Role
from domain.timestamps import format_time, utc_now
from ledger.signing.keys import PublicKey, SigningKey
from ledger.signing.log_key import DeferredKey
from ledger.signing.trust import TrustRoot

if TYPE_CHECKING:
    from ledger.application import Ledger
    from ledger.witness.client import WitnessEndpoint
    from ledger.witness.policy import Policy

HOME_ENV = "KERNELINDEX_HOME"
DB_ENV = "KERNELINDEX_DB"
PASSPHRASE_ENV = "KERNELINDEX_KEY_PASSPHRASE"  # noqa: S105 - a variable name, not a secret
WITNESS_POLICY_FILE = "witness-policy"
WITNESS_GROUP = "witnesses"


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

    @property
    def witness_policy_path(self) -> Path:
        return self.path / WITNESS_POLICY_FILE

    def witness_policy_text(self) -> str | None:
        """The home's witness policy file, else the one its trust root names, else None."""
        if self.witness_policy_path.exists():
            return self.witness_policy_path.read_text("utf-8")
        return self.trust_root().witness_policy

    def witness_policy(self) -> Policy | None:
        from ledger.witness.policy import PolicyError, parse_policy  # noqa: PLC0415 - see open()

        text = self.witness_policy_text()
        if text is None:
            return None
        try:
            return parse_policy(text)
        except PolicyError as exc:
            raise HomeError(f"the witness policy of {self.path}: {exc.message}") from None

    def witnesses(self) -> list[WitnessEndpoint]:
        """The witnesses the log asks: the policy's witness lines that give a URL."""
        from ledger.witness.client import WitnessEndpoint  # noqa: PLC0415 - loads httpx

        policy = self.witness_policy()
        if policy is None:
            return []
        return [WitnessEndpoint(w.url, w.key) for w in policy.witnesses if w.url]

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

    def open(self, *, read_only: bool = False, witnessing: bool = False, **options: Any) -> Ledger:
        """The ledger; ``read_only`` for a command that never appends (it starts faster).
        ``witnessing``: the process that writes asks the home's witnesses to cosign each
        checkpoint, in the background (``options`` go to ``ledger.witnessing.Witnessing``);
        a home without witnesses ignores it."""
        # A command that reads through the driver alone (api/service/driver_reads.py)
        # resolves its home without the database stack, the witnesses or key authoring.
        from ledger.application import Ledger  # noqa: PLC0415

        root = self.trust_root()
        log_key: SigningKey | DeferredKey | None = None
        if self.key_path("log").exists() and read_only:
            # A reader signs only a checkpoint no commit stored: its key file is read then.
            log_key = DeferredKey(lambda: self.key("log"), root.log_key)
        elif self.key_path("log").exists():
            log_key = self.key("log")  # a writer signs every commit: a bad key refuses now
        ledger = Ledger(self.db_url, root, log_key=log_key, read_only=read_only)
        if not read_only and log_key is not None and self.witness_policy() is not None:
            # A witnessed log commits its heads as a leaf of every commit, so that what makes
            # a scoped bundle complete is under what the witnesses cosign (docs/witnesses.md).
            ledger.tlog.enable_heads_leaf()
        if witnessing and not read_only and log_key is not None:
            endpoints = self.witnesses()
            if endpoints:
                ledger.start_witnessing(endpoints, **options)
        return ledger

    def initialise(
        self,
        origin: str | None = None,
        passphrase: bytes | None = None,
        *,
        witnesses: Sequence[tuple[str, str]] = (),
        quorum: int | None = None,
    ) -> Ledger:
        """Create keys and trust root, then register the operator keys in the ledger itself.

        ``witnesses``: (cosigner vkey, URL) of each witness the log will ask; they and the
        ``quorum`` (default: a majority) are written as the home's witness policy, which the
        trust root names as the default a verifier holds bundles to."""
        if self.exists:
            raise HomeError(f"{self.path} already holds a ledger (trust-root.json exists)")
        if quorum is not None and not witnesses:
            raise HomeError("a witness quorum needs witnesses (--witness VKEY URL)")
        (self.path / "keys").mkdir(parents=True, exist_ok=True, mode=0o700)
        keys = {name: SigningKey.generate() for name in ("admin", "ingester", "log")}
        origin = origin or f"kernelindex.local/{keys['log'].key_id[7:19]}"
        policy = (
            witness_policy_text(origin, keys["log"].public, witnesses, quorum)
            if witnesses
            else None
        )
        for name, key in keys.items():
            key.save(self.key_path(name), passphrase)
        now = utc_now()
        root = TrustRoot(
            origin=origin,
            admin_keys=(keys["admin"].public,),
            log_key=keys["log"].public,
            created_at=format_time(now),
            witness_policy=policy,
        )
        try:
            ledger = self._register_operators(root, keys, now)
        except BaseException:
            # Nothing of this init is kept (the registrations are one transaction), so the
            # keys go too: running init again starts clean instead of refusing to overwrite.
            for name in keys:
                self.key_path(name).unlink(missing_ok=True)
            raise
        if policy is not None:
            self.witness_policy_path.write_text(policy, "utf-8")
        root.save(self.trust_root_path)  # last: it is what marks the home as initialised
        return ledger

    def _register_operators(
        self, root: TrustRoot, keys: dict[str, SigningKey], now: datetime
    ) -> Ledger:
        from ledger.application import Ledger  # noqa: PLC0415 - see open()
        from ledger.store.schema import upgrade  # noqa: PLC0415 - see open()

        upgrade(self.db_url)  # a new ledger's database gets its schema here, explicitly
        ledger = Ledger(self.db_url, root, log_key=keys["log"])
        if root.witness_policy is not None:
            ledger.tlog.enable_heads_leaf()  # from the first commit (as ``open`` does)
        admin = keys["admin"]
        from ledger.signing.authoring import key_registration_envelope  # noqa: PLC0415 - see open()

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


def parse_witness_option(text: str) -> tuple[str, str]:
    """``URL=VKEY`` (``init --witness``) as (vkey, URL): split at the last ``=``, which a
    cosigner vkey (33 bytes of base64, unpadded) never holds."""
    url, sep, vkey = text.rpartition("=")
    if not sep or not url or not vkey:
        raise HomeError(f"--witness {text!r}: expected URL=VKEY")
    return vkey, url


def witness_policy_text(
    origin: str, log_key: PublicKey, witnesses: Sequence[tuple[str, str]], quorum: int | None
) -> str:
    """A C2SP tlog-policy: this log, each witness (named by its key's name, with its URL),
    and a group of them all with the quorum as its threshold (default: a majority)."""
    # Only ``init`` writes a policy: a read resolving its home loads none of this (see open()).
    from ledger.proofs.signed_note import NoteError, verifier_key_string  # noqa: PLC0415
    from ledger.witness.cosignature import parse_cosigner_key  # noqa: PLC0415
    from ledger.witness.policy import PolicyError, parse_policy  # noqa: PLC0415

    lines = [
        "# The witnesses this ledger's log asks to cosign its checkpoints, and the quorum a",
        "# verifier holds its bundles to unless told otherwise (https://c2sp.org/tlog-policy).",
        f"log {verifier_key_string(origin, log_key.raw)}",
    ]
    names: list[str] = []
    for vkey, url in witnesses:
        try:
            key = parse_cosigner_key(vkey)
        except NoteError as exc:
            raise HomeError(f"witness key {vkey!r}: {exc.message}") from None
        if not url.startswith(("http://", "https://")):
            raise HomeError(f"witness {key.name}: {url!r} is not an http(s) URL")
        names.append(key.name)
        lines.append(f"witness {key.name} {key.key_string()} {url.rstrip('/')}")
    threshold = len(names) // 2 + 1 if quorum is None else quorum
    if not 1 <= threshold <= len(names):
        raise HomeError(f"a quorum of {threshold} of {len(names)} witnesses cannot be met")
    lines += [f"group {WITNESS_GROUP} {threshold} {' '.join(names)}", f"quorum {WITNESS_GROUP}"]
    text = "".join(line + "\n" for line in lines)
    try:
        parse_policy(text)
    except PolicyError as exc:
        raise HomeError(f"the witnesses given do not make a policy: {exc.message}") from None
    return text
