"""The log's signed checkpoints: C2SP signed notes, one per tree size, as stored.

The sequencing pass that grows the tree signs the new tree in its own transaction
(``TransparencyLog.sequence``), so a size is never visible without its checkpoint, and a
read only reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import bindparam, select

from domain.timestamps import format_time, utc_now
from ledger.errors import LogIntegrityError
from ledger.proofs.signed_note import format_checkpoint, sign_note
from ledger.signing.keys import SigningKey
from ledger.store.driver_rows import insert_rows
from ledger.store.event_store import StoreSession
from ledger.store.log_tables import checkpoints

# Statements every write runs, built once (building one costs about what running it does).
_INSERT = checkpoints.insert()
_COLUMNS = ("size", "root", "note", "signed_at")
_AT_SIZE = select(checkpoints).where(checkpoints.c.size == bindparam("size"))


@dataclass(frozen=True)
class SignedCheckpoint:
    size: int
    root: bytes
    note: str
    signed_at: str


def sign(origin: str, key: SigningKey, size: int, root: bytes) -> SignedCheckpoint:
    """The checkpoint of the tree of ``size`` leaves and ``root``, signed now. Ed25519 is
    deterministic: signing one tree twice gives the same note (only ``signed_at`` differs)."""
    note = sign_note(format_checkpoint(origin, size, root), origin, key.private_key())
    return SignedCheckpoint(size, root, note, format_time(utc_now()))


def _values(signed: SignedCheckpoint) -> dict[str, object]:
    return {
        "size": signed.size,
        "root": signed.root,
        "note": signed.note,
        "signed_at": signed.signed_at,
    }


def store(session: StoreSession, signed: SignedCheckpoint) -> None:
    session.execute(_INSERT, _values(signed))


def store_unless_signed(session: StoreSession, signed: SignedCheckpoint) -> None:
    """Store ``signed`` if its size has no checkpoint yet."""
    # Unless its size has one already: a log cut back (leaves deleted) and grown again to a
    # size it had signed. The write goes on, the stored note stays, and every read of that
    # size then refuses (``stored``): the ledger never signs a second root.
    # Through the driver (``ledger.store.driver_rows``): one a commit, and SQLAlchemy's
    # dialect INSERT … ON CONFLICT cost ~280 µs of CPU to run, the driver's ~20.
    row = (signed.size, signed.root, signed.note, signed.signed_at)
    insert_rows(session, checkpoints.name, _COLUMNS, [row], keep=("size",))


def stored(session: StoreSession, size: int, root: bytes) -> SignedCheckpoint | None:
    """The checkpoint stored for ``size``, if any; it must be of ``root`` (the tree as stored
    now), else the log was rewritten under it and nothing more is signed or served."""
    found = session.execute(_AT_SIZE, {"size": size}).first()
    if found is None:
        return None
    if bytes(found.root) != root:
        raise LogIntegrityError(f"the tree of size {size} no longer has the root signed for it")
    return SignedCheckpoint(size, root, found.note, found.signed_at)


def stored_all(session: StoreSession) -> list[SignedCheckpoint]:
    rows = session.execute(select(checkpoints).order_by(checkpoints.c.size)).all()
    return [SignedCheckpoint(int(r.size), bytes(r.root), r.note, r.signed_at) for r in rows]
