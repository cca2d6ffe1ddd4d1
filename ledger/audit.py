"""Auditing a live ledger database against its own log and signed checkpoints.

Named checks:

- ``sequenced``    every stored event has exactly one leaf and every leaf has its event
                   (an event deleted or inserted behind the ledger's back shows here);
- ``leaf``         each leaf hash recomputed from the stored event equals the stored one
                   (an edited or swapped event shows here);
- ``tree``         stored subtree nodes and roots equal those recomputed from the leaves;
- ``checkpoint``   every stored checkpoint verifies under the log key, its root equals the
                   recomputed root of its size, and it is not beyond the log's end (a
                   truncated log shows here); checkpoints given by the caller must agree with
                   the ledger's (a fork / equivocation shows here);
- ``fold-fields``  each event's fold fields row (``ledger.store.fold_fields``), where it
                   has one, is the row the commit makes of the stored event, byte for byte
                   (an altered or damaged row shows here, and an edited event beside
                   ``leaf``; a missing row is no finding: the fold decodes the event),
                   and each shared manifest document the rows name hashes to its key;
- per-event checks as ``history`` does them (signature, key, role, subject, manifests),
  against the keys as the log itself held them at each event: the key book is learned from
  the key events as the pass meets them, never read from the current state.

One pass over the events in position order; memory is O(log n) for the tree plus the keys.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from sqlalchemy import func, select, tuple_

from domain.errors import DomainError
from ledger.application import Ledger
from ledger.authority import KeyBook
from ledger.bundle import recompute_heads
from ledger.event_verification import EventVerification, learn_key, verify_stored_event
from ledger.proofs.compact import CompactRange
from ledger.proofs.errors import ProofError
from ledger.proofs.heads import HeadsError, open_heads
from ledger.proofs.log_entries import LogEntry
from ledger.proofs.nodes import Node
from ledger.proofs.signed_note import Checkpoint, NoteError, open_checkpoint
from ledger.proofs.verify import verify_consistency
from ledger.store.fold_fields import event_fold_fields, row_disagrees
from ledger.store.fold_manifests import wrong_bodies
from ledger.store.group_index import group_members
from ledger.store.heads_leaves import HeadsReplay
from ledger.store.transparency_log import SignedCheckpoint, leaves, nodes
from ledger.verification_report import Check, Report
from ledger.verify.heads_map import GroupJoins

_BATCH = 1000


def _rows(ledger: Ledger) -> Iterator[tuple[Any, ...]]:
    """Every event (position, aggregate, version, topic, state, leaf_index, leaf_hash, its
    fold fields row or None) and every orphan leaf (position, None..., leaf_index,
    leaf_hash, None), in position order."""
    events = ledger.store.events.c
    last = 0
    while True:
        with ledger.store.transaction(commit=False) as session:
            event_rows = session.execute(
                select(
                    events.id,
                    events.originator_id,
                    events.originator_version,
                    events.topic,
                    events.state,
                    leaves.c.leaf_index,
                    leaves.c.leaf_hash,
                    event_fold_fields.c.fields,
                )
                .outerjoin(leaves, leaves.c.position == events.id)
                .outerjoin(event_fold_fields, event_fold_fields.c.position == events.id)
                .where(events.id > last)
                .order_by(events.id)
                .limit(_BATCH)
            ).all()
            stop = int(event_rows[-1][0]) if event_rows else None
            orphan_query = (
                select(leaves.c.position, leaves.c.leaf_index, leaves.c.leaf_hash)
                .outerjoin(ledger.store.events, events.id == leaves.c.position)
                .where(events.id.is_(None), leaves.c.position > last)
            )
            if stop is not None:
                orphan_query = orphan_query.where(leaves.c.position <= stop)
            orphans = session.execute(orphan_query).all()
        merged: list[tuple[Any, ...]] = [tuple(r) for r in event_rows]
        merged += [(o[0], None, None, None, None, o[1], o[2], None) for o in orphans]
        merged.sort(key=lambda r: int(r[0]))
        yield from merged
        if not event_rows:
            return
        last = int(event_rows[-1][0])


def audit_ledger(
    ledger: Ledger,
    *,
    known_checkpoints: Iterable[str] = (),
    heads: Iterable[str] = (),
    progress: Callable[[int], None] | None = None,
) -> Report:
    """Audit the ledger's database against its own log and checkpoints, and against the
    checkpoints and heads notes the caller holds; every named check, in one report."""
    report = Report(subject="ledger")
    audit_heads(ledger, heads, report)
    with ledger.store.transaction(commit=False) as session:
        stored_checkpoints = ledger.tlog.checkpoints(session)
        stored_size = ledger.tlog.tree_size(session)
        node_count = int(session.execute(select(func.count()).select_from(nodes)).scalar_one())
    held = _open_held(ledger, known_checkpoints)
    wanted_roots = {c.size for c in stored_checkpoints} | {h.body.size for h in held if h.body}
    walk = _LogWalk(ledger, report, wanted_roots)
    for row in _rows(ledger):
        # An orphan leaf (no stored event) is counted, but not reported as progress.
        if walk.step(row) and progress is not None:
            progress(walk.count)
    walk.finish()
    size = walk.compact.size
    _check_tree_totals(report, node_count=node_count, stored_size=stored_size, size=size)
    _check_stored_checkpoints(ledger, stored_checkpoints, walk, report)
    _check_successive_consistency(ledger, stored_checkpoints, size, report)
    _check_given_checkpoints(held, stored_checkpoints, walk, report)
    report.facts.update(
        {"events": walk.count, "treeSize": size, "checkpoints": len(stored_checkpoints)}
    )
    return report


@dataclass(frozen=True)
class _Held:
    """A checkpoint note the caller gave: its body if it verified, else why not."""

    body: Checkpoint | None
    error: str


def _open_held(ledger: Ledger, notes: Iterable[str]) -> list[_Held]:
    verifier = ledger.tlog.verifier
    held: list[_Held] = []
    for note in notes:
        try:
            body, _ = open_checkpoint(note, [verifier], origin=ledger.trust_root.origin)
            held.append(_Held(body, ""))
        except NoteError as exc:
            held.append(_Held(None, str(exc)))
    return held


class _LogWalk:
    """One pass over the stored events and leaves in position order: versions, sequencing,
    each event re-verified against the keys as the log held them, each leaf recomputed, and
    the tree rebuilt from the stored leaf hashes (its nodes checked against the stored ones,
    its roots kept at the sizes some checkpoint is for)."""

    def __init__(self, ledger: Ledger, report: Report, wanted_roots: set[int]) -> None:
        self.ledger = ledger
        self.report = report
        self.wanted_roots = wanted_roots
        self.roots: dict[int, bytes] = {}  # recomputed root by tree size, for the checkpoints
        if 0 in wanted_roots:
            self.roots[0] = CompactRange().root()
        self.compact = CompactRange()
        self.created: list[Node] = []  # nodes not yet checked against the stored ones
        self.expected_leaf = 0
        self.count = 0
        # Each aggregate's versions must run 1, 2, 3... with no gap: a deleted event shows
        # even after someone re-sequenced the log around it.
        self.last_version: dict[str, int] = {}
        self.keys = KeyBook()
        self.members = _Membership()
        # Heads leaves (ledger.store.heads_leaves): each recomputed from the events before it.
        with ledger.store.transaction(commit=False) as session:
            self.heads = HeadsReplay(session, ledger.trust_root.origin, 2**62)

    def step(self, row: tuple[Any, ...]) -> bool:
        """Check one row of :func:`_rows`; False for a leaf with no stored event."""
        self.count += 1
        position, aggregate, version, topic, state, leaf_index, stored_hash, fields = row
        where = f"position {position}"
        if aggregate is None:
            self.report.fail(
                Check.SEQUENCED, where, f"leaf {leaf_index} has no stored event (deleted?)"
            )
            return False
        self._check_version(where, str(aggregate), int(version))
        if leaf_index is not None:
            self._heads_leaves(int(leaf_index))
        self._check_sequenced(where, leaf_index)
        entry = (int(position), str(aggregate), int(version), str(topic), bytes(state))
        self._verify_event(where, *entry)
        recomputed = self._recompute_leaf(where, *entry)
        if fields is not None:
            self._check_fold_fields(where, *entry[1:], bytes(fields))
        if leaf_index is not None:
            self._add_leaf(where, recomputed, stored_hash)
            self.heads.event(int(leaf_index), int(position), aggregate, int(version))
        return True

    def _heads_leaves(self, below: int) -> None:
        """The heads leaves before leaf ``below``: in sequence, and each the map of the
        leaves before it (``leaf``)."""
        for index, stored, _, matches in self.heads.due(below):
            where = f"heads leaf {index}"
            self._check_sequenced(where, index)
            if not matches:
                self.report.fail(
                    Check.LEAF, where, "not the heads map of the leaves before it (edited?)"
                )
            self._add_leaf(where, stored if matches else None, stored)

    def finish(self) -> None:
        """Check the nodes still unchecked, the group index against the log's groups, and
        the fold rows' shared documents against their keys."""
        self._heads_leaves(2**62)  # those after the last event's leaf
        _check_nodes(self.ledger, self.created, self.report)
        self.members.compare(self.ledger, self.report)
        with self.ledger.store.transaction(commit=False) as session:
            for key, why in wrong_bodies(session):
                self.report.fail(Check.FOLD_FIELDS, key, why)

    def _check_version(self, where: str, aggregate: str, version: int) -> None:
        previous = self.last_version.get(aggregate, 0)
        if version != previous + 1:
            self.report.fail(
                Check.VERSIONS,
                where,
                f"aggregate {aggregate} goes from version {previous} to {version} (deleted?)",
            )
        else:
            self.report.ok(Check.VERSIONS)
        self.last_version[aggregate] = max(previous, version)

    def _check_sequenced(self, where: str, leaf_index: Any) -> None:
        if leaf_index is None:
            self.report.fail(
                Check.SEQUENCED, where, "stored event has no leaf: appended behind the log"
            )
        elif int(leaf_index) != self.expected_leaf:
            self.report.fail(
                Check.SEQUENCED, where, f"leaf index {leaf_index}, expected {self.expected_leaf}"
            )
        else:
            self.report.ok(Check.SEQUENCED)

    def _verify_event(
        self, where: str, position: int, aggregate: str, version: int, topic: str, state: bytes
    ) -> None:
        result = verify_stored_event(
            position=position,
            version=version,
            event=topic.rsplit(":", 1)[-1],
            aggregate_id=UUID(aggregate),
            state=state,
            keys=self.keys,
            trust_root=self.ledger.trust_root,
        )
        result.report_to(self.report, where)
        learn_key(self.keys, result)
        self.members.observe(result)

    def _check_fold_fields(
        self, where: str, aggregate: str, version: int, topic: str, state: bytes, row: bytes
    ) -> None:
        # Rebuilt views read the row, not the event: one that differs would make them differ.
        wrong = row_disagrees(self.ledger.mapper, UUID(aggregate), version, topic, state, row)
        if wrong is None:
            self.report.ok(Check.FOLD_FIELDS)
        else:
            self.report.fail(Check.FOLD_FIELDS, where, wrong)

    def _recompute_leaf(
        self, where: str, position: int, aggregate: str, version: int, topic: str, state: bytes
    ) -> bytes | None:
        try:
            return LogEntry.from_stored(position, aggregate, version, topic, state).leaf_hash()
        except DomainError as exc:
            self.report.fail(Check.LEAF, where, exc.message)
            return None

    def _add_leaf(self, where: str, recomputed: bytes | None, stored_hash: Any) -> None:
        if recomputed is not None and stored_hash is not None and bytes(stored_hash) != recomputed:
            self.report.fail(
                Check.LEAF, where, "stored event no longer matches its log leaf (edited?)"
            )
        elif recomputed is not None:
            self.report.ok(Check.LEAF)
        # The tree is rebuilt from the stored leaf hashes, so checkpoints are checked
        # against what was logged; a leaf mismatch above says which event changed.
        self.created.extend(self.compact.append(bytes(stored_hash)))
        self.expected_leaf += 1
        if self.compact.size in self.wanted_roots:
            self.roots[self.compact.size] = self.compact.root()
        if len(self.created) >= _BATCH:
            _check_nodes(self.ledger, self.created, self.report)
            self.created = []


