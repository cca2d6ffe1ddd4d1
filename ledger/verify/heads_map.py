"""A scoped bundle's heads, held to the tree the witnesses cosign (``heads-map``).

A ledger with heads leaves (``ledger.store.heads_leaves``) ends every commit's tree with a
leaf that commits to the heads map of the leaves before it. A scoped bundle of such a tree
carries a ``headsMap`` line: that leaf's map root, its inclusion proof, and one map proof
per run, key and group its signed heads name. When the leaf is the last of the bundle's
checkpoint, and each proof leads from the head the note states to that root, the heads are
the tree's own: a second set of heads for this checkpoint would need a second tree of its
size, which the witness quorum (``witnessed``) rules out. Without the line, the heads are
the log key's word alone, as in bundles made before heads leaves; the report says which.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from ledger.ids import principal_id, run_id
from ledger.proofs.errors import ProofError
from ledger.proofs.hasher import leaf_hash
from ledger.proofs.heads import Heads
from ledger.proofs.heads_map import (
    MapProof,
    aggregate_key,
    group_key,
    group_value,
    head_value,
    heads_leaf_data,
    root_from_proof,
)
from ledger.proofs.signed_note import Checkpoint
from ledger.proofs.verify import verify_inclusion
from ledger.verification_report import Check, Report
from ledger.verify.events import decode_proof

__all__ = ["HeadsMapLine", "check_heads_map", "heads_fact", "read_heads_map"]


@dataclass(frozen=True)
class HeadsMapLine:
    leaf_index: int
    root: bytes
    proof: list[bytes]
    runs: dict[str, MapProof]
    keys: dict[str, MapProof]
    groups: dict[str, MapProof]


def _proofs(value: Any, what: str) -> dict[str, MapProof]:
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be an object of map proofs")
    return {str(name): MapProof.from_json(proof) for name, proof in value.items()}


def read_heads_map(where: str, record: dict[str, Any], report: Report) -> HeadsMapLine | None:
    """A headsMap line, strictly read (its proofs are checked at the end)."""
    try:
        index = record.get("leafIndex")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ValueError("leafIndex must be a leaf index")
        root = base64.b64decode(str(record.get("root")), validate=True)
        if len(root) != 32:
            raise ValueError("root must be a 32-byte hash")
        return HeadsMapLine(
            index,
            root,
            decode_proof(record.get("proof")),
            _proofs(record.get("runs"), "runs"),
            _proofs(record.get("keys"), "keys"),
            _proofs(record.get("groups"), "groups"),
        )
    except ValueError as exc:
        report.fail(Check.HEADS_MAP, where, f"malformed headsMap line: {exc}")
        return None


def check_heads_map(
    line: HeadsMapLine, heads: Heads | None, checkpoint: Checkpoint, report: Report
) -> bool:
    """Whether the heads leaf ends the checkpoint's tree and every head the note states is
    the one the leaf's map holds (each failure reported, by name)."""
    where = f"headsMap (leaf {line.leaf_index})"
    if heads is None:
        report.fail(Check.HEADS_MAP, where, "a heads map without signed heads to hold to it")
        return False
    if line.leaf_index != checkpoint.size - 1:
        report.fail(
            Check.HEADS_MAP,
            where,
            f"the heads leaf must be the last of the checkpoint's {checkpoint.size} leaves",
        )
        return False
    data = heads_leaf_data(checkpoint.origin, line.leaf_index, line.root)
    try:
        verify_inclusion(
            leaf_hash(data), line.leaf_index, checkpoint.size, line.proof, checkpoint.root
        )
    except ProofError as exc:
        report.fail(Check.HEADS_MAP, where, f"the heads leaf is not in the tree: {exc}")
        return False
    stated = (
        {
            f"run {r}": (aggregate_key(run_id(r)), head_value(h.events, h.last_leaf))
            for r, h in heads.runs.items()
        }
        | {
            f"key {k}": (aggregate_key(principal_id(k)), head_value(h.events, h.last_leaf))
            for k, h in heads.keys.items()
        }
        | {
            f"group {g}": (group_key(g), group_value(h.members, h.digest))
            for g, h in heads.groups.items()
        }
    )
    proved = (
        {f"run {r}": p for r, p in line.runs.items()}
        | {f"key {k}": p for k, p in line.keys.items()}
        | {f"group {g}": p for g, p in line.groups.items()}
    )
    good = True
    for name in sorted(set(stated) | set(proved)):
        if name not in proved or name not in stated:
            side = "has no map proof" if name not in proved else "is not in the signed heads"
            report.fail(Check.HEADS_MAP, name, f"{name} {side}")
            good = False
            continue
        key, value = stated[name]
        if root_from_proof(key, value, proved[name]) != line.root:
            report.fail(
                Check.HEADS_MAP,
                name,
                "the signed heads say otherwise than the heads leaf the tree holds: the "
                "log shows other heads for this checkpoint (a run's events or a group's "
                "members left out or added)",
            )
            good = False
        else:
            report.ok(Check.HEADS_MAP)
    return good


def heads_fact(held: bool | None, witnessed: bool) -> str:
    """What the report says of a scoped bundle's heads: whose word they are."""
    if held is None:
        return "the log key's word (the bundle carries no heads leaf to hold them to)"
    if not held:
        return "refuted: they are not the heads the tree holds"
    if witnessed:
        return "witnessed: the heads leaf is in the checkpoint the witness quorum cosigned"
    return "in the log's tree (the heads leaf), not witnessed: no witness quorum met"


def check_heads_leaf(
    where: str, record: dict[str, Any], checkpoint: Checkpoint, report: Report
) -> int | None:
    """A whole-log bundle's headsLeaf line: the leaf its root makes is in the tree at its
    index (``inclusion``). The leaf index, when the line is readable."""
    try:
        index = record.get("leafIndex")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ValueError("leafIndex must be a leaf index")
        root = base64.b64decode(str(record.get("root")), validate=True)
        proof = decode_proof(record.get("proof"))
    except ValueError as exc:
        report.fail(Check.FORMAT, where, f"malformed headsLeaf line: {exc}")
        return None
    data = heads_leaf_data(checkpoint.origin, index, root)
    try:
        verify_inclusion(leaf_hash(data), index, checkpoint.size, proof, checkpoint.root)
    except ProofError as exc:
        report.fail(Check.INCLUSION, where, f"heads leaf {index} is not in the tree: {exc}")
    else:
        report.ok(Check.INCLUSION)
    return index
