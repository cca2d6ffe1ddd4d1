"""A bundle's heads, held to the tree the witnesses cosign (``heads-map``).

A ledger with heads leaves (``ledger.store.heads_leaves``) ends every commit's tree with a
leaf that commits to the heads map of the leaves before it. A scoped bundle of such a tree
carries a ``headsMap`` line: that leaf's map root, its inclusion proof, and one map proof
per run, key and group its signed heads name. When the leaf is the last of the bundle's
checkpoint, and each proof leads from the head the note states to that root, the heads are
the tree's own: a second set of heads for this checkpoint would need a second tree of its
size, which the witness quorum (``witnessed``) rules out. Without the line, the heads are
the log key's word alone, as in bundles made before heads leaves; the report says which.

A whole-log bundle carries every heads leaf as a ``headsLeaf`` line in leaf order; the
verifier folds the heads map from the bundle's own events as it meets them
(``WholeLogHeads``: each event's aggregate head, and each run's joining of its comparison
group by the rule ``GroupJoins`` states) and fails ``heads-map`` on a heads leaf whose root
is not the map of the events before it: an operator cannot commit heads the log's events
do not have, even in a tree the witnesses cosigned.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

import msgspec

from domain.canonical import canonical_b64decode
from domain.event_names import EventName
from domain.manifests.manifest_set import with_attached
from domain.run_facts import comparison_key_of
from ledger.event_verification import EventVerification
from ledger.ids import principal_id, run_id
from ledger.proofs.errors import ProofError
from ledger.proofs.hasher import leaf_hash
from ledger.proofs.heads import Heads
from ledger.proofs.heads_map import (
    HeadsFold,
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

__all__ = [
    "GroupEvent",
    "GroupJoins",
    "HeadsMapLine",
    "WholeLogHeads",
    "check_heads_leaf",
    "check_heads_map",
    "group_event_of",
    "heads_fact",
    "read_heads_map",
]


class HeadsMapLine(msgspec.Struct, frozen=True):
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


def _map_root(record: dict[str, Any]) -> bytes:
    """A headsMap or headsLeaf line's map root: 32 bytes in canonical base64, as every hash
    of a bundle is spelled (a lenient reading let one leaf have many spellings)."""
    root = canonical_b64decode(record.get("root"), "root")
    if len(root) != 32:
        raise ValueError("root must be a 32-byte hash")
    return root


def read_heads_map(where: str, record: dict[str, Any], report: Report) -> HeadsMapLine | None:
    """A headsMap line, strictly read (its proofs are checked at the end)."""
    try:
        index = record.get("leafIndex")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ValueError("leafIndex must be a leaf index")
        root = _map_root(record)
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
) -> tuple[int, bytes] | None:
    """A whole-log bundle's headsLeaf line: the leaf its root makes is in the tree at its
    index (``inclusion``). The leaf index and map root, when the line is readable (whether
    the root is the map of the events before it is ``WholeLogHeads``' to say, in turn)."""
    try:
        index = record.get("leafIndex")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ValueError("leafIndex must be a leaf index")
        root = _map_root(record)
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
    return index, root


# What a verified run event tells of group membership, worked out where it was verified
# (a worker process): (run digest, its comparison key, or None with the manifests that
# still lack a workload, whether it is an attachment). The manifests travel as their JSON
# bytes: a worker's results are pickled to the verifying process, where pickling the
# nested dicts cost ~5 µs an event, and only an attachment's fold ever reads them back.
GroupEvent = tuple[str, str | None, bytes | None, bool]


_JOINING = frozenset({EventName.RUN_INGESTED, EventName.RUN_MANIFESTS_ATTACHED})


def group_event_of(result: EventVerification) -> GroupEvent | None:
    """The group membership an ingestion or a manifest attachment may give its run (the
    comparison key computed here, so the in-order fold only looks it up); None for any
    other event, or one that did not verify."""
    if (
        result.event not in _JOINING  # first: most events are not (attestations), asked cheaply
        or not result.ok
        or result.subject_digest is None
        or result.predicate is None
    ):
        return None
    carried = result.predicate.get("manifests") or {}
    if result.event == EventName.RUN_INGESTED:
        key = comparison_key_of(carried)
        return result.subject_digest, key, None if key is not None else _json(carried), False
    if result.event == EventName.RUN_MANIFESTS_ATTACHED:
        return result.subject_digest, None, _json(carried), True
    return None


def _json(manifests: object) -> bytes:
    """Manifests read from a verified statement (JSON values only), as JSON: they read back
    to equal values (``_manifests``)."""
    return msgspec.json.encode(manifests)


def _manifests(data: bytes) -> dict[str, Any]:
    found: dict[str, Any] = msgspec.json.decode(data)
    return found


class GroupJoins:
    """Which run joins which comparison group, and at which event, folded in leaf order:
    the rule the ledger's group index records at admission (``ledger.application``) and
    that ``audit`` and the whole-log verifier recompute from the events. A run joins at its
    ingestion when that carries a workload manifest, else at the attachment that completes
    its manifests with one; never again."""

    def __init__(self) -> None:
        # The manifests (as JSON) of runs with no group yet.
        self._bare: dict[str, bytes] = {}

    def fold(self, event: GroupEvent) -> str | None:
        """The comparison key the run joins at this event, or None."""
        run, key, manifests, attached = event
        if attached:
            bare = self._bare.get(run)
            if bare is None or manifests is None:
                return None  # the run has its group already (or was never ingested)
            merged = with_attached(_manifests(bare), _manifests(manifests))
            key = comparison_key_of(merged)
            manifests = _json(merged) if key is None else None
        if key is None:
            self._bare[run] = manifests or b"{}"
            return None
        self._bare.pop(run, None)
        return key

    def observe(self, result: EventVerification) -> str | None:
        """``fold`` of a verification made here."""
        event = group_event_of(result)
        return None if event is None else self.fold(event)


class WholeLogHeads:
    """The heads leaves of a whole-log bundle, each held to the map of the bundle's events
    before it. Fed in leaf order (the in-order merge); memory grows with the aggregates and
    groups of the log, never with its events."""

    def __init__(self) -> None:
        self.fold = HeadsFold()
        self.joins = GroupJoins()
        self.roots: dict[int, bytes] = {}  # stated roots of heads leaves not yet reached
        self.held = 0  # heads leaves recomputed and found to be the map

    def event(self, leaf: int, aggregate: str, version: int) -> None:
        self.fold.event(leaf, aggregate, version)

    def group_events(self, events: Iterable[GroupEvent]) -> None:
        for event in events:
            key = self.joins.fold(event)
            if key is not None:
                self.fold.joined(event[0], key)

    def heads_leaf(self, index: int, report: Report) -> None:
        """The heads leaf at ``index`` is reached: every leaf before it has been folded. A
        failure is named by the leaf, as ``audit`` names it."""
        stated = self.roots.pop(index, None)
        if stated is None:
            return  # unreadable: its line failed already
        found = self.fold.root()
        if found == stated:
            self.held += 1
            report.ok(Check.HEADS_MAP)
            return
        report.fail(
            Check.HEADS_MAP,
            f"heads leaf {index}",
            f"heads leaf {index} commits to a heads map ({base64.b64encode(stated).decode()}) "
            f"that is not the one of the log's events before it "
            f"({base64.b64encode(found).decode()}): the tree holds heads its events do not "
            "have (a run's or key's events, or a group's members, left out or added)",
        )