def _check_tree_totals(report: Report, *, node_count: int, stored_size: int, size: int) -> None:
    """The stored tree has exactly the nodes and the size of the one rebuilt from the log."""
    if node_count != _expected_node_count(size):
        report.fail(
            Check.TREE,
            "nodes",
            f"{node_count} stored nodes, expected {_expected_node_count(size)}",
        )
    if stored_size != size:
        report.fail(Check.TREE, "size", f"stored tree size {stored_size}, recomputed {size}")


def _check_stored_checkpoints(
    ledger: Ledger, stored: list[SignedCheckpoint], walk: _LogWalk, report: Report
) -> None:
    """Each stored checkpoint verifies, says what its row says, and is of the log now."""
    size = walk.compact.size
    verifier = ledger.tlog.verifier
    for checkpoint in stored:
        where = f"checkpoint {checkpoint.size}"
        try:
            body, _ = open_checkpoint(checkpoint.note, [verifier], origin=ledger.trust_root.origin)
        except NoteError as exc:
            report.fail(Check.CHECKPOINT, where, f"signature does not verify: {exc}")
            continue
        if body.size != checkpoint.size or body.root != checkpoint.root:
            report.fail(Check.CHECKPOINT, where, "stored size/root differ from the signed note")
        elif checkpoint.size > size:
            report.fail(
                Check.CHECKPOINT,
                where,
                f"signed for {checkpoint.size} leaves but the log has {size}: truncated",
            )
        elif walk.roots.get(checkpoint.size) != checkpoint.root:
            report.fail(
                Check.CHECKPOINT, where, "root differs from the tree recomputed from the log"
            )
        else:
            report.ok(Check.CHECKPOINT)


