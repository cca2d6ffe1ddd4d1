"""Holding a bundle to its heads: every event of each run and key in scope, nothing else.

Events arrive in leaf order, and an aggregate's versions rise with its leaves, so per
aggregate it suffices to remember the next version expected and the last leaf seen: memory
grows with the aggregates in scope, never with their events. A whole-log bundle is held to
every leaf from 0 to the checkpoint's size instead, and each of its heads leaves to the heads
map of the events before it (``ledger.verify.heads_map.WholeLogHeads``).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import msgspec

from ledger.ids import principal_id, run_id
from ledger.proofs.heads import Heads
from ledger.verification_report import Check, Report
from ledger.verify.heads_map import GroupEvent, WholeLogHeads

# The aggregate a bundle's in-order merge gives a heads leaf (never an event's: those are UUIDs).
HEADS_LEAF = "heads leaf"
# Versions a whole-log line may skip before it fails at once (not held in memory).
_SKIPPED_KEPT = 64


class _Seen(msgspec.Struct):
    name: str  # "run sha256:…" / "key sha256:…"
    next_version: int = 1
    last_leaf: int = -1


class Completeness:
    def __init__(self) -> None:
        self.heads: Heads | None = None
        self.whole_log = False
        self.size: int | None = None
        self._aggregates: dict[UUID, _Seen] = {}
        self._signers: set[str] = set()
        self._in_range = 0
        self.whole_log_held = False  # a whole-log bundle held every leaf of its tree
        self.heads_leaves = WholeLogHeads()  # a whole-log bundle's, folded from its events
        # A whole-log bundle's next version expected of each aggregate: the heads fold takes
        # an event's version as its aggregate's count of events, so a version that skips or
        # repeats would let a heads leaf state events the log does not have (or hide some).
        self._next_versions: dict[str, int] = {}
        # Versions skipped so far (a line moved later arrives after: the order check names
        # that; one never seen fails at the end). Empty for an honest log.
        self._skipped: dict[str, set[int]] = {}

    def heads_leaf_root(self, index: int, root: bytes) -> None:
        """A headsLeaf line's stated map root, checked when the merge reaches its leaf."""
        if self.whole_log:
            self.heads_leaves.roots[index] = root

    def group_events(self, events: list[GroupEvent]) -> None:
        """What a merged batch's run events tell of group membership, in leaf order."""
        if self.whole_log and events:
            self.heads_leaves.group_events(events)

    def scoped(self, heads: Heads) -> None:
        self.heads = heads
        self._aggregates = {run_id(r): _Seen(f"run {r}") for r in heads.runs}
        self._aggregates |= {principal_id(k): _Seen(f"key {k}") for k in heads.keys}

    def seen(
        self,
        report: Report,
        *,
        leaf: int,
        aggregate: str,
        version: int,
        signer: str | None,
        where: str,
    ) -> None:
        """One event line, in the order the bundle holds them."""
        if signer:
            self._signers.add(signer)
        if self.whole_log:
            # Counted, not located: with lines out of order (the order check fails them) a
            # leaf that seems missing may still come; fewer leaves than the tree has may not.
            if self.size is not None and 0 <= leaf < self.size:
                self._in_range += 1
            if aggregate == HEADS_LEAF:
                self.heads_leaves.heads_leaf(leaf, report)
                return
            self._whole_log_version(report, where, aggregate, version)
            self.heads_leaves.event(leaf, aggregate, version)
            return
        if self.heads is None:
            return  # reported once, at the end: a scoped bundle without heads
        try:
            state = self._aggregates[UUID(aggregate)]
        except (KeyError, ValueError):
            report.fail(
                Check.COMPLETE,
                where,
                f"an event of aggregate {aggregate}, which the heads do not cover",
            )
            return
        if version != state.next_version:
            gap = (
                f"versions {state.next_version}..{version - 1} are missing (left out)"
                if version > state.next_version
                else f"version {version} appears again"
            )
            report.fail(Check.COMPLETE, where, f"{state.name}: {gap}")
        state.next_version = max(state.next_version, version + 1)
        state.last_leaf = max(state.last_leaf, leaf)

    def _whole_log_version(self, report: Report, where: str, aggregate: str, version: int) -> None:
        expected = self._next_versions.get(aggregate, 1)
        skipped = self._skipped.get(aggregate)
        if version < expected:
            if skipped is not None and version in skipped:
                skipped.discard(version)  # out of line order: ``order`` fails the line
            else:
                report.fail(Check.COMPLETE, where, f"{aggregate}: version {version} appears again")
            return
        if version - expected > _SKIPPED_KEPT:
            report.fail(
                Check.COMPLETE, where, f"{aggregate}: versions {expected}..{version - 1} missing"
            )
        elif version > expected:
            self._skipped.setdefault(aggregate, set()).update(range(expected, version))
        self._next_versions[aggregate] = version + 1

    def verified_scope(self) -> dict[str, Any]:
        """What the bundle was held to, as a fact: the signed heads' runs and groups, or the
        whole log once every leaf of the checkpoint's tree was found. Never the header's own
        words, which nobody signs (its origin, groups or ``all``)."""
        if self.heads is not None:
            heads = self.heads
            return {"scope": {"runs": sorted(heads.runs), "groups": sorted(heads.groups)}}
        if self.whole_log_held:
            return {"scope": {"all": True}}
        return {}

    def finish(self, report: Report) -> None:
        if self.whole_log:
            for name, skipped in sorted(self._skipped.items()):
                if skipped:
                    report.fail(
                        Check.COMPLETE,
                        "end",
                        f"{name}: version(s) {', '.join(map(str, sorted(skipped)))} of its "
                        "events are not in the bundle (left out, or another's relabelled)",
                    )
            if self.size is not None and self._in_range < self.size:
                report.fail(
                    Check.COMPLETE,
                    "end",
                    f"a whole-log bundle holds every leaf: this one holds {self._in_range} of "
                    f"the log's {self.size} (the rest are left out)",
                )
            else:
                self.whole_log_held = self.size is not None
                report.ok(Check.COMPLETE)
            return
        if self.heads is None:
            report.fail(
                Check.COMPLETE,
                "end",
                "the bundle has no heads and is not a whole-log bundle: nothing shows it holds "
                "every event of its runs",
            )
            return
        named = {run_id(r): h for r, h in self.heads.runs.items()}
        named |= {principal_id(k): h for k, h in self.heads.keys.items()}
        for aggregate, head in named.items():
            state = self._aggregates[aggregate]
            held = state.next_version - 1
            if held == head.events and state.last_leaf == head.last_leaf:
                report.ok(Check.COMPLETE)
            elif held < head.events and state.last_leaf < head.last_leaf:
                report.fail(
                    Check.COMPLETE,
                    state.name,
                    f"the log has {head.events} events, the bundle {held}: its latest "
                    f"(leaf {head.last_leaf}) is left out",
                )
            else:
                report.fail(
                    Check.COMPLETE,
                    state.name,
                    f"the log has {head.events} events ending at leaf {head.last_leaf}; the "
                    f"bundle holds {held} ending at leaf {state.last_leaf}",
                )
        report.ok(Check.COMPLETE)  # the heads were held to, even if they name nothing
        for signer in sorted(self._signers - set(self.heads.keys)):
            report.fail(
                Check.COMPLETE,
                f"key {signer}",
                "it signed events of the bundle, but the heads do not cover its own events "
                "(a revocation could be left out)",
            )
