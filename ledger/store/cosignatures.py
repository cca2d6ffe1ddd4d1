"""The witnesses' cosignatures of the log's checkpoints, as stored, and the cosigned checkpoints
they make.

The witnessing loop (``ledger.witnessing``) stores each ``cosignature/v1`` line a witness
returned, once it verified under that witness's configured key, by tree size. The log's own
signed note of a size never changes; a *cosigned checkpoint* is that note with the lines
stored for its size appended (a valid C2SP signed note: a reader that does not know a
witness's key ignores its line). Reading writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import func, select

from ledger.proofs.signed_note import split_note
from ledger.store import signed_checkpoints
from ledger.store.event_store import StoreSession
from ledger.store.insert_or_keep import insert_or_keep
from ledger.store.log_tables import cosignatures
from ledger.witness.cosignature import Cosignature, add_signature_lines, signature_lines

__all__ = [
    "CosignedCheckpoint",
    "StoredCosignature",
    "at_size",
    "best_from",
    "cosigned_checkpoint",
    "newest_by_witness",
    "newest_cosigned",
    "newest_cosigned_size",
    "newest_from",
    "record",
]

_KEYS = ["size", "witness", "key_id"]
# A witness asked twice for one size (a retry whose first reply was lost, two processes) has
# signed it twice; the first line kept stands.
# (``insert_or_keep``).


@dataclass(frozen=True)
class StoredCosignature:
    size: int
    witness: str
    key_id: str  # hex
    cosigned_at: int  # the cosignature's timestamp (POSIX seconds)
    line: str


@dataclass(frozen=True)
class CosignedCheckpoint:
    """A checkpoint of the log with the cosignatures held for its size."""

    size: int
    root: bytes
    note: str  # the log's signed note with every stored cosignature line appended
    witnesses: tuple[str, ...]  # the cosigners' key names, in the order their lines come

    @property
    def cosignatures(self) -> int:
        return len(self.witnesses)


def record(session: StoreSession, dialect: str, size: int, found: Iterable[Cosignature]) -> None:
    """Store these verified cosignatures of the checkpoint of ``size``."""
    rows = [
        {
            "size": size,
            "witness": c.name,
            "key_id": c.key_id.hex(),
            "cosigned_at": c.timestamp,
            "line": c.line(),
        }
        for c in found
    ]
    if rows:
        session.execute(insert_or_keep(cosignatures, dialect, _KEYS), rows)


def _stored(row: Sequence[object]) -> StoredCosignature:
    size, witness, key_id, cosigned_at, line = row
    return StoredCosignature(
        int(str(size)), str(witness), str(key_id), int(str(cosigned_at)), str(line)
    )


def at_size(session: StoreSession, size: int) -> list[StoredCosignature]:
    """The cosignatures stored for the checkpoint of ``size``, by witness name."""
    c = cosignatures.c
    rows = session.execute(
        select(c.size, c.witness, c.key_id, c.cosigned_at, c.line)
        .where(c.size == size)
        .order_by(c.witness, c.key_id)
    ).all()
    return [_stored(r) for r in rows]


def newest_by_witness(session: StoreSession) -> dict[tuple[str, str], int]:
    """The largest size each witness key (name, hex key id) has cosigned for this log."""
    c = cosignatures.c
    rows = session.execute(
        select(c.witness, c.key_id, func.max(c.size)).group_by(c.witness, c.key_id)
    ).all()
    return {(str(w), str(k)): int(s) for w, k, s in rows}


def newest_from(session: StoreSession, size: int) -> dict[tuple[str, str], int]:
    """The largest size each witness key has cosigned, among sizes from ``size`` (a range of
    the primary key's first column: the rows of the newest sizes only)."""
    c = cosignatures.c
    rows = session.execute(
        select(c.witness, c.key_id, func.max(c.size))
        .where(c.size >= size)
        .group_by(c.witness, c.key_id)
    ).all()
    return {(str(w), str(k)): int(s) for w, k, s in rows}


def newest_cosigned_size(session: StoreSession, quorum: int = 1) -> int | None:
    """The largest size cosigned by at least ``quorum`` witness keys (None: none is)."""
    c = cosignatures.c
    found = session.execute(
        select(c.size)
        .group_by(c.size)
        .having(func.count() >= quorum)
        .order_by(c.size.desc())
        .limit(1)
    ).scalar()
    return None if found is None else int(found)


RECENT = 64
"""How many of the newest cosigned sizes a reader looks through for the one to serve."""


def newest_cosigned(
    session: StoreSession, meets: Callable[[set[tuple[str, bytes]]], bool] | None = None
) -> int | None:
    """The cosigned size a reader serves: the newest of the recent cosigned sizes whose
    cosigners ``meets`` (the ledger's quorum); else, or without ``meets``, the newest of
    those with the most cosignatures (a size just offered may hold one witness's line while
    the others' are on their way: the size before it, cosigned by all, is served meanwhile).
    None: nothing is cosigned."""
    c = cosignatures.c
    newest = select(c.size).distinct().order_by(c.size.desc()).limit(RECENT).subquery()
    rows = session.execute(
        select(c.size, c.witness, c.key_id).where(c.size.in_(select(newest.c.size)))
    ).all()
    by_size: dict[int, set[tuple[str, bytes]]] = {}
    for size, witness, key_id in rows:
        by_size.setdefault(int(size), set()).add((str(witness), bytes.fromhex(str(key_id))))
    if not by_size:
        return None
    if meets is not None:
        met = [size for size, keys in by_size.items() if meets(keys)]
        if met:
            return max(met)
    return max(by_size, key=lambda size: (len(by_size[size]), size))


def best_from(session: StoreSession, size: int, limit: int | None = None) -> int | None:
    """The cosigned size a bundle of the tree of ``size`` should carry: among the sizes from
    ``size`` (up to ``limit``), the one with the most cosignatures; of those, ``size`` itself
    if it is one (no proof to add), else the newest. None: no size from ``size`` is cosigned."""
    c = cosignatures.c
    query = select(c.size, func.count()).where(c.size >= size).group_by(c.size)
    if limit is not None:
        query = query.where(c.size <= limit)
    counts = {int(s): int(n) for s, n in session.execute(query).all()}
    if not counts:
        return None
    return max(counts, key=lambda s: (counts[s], s == size, s))


def cosigned_checkpoint(
    session: StoreSession, size: int, root: bytes, note: str | None = None
) -> CosignedCheckpoint:
    """The checkpoint of ``size`` (its stored note, or ``note`` as signed by the caller) with
    the cosignature lines stored for it."""
    if note is None:
        stored = signed_checkpoints.stored(session, size, root)
        if stored is None:
            raise LookupError(f"no signed checkpoint of {size} leaves is stored")
        note = stored.note
    held = at_size(session, size)
    if not held:
        return CosignedCheckpoint(size, root, note, ())
    text, _ = split_note(note)
    lines = signature_lines(text, "".join(h.line for h in held))
    cosigned = add_signature_lines(note, lines)
    return CosignedCheckpoint(size, root, cosigned, tuple(h.witness for h in held))