def _check_given_checkpoints(
    held: list[_Held], stored: list[SignedCheckpoint], walk: _LogWalk, report: Report
) -> None:
    """Each checkpoint the caller gave agrees with the ledger's and with the log now."""
    size = walk.compact.size
    stored_by_size = {c.size: c.root for c in stored}
    for given in held:
        mark = given.body
        if mark is None:
            report.fail(Check.CHECKPOINT, "given checkpoint", f"does not verify: {given.error}")
            continue
        where = f"given checkpoint {mark.size}"
        if mark.size in stored_by_size and stored_by_size[mark.size] != mark.root:
            report.fail(
                Check.CHECKPOINT,
                where,
                f"two different roots signed for tree size {mark.size}: the log equivocated",
            )
        elif mark.size > size:
            report.fail(Check.CHECKPOINT, where, f"beyond the log's {size} leaves: truncated")
        elif walk.roots.get(mark.size) != mark.root:
            # The held note is signed by the log key, so the log once committed to that root:
            # a log that no longer yields it was rewritten.
            report.fail(Check.CHECKPOINT, where, "root differs from the log recomputed now: fork")
        else:
            report.ok(Check.CHECKPOINT)


class _Membership:
    """Comparison-group membership folded from the log, to check the ledger's group index
    against (heads and bundles prove groups with that index, so it must be the log's)."""

    def __init__(self) -> None:
        self.joined: dict[str, tuple[str, int]] = {}  # run -> (key, position it joined at)
        self._rule = GroupJoins()  # the rule the whole-log verifier folds too

    def observe(self, result: EventVerification) -> None:
        key = self._rule.observe(result)
        if key is not None and result.subject_digest is not None:
            self.joined[result.subject_digest] = (key, result.position)

    def compare(self, ledger: Ledger, report: Report) -> None:
        with ledger.store.transaction(commit=False) as session:
            stored = {
                str(r): (str(k), int(p))
                for r, k, p in session.execute(
                    select(
                        group_members.c.run_digest,
                        group_members.c.comparison_key,
                        group_members.c.position,
                    )
                )
            }
        wrong = sorted(
            r for r in set(stored) | set(self.joined) if stored.get(r) != self.joined.get(r)
        )
        for run in wrong[:20]:
            report.fail(
                Check.HEADS,
                f"group index {run[:19]}…",
                f"the index says {stored.get(run)}, the log's events {self.joined.get(run)}",
            )
        if len(wrong) > 20:
            report.fail(Check.HEADS, "group index", f"and {len(wrong) - 20} more runs disagree")
        if not wrong:
            report.ok(Check.HEADS)


