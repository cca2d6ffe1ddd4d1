"""Offline verification of a bundle against the caller's policy: no network, no database,
one pass, memory that grows with the runs and keys in scope, never with their events.

Checks, each named in the report (``ledger.verification_report.Check``):

- ``format``         header, line types and their order, footer count (truncation);
- ``anchor``         the caller pinned a trust root (else the verdict is UNANCHORED);
- ``trust-root``     the bundle's trust root is the pinned one;
- ``checkpoint``     signed by the trust root's log key for its origin; one root per size
                     among the checkpoints the caller holds (else the log equivocated);
- ``consistency``    the bundle's checkpoint extends each older one the caller holds;
- ``freshness``      no checkpoint the caller holds is newer than the bundle's (else STALE);
- ``witnessed``      the checkpoint, or a later one the bundle proves extends it, is cosigned
                     by the quorum of the caller's witness policy (``--policy``, else the
                     pinned trust root's); without one the report says it is unwitnessed;
- ``heads``          the log key's signed heads are for the bundle's checkpoint;
- ``heads-map``      (bundles with a headsMap line) those heads are the ones the heads leaf
                     ending the checkpoint's tree commits to (``ledger.verify.heads_map``);
- ``inclusion``      every event's leaf, recomputed from its contents, is in the tree;
- ``order``          leaf indices strictly increase;
- event checks       each event re-verified as admission judged it (``ledger.event_verification``),
                     against keys learned from the bundle's key events in leaf order;
- ``complete``       every event of each run and key the heads name, and no other (a
                     whole-log bundle: every leaf); every signer's key events are covered;
- ``group``          each comparison group the heads name has exactly those members;
- ``claim``          each claimed level and rank, recomputed from the complete events;
- ``expectation``    what the caller asked of one run (``--run``, ``--min-level``, ``--rank``);
- ``artifact``       bundled artifacts hash to their digests.

Parallelism (DESIGN.md §13). This process reads the lines and itself handles everything that
changes what later lines are checked against: header, trust root, checkpoint, heads, claims,
footer and key events (``Principal.*``, which teach the key book in leaf order). Every other
event line is put in a *batch* of consecutive event lines (with workers, routed by its type,
topic and key id alone: the worker reads it whole, and a line it cannot read is refused there
and counted as no event, before the footer's count is checked); a batch is closed before any
other line is handled, and shipped (to a worker process, or verified here when ``workers`` is 1
or the bundle is small) with a snapshot of the state its lines are checked against: the
checkpoint's size and root, the trust root, and the states of the keys its envelopes name. Key
validity is by log position, so the snapshot's later changes could not matter anyway. Batch
results (pass counts, findings, and per event its leaf, aggregate, version and signer for the
order and completeness checks, and what the run tracker folds) are merged in dispatch order,
with a bounded number of batches in flight, so the counts equal those of verifying every line
in turn; only the order of findings may differ.

Where the parts live: ``lines`` (the line types, their order, and the checks of the lines
that are not events), ``held`` (the caller's checkpoints), ``events`` and ``inclusion`` (one
event line), ``batches`` and ``pool`` (batches, worker processes, the in-order merge); this
module holds the state between lines and the verdict's assembly.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from domain.errors import DomainError
from domain.rerun_binding import DeviceClass
from ledger.authority import KeyBook
from ledger.event_verification import EventVerification, learn_key
from ledger.proofs.signed_note import Checkpoint, Verifier
from ledger.signing.dsse import named_keyid
from ledger.signing.trust import TrustRoot
from ledger.verification_report import Check, Report
from ledger.verify.batches import BatchResult, verify_into
from ledger.verify.completeness import HEADS_LEAF, Completeness
from ledger.verify.events import (
    EventContext,
    is_key_event,
    parse_event,
    worker_event,
)
from ledger.verify.format import MAX_LINE_CHARS, OverlongLine, UnreadableLineError, read_line
from ledger.verify.heads_map import (
    HeadsMapLine,
    check_heads_leaf,
    check_heads_map,
    heads_fact,
    read_heads_map,
)
from ledger.verify.held import check_held_checkpoints
from ledger.verify.lines import (
    LINE_ORDER,
    anchor_trust_root,
    check_artifact,
    check_event_count,
    check_format,
    check_scope,
    open_bundle_checkpoint,
    open_bundle_heads,
    read_consistency,
    read_trust_root,
    read_witnessed,
    stage_name,
)
from ledger.verify.merge import FOLD_ERRORS, InOrderMerge
from ledger.verify.policy import VerificationPolicy
from ledger.verify.pool import BATCH_EVENTS, BatchPool, default_workers
from ledger.verify.runs import RunTracker
from ledger.verify.witnessed import check_witnessed, policy_of

if TYPE_CHECKING:
    from ledger.verify.pool import Workers

__all__ = ["BundleVerifier", "verify_bundle_lines"]


_Handler = Callable[[str, dict[str, Any]], None]
# The record ``feed`` hands ``_line`` for a line that is no JSON: refused there, in turn.
_UNREADABLE = object()


class BundleVerifier(InOrderMerge):
    """Feed it a bundle's lines in order, then ``finish()``; call ``close()`` (or use it as a
    context manager) to stop its worker processes. ``workers=1`` verifies in this process."""

    def __init__(
        self,
        policy: VerificationPolicy | None = None,
        *,
        workers: int | None = None,
        batch_events: int = BATCH_EVENTS,
        keep: Iterable[str] = (),
    ) -> None:
        """``keep``: aggregate ids whose events' verifications to keep, in leaf order
        (``self.kept``), for readers that show them (a remote history)."""
        self.policy = policy or VerificationPolicy(trust_root=None)
        self.keep = frozenset(keep)
        self.kept: list[tuple[int, EventVerification]] = []
        self.report = Report(subject="bundle")
        self.trust_root: TrustRoot | None = self.policy.trust_root
        self.checkpoint: Checkpoint | None = None
        self.checkpoint_note: str | None = None  # the signed note, once it verified
        self.verifier: Verifier | None = None
        self.keys = KeyBook()
        self.runs = RunTracker(self._devices_of)
        self.artifacts: set[str] = set()  # the digests of the artifacts the bundle carries
        # The bytes of its rerun workloads (small), whose content a job's binding checks.
        self.workloads: dict[str, bytes] = {}
        self.complete = Completeness()
        self.consistency: dict[int, list[bytes]] = {}
        self.witnessed_line: tuple[str, list[bytes]] | None = None
        self.heads_map: HeadsMapLine | None = None
        # The cosigned checkpoint that met the witness policy (what a caller keeps).
        self.cosigned_note: str | None = None
        self.scope: dict[str, Any] | None = None
        self.last_leaf = -1
        self.events = 0
        self.stage = 0  # how far through the line order the bundle is (see LINE_ORDER)
        self.footer_seen = False
        self.header_seen = False
        self.trust_root_seen = False
        self.workers = max(1, workers if workers is not None else default_workers())
        self.batch_events = max(1, batch_events)
        self._batches = BatchPool(self.workers, self.batch_events, self._context, self._merge)
        self._handlers: dict[str, _Handler] = {
            "header": self._header,
            "trustRoot": self._trust_root,
            "checkpoint": self._checkpoint,
            "witnessed": self._witnessed,
            "consistency": self._consistency,
            "heads": self._heads,
            "headsMap": self._heads_map,
            "headsLeaf": self._heads_leaf,
            "event": self._event,
            "claim": self._claim,
            "artifact": self._artifact,
            "footer": self._footer,
        }

    def __enter__(self) -> BundleVerifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._batches.shutdown()

    @property
    def _pool(self) -> Workers | None:
        """The worker processes, once started (tests look whether they were)."""
        return self._batches.pool

    @property
    def observing(self) -> bool:
        """Runs are folded for scoped bundles (bounded), claims and the caller's expectation."""
        return (
            self.complete.heads is not None
            or bool(self.runs.claims)
            or self.policy.expect is not None
        )

    # ----------------------------------------------------------------- lines

    def feed(self, number: int, line: str | OverlongLine) -> None:
        if (
            self.workers > 1
            and self.stage == LINE_ORDER["event"]
            and isinstance(line, str)
            and (route := worker_event(line))
        ):
            self.events += 1  # a worker reads it whole; here, only what routes it
            self._batches.add(number, line, None, named_keyid(route.envelope))
            return
        record: Any = None
        if isinstance(line, str) and not self.footer_seen:
            try:
                record = read_line(line)
            except UnreadableLineError:
                record = _UNREADABLE
            kind = record.get("type") if isinstance(record, dict) else None
            if kind == "event" and self.stage == LINE_ORDER["event"] and not is_key_event(record):
                self.events += 1
                self._batches.add(number, line, record, named_keyid(record.get("envelope")))
                return
        # Every other line is judged here, after the batches before it: its findings are
        # merged in turn, so a report past its cap keeps the findings one process keeps.
        self._batches.close_batch()
        if not self._batches.pending:
            self._line(f"line {number}", line, record)
            return
        real, self.report = self.report, Report(subject="line")
        try:
            self._line(f"line {number}", line, record)
        finally:
            own, self.report = self.report, real
        self._batches.merge_in_turn(BatchResult(own, []))

    def _line(self, where: str, line: str | OverlongLine, record: Any) -> None:
        """Judge a line that is not an event a batch verifies, into ``self.report``."""
        if self.footer_seen:
            self.report.fail(Check.FORMAT, where, "content after the footer")
            return
        if isinstance(line, OverlongLine):
            self.report.fail(
                Check.FORMAT,
                where,
                f"a line of {line.chars:,} characters: longer than any the format has "
                f"({MAX_LINE_CHARS:,}), not read",
            )
            return
        if record is _UNREADABLE:
            self.report.fail(Check.FORMAT, where, UnreadableLineError.finding)
            return
        kind = record.get("type") if isinstance(record, dict) else None
        handler = self._handlers.get(str(kind))
        if handler is None:
            self.report.fail(Check.FORMAT, where, f"unknown line type {kind!r}")
            return
        stage = LINE_ORDER[str(kind)]
        if stage < self.stage:
            self.report.fail(
                Check.FORMAT,
                where,
                f"a {kind} line after the bundle's {stage_name(self.stage)} lines",
            )
            return
        if kind != "header" and not self.header_seen:
            self.report.fail(Check.FORMAT, where, "bundle does not start with a header")
        self.stage = stage
        handler(where, record)

    def finish(self) -> Report:
        self._batches.close_batch()
        self._batches.drain()
        report = self.report
        if not self.footer_seen:
            report.fail(Check.FORMAT, "end", "no footer: the bundle is truncated")
        if not self.trust_root_seen:
            report.fail(Check.FORMAT, "end", "the bundle has no trust root line")
        if self.checkpoint is None:
            report.fail(Check.CHECKPOINT, "end", "the bundle has no checkpoint")
        else:
            assert self.verifier is not None
            check_held_checkpoints(
                self.policy.held_checkpoints,
                self.checkpoint,
                self.verifier,
                self.consistency,
                report,
            )
            assert self.checkpoint_note is not None
            self.cosigned_note = check_witnessed(
                policy_of(self.policy.witness_policy, self.policy.trust_root),
                self.checkpoint,
                self.checkpoint_note,
                self.witnessed_line,
                self.verifier,
                report,
            )
        # The header is unsigned: only a whole-log bundle (every leaf) goes without heads.
        self.complete.finish(report)
        heads = self.complete.heads
        self._check_heads_map(report)
        if heads is not None:
            check_scope(self.scope, heads, report)
        try:
            self.runs.check_groups(report, heads)
            self.runs.check_measured_code(report, self.artifacts.__contains__, self.workloads.get)
            self.runs.check_claims(report, heads)
            if self.policy.expect is not None:
                self.runs.check_expectation(report, self.policy.expect, heads)
        except FOLD_ERRORS as exc:
            # Events that passed every check still could not be folded: never a crash,
            # never a verdict on what could not be recomputed.
            report.fail(Check.CLAIM, "end", f"the runs cannot be recomputed: {exc}")
        report.facts.update(
            {"events": self.events, "keys": len(self.keys)}
            | ({"treeSize": self.checkpoint.size} if self.checkpoint else {})
            | self.complete.verified_scope()
        )
        return report

    # --------------------------------------------------------------- batches

    def _context(self, key_ids: Iterable[str]) -> EventContext:
        tree = (self.checkpoint.size, self.checkpoint.root) if self.checkpoint else None
        return EventContext(
            tree, self.trust_root, self.keys.snapshot(key_ids), self.observing, self.keep
        )

    # --------------------------------------------------------------- handlers

    def _header(self, where: str, record: dict[str, Any]) -> None:
        if self.header_seen:
            self.report.fail(Check.FORMAT, where, "second header")
            return
        self.header_seen = True
        check_format(where, record, self.report)
        scope = record.get("scope")
        self.scope = scope if isinstance(scope, dict) else {}
        self.complete.whole_log = self.scope.get("all") is True

    def _trust_root(self, where: str, record: dict[str, Any]) -> None:
        bundled = read_trust_root(where, record, self.report)
        if bundled is None:
            return
        if self.trust_root_seen:
            # A second root could switch the keys that check the rest of the bundle.
            self.report.fail(Check.FORMAT, where, "second trust root")
            return
        self.trust_root_seen = True
        self.trust_root = anchor_trust_root(where, bundled, self.policy, self.report)

    def _checkpoint(self, where: str, record: dict[str, Any]) -> None:
        if self.trust_root is None:
            self.report.fail(
                Check.CHECKPOINT, where, "no trust root to check the checkpoint against"
            )
            return
        if self.checkpoint is not None:
            self.report.fail(Check.FORMAT, where, "second checkpoint")
            return
        opened = open_bundle_checkpoint(where, record, self.trust_root, self.report)
        if opened is None:
            return
        self.checkpoint, self.verifier = opened
        self.checkpoint_note = str(record.get("note"))
        self.complete.size = self.checkpoint.size

    def _witnessed(self, where: str, record: dict[str, Any]) -> None:
        if self.witnessed_line is not None:
            self.report.fail(Check.FORMAT, where, "second witnessed line")
            return
        self.witnessed_line = read_witnessed(where, record, self.report)

    def _consistency(self, where: str, record: dict[str, Any]) -> None:
        read = read_consistency(where, record, self.report)
        if read is not None:
            older, proof = read
            self.consistency[older] = proof

    def _heads(self, where: str, record: dict[str, Any]) -> None:
        if self.verifier is None or self.checkpoint is None:
            self.report.fail(Check.HEADS, where, "no verified checkpoint to bind the heads to")
            return
        if self.complete.heads is not None:
            self.report.fail(Check.FORMAT, where, "second heads line")
            return
        heads = open_bundle_heads(where, record, self.verifier, self.checkpoint, self.report)
        if heads is not None:
            self.complete.scoped(heads)

    def _heads_map(self, where: str, record: dict[str, Any]) -> None:
        if self.heads_map is not None:
            self.report.fail(Check.FORMAT, where, "second headsMap line")
            return
        self.heads_map = read_heads_map(where, record, self.report)

    def _heads_leaf(self, where: str, record: dict[str, Any]) -> None:
        """A heads leaf of a whole-log bundle: in the tree, and counted (in leaf order) as
        one of its leaves; in a scoped bundle, a leaf its heads do not cover."""
        if self.checkpoint is None:
            self.report.fail(Check.INCLUSION, where, "no verified checkpoint for the heads leaf")
            return
        own = Report(subject="event")  # its findings merged in turn, before its leaf's
        found = check_heads_leaf(where, record, self.checkpoint, own)
        if found is not None:
            index = found[0]
            self.complete.heads_leaf_root(*found)  # held to the events before it, in turn
            seen = (index, -(index + 1), HEADS_LEAF, 0, None)
        self._batches.merge_in_turn(
            BatchResult(own, [] if found is None else [(where, seen, len(own.findings))])
        )

    def _check_heads_map(self, report: Report) -> None:
        """The heads held to the tree's heads leaf (when the bundle has one), and the fact
        of whose word they are."""
        heads = self.complete.heads
        if heads is None and self.heads_map is None:
            return
        held: bool | None = None
        if self.heads_map is not None and self.checkpoint is not None:
            held = check_heads_map(self.heads_map, heads, self.checkpoint, report)
        witnessed = self.cosigned_note is not None
        report.facts["heads"] = heads_fact(held, witnessed)
        if self.policy.require_witnessed_heads and held is not False and not (held and witnessed):
            report.fail(
                Check.HEADS_MAP,
                "heads",
                f"witnessed heads were required; the heads are {report.facts['heads']}",
            )

    def _event(self, where: str, record: dict[str, Any]) -> None:
        """A key event (or any event line out of its place), verified here, in leaf order."""
        self.events += 1
        out = BatchResult(Report(subject="event"), [])  # merged in turn, as a batch's
        event = parse_event(where, record, out.report)
        if event is not None:
            result, included = verify_into(out, event, self._context(()), self.keys)
            if result is not None and included:
                learn_key(self.keys, result)
        self._batches.merge_in_turn(out)

    def _claim(self, where: str, record: dict[str, Any]) -> None:
        try:
            self.runs.expect(record)
        except DomainError as exc:  # e.g. ClaimFormatError: a malformed claim line
            self.report.fail(Check.CLAIM, where, exc.message)

    def _artifact(self, where: str, record: dict[str, Any]) -> None:
        # Loaded by a bundle that carries artifacts only (a rerun's): the importers' records
        # are no part of verifying an ingested run.
        from domain.importers.records import WORKLOAD_MEDIA_TYPE  # noqa: PLC0415

        digest = check_artifact(where, record, self.report)
        if digest is not None:
            self.artifacts.add(digest)
            if record.get("mediaType") == WORKLOAD_MEDIA_TYPE:
                # Checked above: it decodes, to these bytes' digest.
                self.workloads[digest] = base64.b64decode(str(record["content"]))

    def _devices_of(self, key_id: str) -> frozenset[DeviceClass]:
        """A key's device classes as its registration in the bundle names them."""
        state = self.keys(key_id)
        return frozenset() if state is None else state.devices

    def _footer(self, where: str, record: dict[str, Any]) -> None:
        self.footer_seen = True
        self._batches.drain()  # the events counted: a routed line may have been no event
        check_event_count(where, record, self.events, self.report)


def verify_bundle_lines(
    lines: Iterable[str | OverlongLine],
    policy: VerificationPolicy | None = None,
    *,
    progress: Callable[[int], None] | None = None,
    workers: int | None = None,
    batch_events: int = BATCH_EVENTS,
) -> Report:
    """Verify a bundle's lines against ``policy`` (default: nothing pinned, so UNANCHORED).
    ``workers``: processes to verify event lines in (default one per CPU core; 1 verifies in
    this process, as do bundles of fewer event lines than workers start for: see
    ``ledger.verify.pool``). ``outcome_of(report)`` is the verdict."""
    with BundleVerifier(policy, workers=workers, batch_events=batch_events) as verifier:
        for number, line in enumerate(lines, start=1):
            if isinstance(line, OverlongLine) or line.strip():
                verifier.feed(number, line)
            if progress is not None:
                progress(number)
        return verifier.finish()
