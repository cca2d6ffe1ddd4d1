"""Our witnesses, served on loopback for a real ledger: keys and ports chosen first (a ledger's
witness policy names both), each witness started once the log it follows has a key; and an
operator who can run two ledgers under one origin and log key (a split view)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import uvicorn
from live_server import free_port

from domain.statements import Role
from ledger.application import Ledger
from ledger.proofs.signed_note import Verifier, verifier_key_string
from ledger.signing.authoring import key_registration_envelope
from ledger.signing.keys import SigningKey
from ledger.signing.trust import TrustRoot
from ledger.witness.client import WitnessEndpoint
from ledger.witness.cosignature import CosignerKey
from ledger.witness.server import WitnessApp
from ledger.witness.witness import FollowedLog, Witness

ORIGIN = "split.example/log"
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def clock() -> datetime:
    return NOW  # two ledgers that log the same envelopes log the same leaves


@dataclass
class Operator:
    """One log key and trust root, as a (misbehaving) operator holds them."""

    admin: SigningKey
    log: SigningKey
    root: TrustRoot

    @classmethod
    def make(cls) -> Operator:
        admin, log = SigningKey.generate(), SigningKey.generate()
        root = TrustRoot(ORIGIN, (admin.public,), log.public, "2026-05-01T12:00:00Z")
        return cls(admin, log, root)

    def ledger(self, db_url: str) -> Ledger:
        ledger = Ledger(db_url, self.root, log_key=self.log, clock=clock)
        ledger.append_many(
            [
                key_registration_envelope(self.admin.public, [Role.ADMIN], self.admin, now=NOW),
                key_registration_envelope(self.log.public, [Role.LOG], self.admin, now=NOW),
            ]
        )
        return ledger

    @property
    def log_vkey(self) -> str:
        return verifier_key_string(ORIGIN, self.log.public.raw)

    def register(self, ledger: Ledger, count: int = 1) -> None:
        """Something more in the log: attester keys, registered by the admin."""
        for _ in range(count):
            newcomer = SigningKey.generate()
            ledger.append(
                key_registration_envelope(newcomer.public, [Role.ATTESTER], self.admin, now=NOW)
            )


@dataclass(frozen=True)
class LocalWitness:
    """A witness to be: its name, key, loopback port and state folder."""

    name: str
    key: SigningKey
    port: int
    state: Path

    @property
    def cosigner(self) -> CosignerKey:
        return CosignerKey.from_private_key(self.name, self.key.private_key())

    @property
    def vkey(self) -> str:
        return self.cosigner.key_string()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def endpoint(self) -> WitnessEndpoint:
        return WitnessEndpoint(self.url, self.cosigner)


def local_witnesses(folder: Path, count: int) -> list[LocalWitness]:
    return [
        LocalWitness(f"w{i}.witness.test", SigningKey.generate(), free_port(), folder / f"w{i}")
        for i in range(count)
    ]


def follows(root: TrustRoot) -> FollowedLog:
    """The log a trust root names, as a witness follows it."""
    return FollowedLog(root.origin, (Verifier.from_public_key(root.origin, root.log_key.raw),))


@contextmanager
def serving(witness: LocalWitness, logs: Sequence[FollowedLog]) -> Iterator[Witness]:
    """``witness`` answering on its port (uvicorn in a thread) until the block ends."""
    state = Witness(witness.name, witness.key.private_key(), logs, witness.state)
    app = WitnessApp(state)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=witness.port, log_level="warning", access_log=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"witness {witness.name} did not start on {witness.port}")
        time.sleep(0.02)
    try:
        with state:
            yield state
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def all_serving(
    witnesses: Sequence[LocalWitness], logs: Sequence[FollowedLog]
) -> Iterator[list[Witness]]:
    with ExitStack() as stack:
        yield [stack.enter_context(serving(w, logs)) for w in witnesses]