def audit_heads(ledger: Ledger, notes: Iterable[str], report: Report) -> None:
    """Each heads note given (from a bundle) must be signed by the log key and say what the
    stored log says at its size: a false one is the operator's signed misstatement."""
    for number, note in enumerate(notes, start=1):
        where = f"heads note {number}"
        try:
            heads = open_heads(note, ledger.tlog.verifier)
        except HeadsError as exc:
            report.fail(Check.HEADS, where, exc.message)
            continue
        with ledger.store.transaction(commit=False) as session:
            if heads.size > ledger.tlog.tree_size(session):
                report.fail(Check.HEADS, where, f"for {heads.size} leaves: beyond the log's end")
                continue
            truth = recompute_heads(ledger, session, heads)
        wrong = [f"run {r}" for r in heads.runs if truth.runs.get(r) != heads.runs[r]]
        wrong += [f"key {k}" for k in heads.keys if truth.keys.get(k) != heads.keys[k]]
        wrong += [f"group {g}" for g in heads.groups if truth.groups.get(g) != heads.groups[g]]
        if truth.root != heads.root:
            wrong.insert(0, "the root")
        if wrong:
            report.fail(
                Check.HEADS,
                where,
                f"signed by the log key, but the log at {heads.size} leaves disagrees about "
                + ", ".join(wrong[:5])
                + (f" and {len(wrong) - 5} more" if len(wrong) > 5 else ""),
            )
        else:
            report.ok(Check.HEADS)


