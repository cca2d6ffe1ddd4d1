"""The in-order merge of verified events into a bundle's report: counts, findings (in line
order, so a report past its cap keeps the same ones however the lines were batched), the
order check, completeness and the run fold. ``BundleVerifier`` is one."""

from __future__ import annotations

from domain.errors import DomainError
from ledger.event_verification import EventVerification
from ledger.verification_report import MAX_FINDINGS, Check, Finding, Report
from ledger.verify.batches import BatchResult
from ledger.verify.completeness import Completeness
from ledger.verify.events import Observation
from ledger.verify.runs import RunTracker

__all__ = ["FOLD_ERRORS", "InOrderMerge"]

# What folding the runs may raise on events that passed every check: reported, never a crash.
FOLD_ERRORS = (DomainError, TypeError, ValueError, KeyError, ArithmeticError)


class InOrderMerge:
    """The state the merge folds into; results are merged in dispatch order (``BatchPool``)."""

    report: Report
    complete: Completeness
    runs: RunTracker
    kept: list[tuple[int, EventVerification]]
    events: int
    last_leaf: int

    def _merge(self, item: BatchResult) -> None:
        part = item.report
        self.events -= item.unreadable  # counted when routed (``feed``)
        self.report.passed.update(part.passed)
        self.report.failed.update(part.failed)
        self.report.notes.extend(part.notes)
        # In line order, whatever the batches: each event's own findings, then its order,
        # completeness and fold findings (``BatchResult.seen``).
        found, taken, observed, o = part.findings, 0, item.observations, 0
        for i, (where, (leaf, position, aggregate, version, signer), mark) in enumerate(item.seen):
            if mark > taken:
                self._keep(found[taken:mark])
                taken = mark
            self._order(leaf, position)
            self.complete.seen(
                self.report,
                leaf=leaf,
                aggregate=aggregate,
                version=version,
                signer=signer,
                where=where,
            )
            while o < len(observed) and observed[o][0] == i:
                self._observe(observed[o][1])
                o += 1
        self._keep(found[taken:])
        self.complete.group_events(item.joins)
        self.kept.extend(item.kept)

    def _keep(self, findings: list[Finding]) -> None:
        room = MAX_FINDINGS - len(self.report.findings)
        self.report.findings.extend(findings[: max(room, 0)])

    def _observe(self, observation: Observation) -> None:
        try:
            self.runs.observe(*observation)
        except FOLD_ERRORS as exc:
            # e.g. a run ingested twice: the completeness check has failed it already;
            # the runs cannot be recomputed from such a bundle, and say so.
            why = exc.message if isinstance(exc, DomainError) else f"{type(exc).__name__}: {exc}"
            self.report.fail(Check.CLAIM, f"event at position {observation[1]}", why)

    def _order(self, leaf_index: int, position: int) -> None:
        if leaf_index <= self.last_leaf:
            self.report.fail(
                Check.ORDER,
                f"leaf {leaf_index} (position {position})",
                f"leaf index does not increase after {self.last_leaf}",
            )
        else:
            self.report.ok(Check.ORDER)
        self.last_leaf = max(self.last_leaf, leaf_index)
