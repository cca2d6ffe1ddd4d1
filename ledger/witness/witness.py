"""The witness side of C2SP tlog-witness (https://c2sp.org/tlog-witness): ``add-checkpoint``.

A witness follows logs (an origin and the log's note verifier keys). For each origin it keeps
the latest checkpoint it cosigned, and cosigns a new one only if it is signed by the log and
an RFC 6962 consistency proof shows it extends that one. The replies are the spec's, in its
order of checks:

====== ===================================================================================
400    malformed request or checkpoint, more than 63 proof lines, old size above the size
404    the origin is not followed
403    no signature by the log's key, or the log key's signature does not verify
409    old size is not the size last cosigned; body ``<size>\\n``, ``text/x.tlog.size``
422    size 0 without the empty-tree root, a proof after old size 0, or a proof that fails
200    one ``cosignature/v1`` line
====== ===================================================================================

State is one SQLite file (stdlib ``sqlite3``; no ledger database). Checking the old size and
storing the new checkpoint happen in one ``BEGIN IMMEDIATE`` transaction, so two requests
from the same old size (in one process or several) cannot both advance it: the spec's
rollback race. Log-signed requests refused with 422, and log-signed checkpoints of the
cosigned size with another root, are kept in the ``evidence`` table for the operator.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from domain.canonical import canonical_b64decode
from domain.errors import CanonicalizationError
from domain.timestamps import format_time, utc_now
from ledger.proofs.errors import ProofError
from ledger.proofs.hasher import EMPTY_ROOT, HASH_SIZE
from ledger.proofs.signed_note import (
    Checkpoint,
    InvalidSignature,
    MalformedCheckpoint,
    MalformedNote,
    MalformedVerifierKey,
    UnverifiedNote,
    Verifier,
    open_checkpoint,
    parse_verifier_key,
)
from ledger.proofs.verify import verify_consistency
from ledger.witness.cosignature import (
    CosignerKey,
    add_signature_lines,
    sign_cosignature,
)

__all__ = [
    "MAX_PROOF_LINES",
    "MAX_TREE_SIZE",
    "STATE_FILE",
    "Evidence",
    "FollowedLog",
    "Reply",
    "Witness",
    "origin_hash",
    "parse_follow",
]

MAX_PROOF_LINES = 63
MAX_TREE_SIZE = (1 << 63) - 1
"""Largest tree size the witness accepts: what a signed 64-bit integer (SQLite, Go) holds."""
STATE_FILE = "witness.sqlite3"
SIZE_CONTENT_TYPE = "text/x.tlog.size"
_TEXT = "text/plain; charset=utf-8"
_OLD = re.compile(r"old (0|[1-9][0-9]{0,18})")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS cosigned (
    origin TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    root BLOB NOT NULL,
    note TEXT NOT NULL,
    cosigned_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS evidence (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    received_at TEXT NOT NULL,
    origin TEXT NOT NULL,
    status INTEGER NOT NULL,
    reason TEXT NOT NULL,
    old_size INTEGER NOT NULL,
    cosigned_size INTEGER NOT NULL,
    cosigned_root BLOB NOT NULL,
    request BLOB NOT NULL
);
"""