def _check_successive_consistency(
    ledger: Ledger, signed: list[SignedCheckpoint], size: int, report: Report
) -> None:
    """Each signed checkpoint extends the one before: a consistency proof built from the
    stored tree verifies between every successive pair (what a witness would ask for)."""
    within = [c for c in signed if c.size <= size]
    # One read transaction for them all: each commit signs, so there is a pair per commit.
    with ledger.store.transaction(commit=False) as session:
        for older, newer in itertools.pairwise(within):
            where = f"checkpoints {older.size} → {newer.size}"
            try:
                proof = ledger.tlog.consistency(session, older.size, newer.size)
                verify_consistency(older.size, newer.size, proof, older.root, newer.root)
            except (ProofError, DomainError) as exc:
                report.fail(
                    Check.CONSISTENCY,
                    where,
                    f"the newer checkpoint does not extend the older: {exc}",
                )
            else:
                report.ok(Check.CONSISTENCY)


def _expected_node_count(size: int) -> int:
    # Every complete subtree is stored once: sum over levels of floor(size / 2^level).
    total, level = 0, 0
    while (size >> level) > 0:
        total += size >> level
        level += 1
    return total


def _check_nodes(ledger: Ledger, created: list[Node], report: Report) -> None:
    if not created:
        return
    keys = [(n.level, n.index) for n in created]
    with ledger.store.transaction(commit=False) as session:
        stored = {
            (int(r[0]), int(r[1])): bytes(r[2])
            for r in session.execute(
                select(nodes.c.level, nodes.c.idx, nodes.c.hash).where(
                    tuple_(nodes.c.level, nodes.c.idx).in_(keys)
                )
            )
        }
    for n in created:
        if stored.get((n.level, n.index)) != n.hash:
            report.fail(
                Check.TREE,
                f"node ({n.level}, {n.index})",
                "stored subtree hash differs from the leaves",
            )
        else:
            report.ok(Check.TREE)
