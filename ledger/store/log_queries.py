"""Reading the transparency log as JSON: checkpoint, proofs, entries (for the CLI and the API).

Each takes what holds the log (the ledger, named by its shape only: the store does not reach
up to the application), and none of them writes.
"""

from __future__ import annotations

import base64
from typing import Any, Protocol

from domain.errors import DomainError
from ledger.errors import NotFoundError
from ledger.proofs.signed_note import NoteError, open_checkpoint
from ledger.store import cosignatures
from ledger.store.transparency_log import TransparencyLog
from ledger.witness.policy import Policy, meets_quorum


class HoldsLog(Protocol):
    """What these reads need of a ledger: its transparency log."""

    @property
    def tlog(self) -> TransparencyLog: ...


class CheckpointMismatchError(DomainError):
    code = "checkpoint-mismatch"
    status = 409


MAX_ENTRIES = 1000


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


def checkpoint_json(ledger: HoldsLog) -> dict[str, Any]:
    """The signed checkpoint of the current tree, as the commit that made the tree stored it
    (read only: ``TransparencyLog.checkpoint``)."""
    signed = ledger.tlog.checkpoint()
    return {
        "origin": ledger.tlog.origin,
        "size": signed.size,
        "rootHash": _b64(signed.root),
        "note": signed.note,
        "signedAt": signed.signed_at,
    }


def cosigned_checkpoint_json(ledger: HoldsLog, policy: Policy | None = None) -> dict[str, Any]:
    """The newest cosigned checkpoint beside the newest signed one: what a reader tells a
    lagging witness quorum by (read only).

    ``size`` is the log's (its newest signed checkpoint); ``cosigned`` (None until a witness
    has cosigned anything) is the log's note with the witnesses' lines for the newest size
    that meets ``policy`` (the ledger's witness policy), else the newest with the most
    cosignatures; ``witnessLag`` (None with nothing cosigned) is how many leaves it trails
    ``size`` by: the witnesses are being asked, or are down. ``newestByWitness``: the
    largest size each witness key (``name+keyid``) has cosigned."""
    signed = ledger.tlog.checkpoint()
    found: dict[str, Any] = {
        "origin": ledger.tlog.origin,
        "size": signed.size,
        "cosigned": None,
        "witnessLag": None,
        "newestByWitness": {},
    }
    meets = None if policy is None else (lambda keys: meets_quorum(policy, keys))
    with ledger.tlog.store.transaction(commit=False) as session:
        by_witness = cosignatures.newest_by_witness(session)
        found["newestByWitness"] = {
            f"{n}+{kid}": size for (n, kid), size in sorted(by_witness.items())
        }
        size = cosignatures.newest_cosigned(session, meets)
        if size is None or size > signed.size:
            return found
        root = ledger.tlog.root(session, size)
        note = signed.note if size == signed.size else None
        try:
            cosigned = cosignatures.cosigned_checkpoint(session, size, root, note)
        except LookupError:  # cosigned, but its note was never stored: nothing to serve
            return found
    found["cosigned"] = {
        "size": cosigned.size,
        "rootHash": _b64(cosigned.root),
        "note": cosigned.note,
        "witnesses": list(cosigned.witnesses),
    }
    found["witnessLag"] = signed.size - cosigned.size
    return found


def held_checkpoint_size(ledger: HoldsLog, note: str) -> int:
    """The size of a checkpoint someone holds, once it is shown to be this log's: signed by
    its log key, and its root the root of the tree of that size here (else: a fork)."""
    try:
        held, _ = open_checkpoint(note, [ledger.tlog.verifier], origin=ledger.tlog.origin)
    except NoteError as exc:
        raise CheckpointMismatchError(
            f"the checkpoint is not signed by this ledger's log key: {exc}"
        ) from None
    with ledger.tlog.store.transaction(commit=False) as session:
        current = ledger.tlog.tree_size(session)
        if held.size > current:
            raise CheckpointMismatchError(
                f"the checkpoint is for {held.size} leaves; this ledger has {current}"
            )
        if ledger.tlog.root(session, held.size) != held.root:
            raise CheckpointMismatchError(
                f"the checkpoint's root for {held.size} leaves is not this log's: the log "
                "was forked or rewritten (keep the checkpoint: it is evidence)"
            )
    return held.size


def inclusion_json(ledger: HoldsLog, leaf: int, size: int | None = None) -> dict[str, Any]:
    with ledger.tlog.store.transaction(commit=False) as session:
        current = ledger.tlog.tree_size(session)
        tree = current if size is None else size
        if not 0 < tree <= current:
            raise NotFoundError(f"tree size {tree} is not between 1 and the current {current}")
        if not 0 <= leaf < tree:
            raise NotFoundError(f"leaf {leaf} is not in a tree of size {tree}")
        return ledger.tlog.inclusion(session, leaf, tree).to_json()


def consistency_json(ledger: HoldsLog, old: int, new: int | None = None) -> dict[str, Any]:
    with ledger.tlog.store.transaction(commit=False) as session:
        current = ledger.tlog.tree_size(session)
        newer = current if new is None else new
        if not 0 <= old <= newer <= current:
            raise NotFoundError(f"need 0 <= old ({old}) <= new ({newer}) <= {current}")
        proof = ledger.tlog.consistency(session, old, newer)
        return {
            "size1": old,
            "size2": newer,
            "root1": _b64(ledger.tlog.root(session, old)),
            "root2": _b64(ledger.tlog.root(session, newer)),
            "hashes": [_b64(h) for h in proof],
        }


def entries_json(ledger: HoldsLog, start: int, end: int | None = None) -> list[dict[str, Any]]:
    """Leaves [start, end) — at most MAX_ENTRIES — with the event position each one logs."""
    if start < 0:
        raise NotFoundError("start must be >= 0")
    with ledger.tlog.store.transaction(commit=False) as session:
        stop = ledger.tlog.tree_size(session) if end is None else end
        rows = ledger.tlog.entries(session, start, min(stop, start + MAX_ENTRIES))
    return [{"leafIndex": r[0], "position": r[1], "leafHash": _b64(bytes(r[2]))} for r in rows]