def origin_hash(origin: str) -> str:
    """Lowercase hex SHA-256 of an origin: its path on the monitoring prefix."""
    return hashlib.sha256(origin.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class FollowedLog:
    """A log the witness cosigns for: its origin line and the note keys it signs with."""

    origin: str
    keys: tuple[Verifier, ...]


def parse_follow(text: str) -> FollowedLog:
    """``ORIGIN=VKEY`` (or a bare ``VKEY``, whose key name is the origin). An Ed25519 vkey
    holds no ``=``, so the origin is everything before the last one."""
    origin, sep, vkey = text.rpartition("=")
    if not sep:
        origin, vkey = "", text
    try:
        key = parse_verifier_key(vkey)
    except MalformedVerifierKey as exc:
        raise ValueError(f"--follow {text!r}: {exc.message}") from None
    return FollowedLog(origin or key.name, (key,))


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    content_type: str
    body: bytes


@dataclass(frozen=True, slots=True)
class Evidence:
    """A log-signed request the witness refused as inconsistent: proof of misbehaviour."""

    id: int
    received_at: str
    origin: str
    status: int
    reason: str
    old_size: int
    cosigned_size: int
    cosigned_root: bytes
    request: bytes


class _Refusal(Exception):
    def __init__(self, status: int, reason: str, evidence: bool = False) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.evidence = evidence


@dataclass(frozen=True, slots=True)
class _Request:
    old_size: int
    proof: tuple[bytes, ...]
    note: str


def _text(status: int, reason: str) -> Reply:
    return Reply(status, _TEXT, (reason + "\n").encode("utf-8"))


def _parse_request(body: bytes) -> _Request:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise _Refusal(400, "the request body is not UTF-8") from None
    head, sep, note = text.partition("\n\n")
    if not sep:
        raise _Refusal(400, "the request has no blank line before the checkpoint")
    lines = head.split("\n")
    match = _OLD.fullmatch(lines[0])
    if match is None:
        raise _Refusal(400, "the first line must be 'old <size>' (decimal, no leading zeros)")
    old_size = int(match.group(1))
    if old_size > MAX_TREE_SIZE:
        raise _Refusal(400, f"old size {old_size} is above 2^63-1")
    if len(lines) - 1 > MAX_PROOF_LINES:
        raise _Refusal(400, f"more than {MAX_PROOF_LINES} consistency proof lines")
    proof = []
    for i, line in enumerate(lines[1:], start=1):
        try:
            value = canonical_b64decode(line, f"proof line {i}")
        except CanonicalizationError as exc:
            raise _Refusal(400, exc.message) from None
        if len(value) != HASH_SIZE:
            raise _Refusal(400, f"proof line {i} is {len(value)} bytes, not {HASH_SIZE}")
        proof.append(value)
    return _Request(old_size, tuple(proof), note)


class Witness:
    """A witness: its name and key, the logs it follows, and its state file.

    :meth:`add_checkpoint` is safe to call from many threads and processes at once: the
    check and the update share one write transaction (``BEGIN IMMEDIATE``).
    """

    def __init__(
        self,
        name: str,
        private_key: Ed25519PrivateKey,
        logs: Iterable[FollowedLog],
        state_dir: Path,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.key = CosignerKey.from_private_key(name, private_key)
        self._private_key = private_key
        self._clock = clock
        self.logs: dict[str, tuple[Verifier, ...]] = {}
        for log in logs:
            if any(k.public_key == self.key.public_key for k in log.keys):
                raise ValueError(f"log {log.origin!r} uses the witness's own key")
            self.logs[log.origin] = self.logs.get(log.origin, ()) + log.keys
        state_dir.mkdir(parents=True, exist_ok=True)
        self.state_path = state_dir / STATE_FILE
        # One connection, one thread at a time; other processes are kept out by the
        # transaction's write lock.
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            self.state_path, timeout=30, isolation_level=None, check_same_thread=False
        )
        self._db.execute("PRAGMA synchronous = FULL")  # a cosigned size is on disk before the reply
        self._db.execute("PRAGMA journal_mode = WAL")  # one fsync per commit; readers never wait
        self._db.executescript(_SCHEMA)

    @property
    def name(self) -> str:
        return self.key.name

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> Witness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _session(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            yield self._db

    def add_checkpoint(self, body: bytes) -> Reply:
        """Answer one ``POST add-checkpoint`` request body."""
        try:
            request = _parse_request(body)
            checkpoint, text, logged = self._verified(request.note)
        except _Refusal as refusal:
            return _text(refusal.status, refusal.reason)
        if request.old_size > checkpoint.size:
            return _text(400, f"old size {request.old_size} is above the checkpoint size")
        with self._session() as db:
            db.execute("BEGIN IMMEDIATE")  # the write lock: check and update as one
            try:
                reply = self._advance(db, request, checkpoint, text, logged, body)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        return reply

    def _verified(self, note: str) -> tuple[Checkpoint, str, str]:
        """The checkpoint, its text, and the note with only the log's verified signatures."""
        origin = note.partition("\n")[0]
        keys = self.logs.get(origin)
        if keys is None:
            raise _Refusal(404, f"this witness does not follow the origin {origin!r}")
        try:
            checkpoint, verified = open_checkpoint(note, keys, origin)
        except (UnverifiedNote, InvalidSignature) as exc:
            raise _Refusal(403, exc.message) from None
        except (MalformedNote, MalformedCheckpoint) as exc:
            raise _Refusal(400, exc.message) from None
        if checkpoint.size > MAX_TREE_SIZE:
            raise _Refusal(400, f"tree size {checkpoint.size} is above 2^63-1")
        logged = verified.text + "\n" + "".join(s.line() for s in verified.signatures)
        return checkpoint, verified.text, logged

    def _advance(
        self,
        db: sqlite3.Connection,
        request: _Request,
        checkpoint: Checkpoint,
        text: str,
        logged: str,
        body: bytes,
    ) -> Reply:
        row = db.execute(
            "SELECT size, root FROM cosigned WHERE origin = ?", (checkpoint.origin,)
        ).fetchone()
        size, root = (int(row[0]), bytes(row[1])) if row else (0, EMPTY_ROOT)
        try:
            self._check(request, checkpoint, size, root)
        except _Refusal as refusal:
            if refusal.evidence:
                self._keep(db, checkpoint.origin, refusal, request.old_size, size, root, body)
            if refusal.status == 409:
                return Reply(409, SIZE_CONTENT_TYPE, f"{size}\n".encode("ascii"))
            return _text(refusal.status, refusal.reason)
        cosignature = sign_cosignature(text, self.name, self._private_key, int(self._clock()))
        note = add_signature_lines(logged, [cosignature.note_signature()])
        db.execute(
            "INSERT INTO cosigned (origin, size, root, note, cosigned_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (origin) DO UPDATE SET size = excluded.size, root = excluded.root, "
            "note = excluded.note, cosigned_at = excluded.cosigned_at",
            (checkpoint.origin, checkpoint.size, checkpoint.root, note, format_time(utc_now())),
        )
        return Reply(200, _TEXT, cosignature.line().encode("utf-8"))

    @staticmethod
    def _check(request: _Request, checkpoint: Checkpoint, size: int, root: bytes) -> None:
        if request.old_size != size:
            # A checkpoint of the cosigned size with another root proves a fork on its own.
            fork = checkpoint.size == size and checkpoint.root != root
            raise _Refusal(409, "old size is not the size last cosigned", evidence=fork)
        if checkpoint.size == 0 and checkpoint.root != EMPTY_ROOT:
            raise _Refusal(422, "a tree of size 0 must have the empty-tree root", evidence=True)
        if request.old_size == 0 and request.proof:
            raise _Refusal(422, "a consistency proof from size 0 must be empty", evidence=True)
        try:
            verify_consistency(size, checkpoint.size, request.proof, root, checkpoint.root)
        except ProofError as exc:
            raise _Refusal(422, f"inconsistent: {exc.message}", evidence=True) from None

    def _keep(
        self,
        db: sqlite3.Connection,
        origin: str,
        refusal: _Refusal,
        old_size: int,
        size: int,
        root: bytes,
        body: bytes,
    ) -> None:
        db.execute(
            "INSERT INTO evidence (received_at, origin, status, reason, old_size, "
            "cosigned_size, cosigned_root, request) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                format_time(utc_now()),
                origin,
                refusal.status,
                refusal.reason,
                old_size,
                size,
                root,
                body,
            ),
        )

    def latest(self, origin_hex: str) -> str | None:
        """The latest cosigned checkpoint (the log's signatures and this witness's
        cosignature) of the origin whose SHA-256 is ``origin_hex``, or None."""
        for origin in self.logs:
            if origin_hash(origin) == origin_hex:
                with self._session() as db:
                    row = db.execute(
                        "SELECT note FROM cosigned WHERE origin = ?", (origin,)
                    ).fetchone()
                return None if row is None else str(row[0])
        return None

    def cosigned_size(self, origin: str) -> int:
        """The size this witness last cosigned for ``origin`` (0 if never)."""
        with self._session() as db:
            row = db.execute("SELECT size FROM cosigned WHERE origin = ?", (origin,)).fetchone()
        return 0 if row is None else int(row[0])

    def evidence(self, origin: str | None = None) -> list[Evidence]:
        """The kept log-signed requests that failed the consistency checks, oldest first."""
        query = "SELECT * FROM evidence"
        params: Sequence[str] = ()
        if origin is not None:
            query, params = query + " WHERE origin = ?", (origin,)
        with self._session() as db:
            rows = db.execute(query + " ORDER BY id", params).fetchall()
        return [
            Evidence(
                int(r[0]),
                str(r[1]),
                str(r[2]),
                int(r[3]),
                str(r[4]),
                int(r[5]),
                int(r[6]),
                bytes(r[7]),
                bytes(r[8]),
            )
            for r in rows
        ]
