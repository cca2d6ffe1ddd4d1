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
- ``heads``          the log key's signed heads are for the bundle's checkpoint;
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
event line is put in a *batch* of consecutive event lines; a batch is closed before any other
line is handled, and shipped (to a worker process, or verified here when ``workers`` is 1 or
the bundle is small) with a snapshot of the state its lines are checked against: the
checkpoint's size and root, the trust root, and the states of the keys its envelopes name.
Key validity is by log position, so the snapshot's later changes could not matter anyway.
Batch results (pass counts, findings, and per event its leaf, aggregate, version and signer
for the order and completeness checks, and what the run tracker folds) are merged in dispatch
order, with a bounded number of batches in flight, so the counts equal those of verifying
every line in turn; only the order of findings may differ.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from domain.canonical import canonical_b64decode
from domain.errors import DomainError
from domain.statements import PredicateType
from ledger.authority import KeyBook, KeyLookup, KeyState
from ledger.event_verification import (
    EVENT_PREDICATES,
    EventVerification,
    learn_key,
    verify_event,
)
from ledger.proofs.heads import Heads, HeadsError, open_heads
from ledger.proofs.log_entries import LogEntry
from ledger.proofs.merkle import (
    HASH_SIZE,
    ProofError,
    leaf_hash,
    node_hash,
    verify_consistency,
    verify_inclusion,
)
from ledger.proofs.signed_note import Checkpoint, NoteError, Verifier, open_checkpoint
from ledger.signing.dsse import named_keyid
from ledger.signing.trust import TrustRoot, TrustRootError
from ledger.verification_report import MAX_FINDINGS, Check, Report
from ledger.verify.completeness import Completeness
from ledger.verify.format import BUNDLE_FORMAT
from ledger.verify.policy import VerificationPolicy
from ledger.verify.runs import RunTracker

# (event, position, signer, run digest, predicate): what the run tracker folds of an event.
Observation = tuple[str, int, str, str, dict[str, Any]]
# (leaf index, position, aggregate, version, verified signer or None) of each readable event.
Seen = tuple[int, int, str, int, str | None]

# A batch closes at this many event lines or this many characters, whichever comes first.
BATCH_EVENTS = 256
BATCH_CHARS = 1 << 20
# Batches in flight per worker: enough to keep workers busy, few enough to keep memory flat.
IN_FLIGHT_PER_WORKER = 2


# --------------------------------------------------------------------------------------------
# One event: parse, inclusion, re-verification. Runs here and in worker processes alike.


def _decode_proof(value: object) -> list[bytes]:
    if not isinstance(value, list):
        raise ValueError("proof must be a list")
    return [canonical_b64decode(h, "proof hash") for h in value]


@dataclass(frozen=True)
class _ParsedEvent:
    leaf_index: int
    entry: LogEntry
    proof: list[bytes]
    aggregate: UUID

    @property
    def where(self) -> str:
        return f"leaf {self.leaf_index} (position {self.entry.position})"


def _parse_event(where: str, record: dict[str, Any], report: Report) -> _ParsedEvent | None:
    try:
        leaf_index = int(record["leafIndex"])
        entry = LogEntry(
            position=int(record["position"]),
            aggregate=str(record["aggregate"]),
            version=int(record["version"]),
            topic=str(record["topic"]),
            envelope=record["envelope"],
            received_at=str(record["receivedAt"]),
        )
        proof = _decode_proof(record.get("proof"))
        aggregate = UUID(entry.aggregate)
    except (KeyError, TypeError, ValueError) as exc:
        report.fail(Check.FORMAT, where, f"malformed event line: {exc}")
        return None
    return _ParsedEvent(leaf_index, entry, proof, aggregate)


_MAX_SAFE_INTEGER = 2**53 - 1


def _plain_json(value: object) -> bool:
    """True when the JCS of ``value`` is exactly ``json.dumps(sort_keys=True)`` of it: only
    ASCII object keys (so code-point and UTF-16 key orders agree), strings, safe integers,
    booleans and null. Floats and anything else go to the full canonicaliser."""
    if isinstance(value, str) or value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        return -_MAX_SAFE_INTEGER <= value <= _MAX_SAFE_INTEGER
    if isinstance(value, dict):
        return all(isinstance(k, str) and k.isascii() and _plain_json(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain_json(v) for v in value)
    return False


def _entry_leaf_hash(entry: LogEntry) -> bytes:
    """``entry.leaf_hash()``, without the pure-Python JCS encoder when the value is plain.

    For plain values (see :func:`_plain_json`) the standard library's sorted, compact,
    non-ASCII-escaping encoder writes the JCS bytes: it escapes exactly ``"``, ``\\`` and the
    controls below U+0020 (``\\b \\t \\n \\f \\r`` short, the rest ``\\u00xx``), as JCS does.
    Anything else, or a string that is not valid Unicode, takes ``entry.leaf_hash()`` and so
    fails or succeeds exactly as it would.
    """
    ints_safe = all(
        -_MAX_SAFE_INTEGER <= n <= _MAX_SAFE_INTEGER for n in (entry.position, entry.version)
    )
    try:
        if ints_safe and _plain_json(entry.envelope):
            data = json.dumps(
                {
                    "position": entry.position,
                    "aggregate": entry.aggregate,
                    "version": entry.version,
                    "topic": entry.topic,
                    "envelope": entry.envelope,
                    "receivedAt": entry.received_at,
                },
                sort_keys=True,
                separators=(",", ":"),
                ensure_ascii=False,
            ).encode("utf-8")
            return leaf_hash(data)
    except (UnicodeEncodeError, RecursionError):
        pass
    return entry.leaf_hash()


class _InclusionChecker:
    """``verify_inclusion`` that reuses the paths of proofs it has already accepted.

    The RFC 9162 verification loop's state between two proof hashes is ``(fn, sn)`` and the
    running hash ``r``; what follows depends on nothing else but the proof hashes left. So
    when a proof reaches a state an accepted proof passed through, with the same running hash
    and the same remaining hashes, it is accepted too: the full loop would end at the same
    root. Leaves verified in order share most of their paths, so most proofs cost a hash or
    two. Anything else (including every failure) is decided by ``verify_inclusion`` itself,
    so results and error messages are exactly its own.
    """

    MAX_STATES = 4096  # flat memory: forget everything past this many states

    def __init__(self) -> None:
        self.tree: tuple[int, bytes] | None = None
        self.states: dict[tuple[int, int], tuple[bytes, list[bytes], int]] = {}

    def verify(self, leaf: bytes, index: int, size: int, proof: list[bytes], root: bytes) -> None:
        if (size, root) != self.tree or len(self.states) > self.MAX_STATES:
            self.tree = (size, root)
            self.states = {}
        inner = (index ^ (size - 1)).bit_length() if size > 0 else 0
        if (
            len(leaf) != HASH_SIZE
            or len(root) != HASH_SIZE
            or not 0 <= index < size
            or len(proof) != inner + (index >> inner).bit_count()
            or any(len(p) != HASH_SIZE for p in proof)
        ):
            verify_inclusion(leaf, index, size, proof, root)  # raises with the reason
            return
        fn, sn, r = index, size - 1, leaf
        passed: list[tuple[tuple[int, int], bytes, int]] = []
        for k, p in enumerate(proof):
            if fn & 1 or fn == sn:
                r = node_hash(p, r)
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
            else:
                r = node_hash(r, p)
            fn >>= 1
            sn >>= 1
            seen = self.states.get((fn, sn))
            if seen is not None and seen[0] == r and seen[1][seen[2] :] == proof[k + 1 :]:
                self._remember(passed, proof)
                return
            passed.append(((fn, sn), r, k + 1))
        if sn != 0 or r != root:
            verify_inclusion(leaf, index, size, proof, root)  # raises with the reason
            return
        self._remember(passed, proof)

    def _remember(
        self, passed: list[tuple[tuple[int, int], bytes, int]], proof: list[bytes]
    ) -> None:
        for state, r, rest in passed:
            self.states[state] = (r, proof, rest)


_INCLUSION = _InclusionChecker()  # one per process


@dataclass(frozen=True)
class _Context:
    """What event lines are checked against, as it stood when their batch was closed."""

    tree: tuple[int, bytes] | None  # the verified checkpoint's (size, root)
    trust_root: TrustRoot | None
    keys: dict[str, KeyState] = field(default_factory=dict)
    observe: bool = False  # collect observations of run events for the run tracker
    keep: frozenset[str] = frozenset()  # aggregates whose events' verifications are kept


def _check_event(
    event: _ParsedEvent, context: _Context, keys: KeyLookup, report: Report
) -> tuple[EventVerification | None, bool]:
    """Inclusion and re-verification of one parsed event (not ``order``: that is sequential).
    Returns the verification, and whether the event is in the checkpoint's tree."""
    where = event.where
    included = False
    if context.tree is None:
        report.fail(Check.INCLUSION, where, "no verified checkpoint to prove inclusion against")
    else:
        size, root = context.tree
        try:
            leaf = _entry_leaf_hash(event.entry)
            _INCLUSION.verify(leaf, event.leaf_index, size, event.proof, root)
        except (ProofError, DomainError) as exc:
            report.fail(Check.INCLUSION, where, f"not in the checkpoint's tree: {exc}")
        else:
            report.ok(Check.INCLUSION)
            included = True
    if context.trust_root is None:
        return None, included
    entry = event.entry
    result = verify_event(
        position=entry.position,
        version=entry.version,
        event=entry.topic.rsplit(":", 1)[-1],
        aggregate_id=event.aggregate,
        envelope_json=entry.envelope,
        received_at=entry.received_at,
        keys=keys,
        trust_root=context.trust_root,
    )
    result.report_to(report, where)
    return result, included


def _observation(result: EventVerification | None, included: bool) -> Observation | None:
    """What the run tracker is told of a run event whose checks all held."""
    if result is None or not (included and result.ok) or not result.event.startswith("Run."):
        return None
    assert result.signer is not None and result.subject_digest is not None
    return (
        result.event,
        result.position,
        result.signer,
        result.subject_digest,
        result.predicate or {},
    )


def _with_inclusion(result: EventVerification, included: bool) -> EventVerification:
    """The event's verification, with whether it is in the checkpoint's tree."""
    result.check(Check.INCLUSION, included, "" if included else "not in the checkpoint's tree")
    return result


def _seen(event: _ParsedEvent, result: EventVerification | None) -> Seen:
    signer = result.signer if result is not None and result.ok else None
    return (
        event.leaf_index,
        event.entry.position,
        event.entry.aggregate,
        event.entry.version,
        signer,
    )


# --------------------------------------------------------------------------------------------
# Batches of event lines


@dataclass
class _Batch:
    context: _Context
    # (line number, text) of event lines, none of them key events; verified in this process,
    # the parsed line instead of its text.
    lines: list[tuple[int, str | dict[str, Any]]]


@dataclass
class _BatchResult:
    """Counts and findings of a batch, and what must be applied in order when merging."""

    report: Report
    seen: list[tuple[str, Seen]]  # (where, what) of each readable event, in order
    observations: list[Observation] = field(default_factory=list)
    kept: list[tuple[int, EventVerification]] = field(default_factory=list)


def _verify_into(
    out: _BatchResult, event: _ParsedEvent, context: _Context, keys: KeyLookup
) -> tuple[EventVerification | None, bool]:
    """Verify one parsed event and add what the merge needs of it to ``out``."""
    result, included = _check_event(event, context, keys, out.report)
    out.seen.append((event.where, _seen(event, result)))
    if context.observe and (observed := _observation(result, included)) is not None:
        out.observations.append(observed)
    if result is not None and event.entry.aggregate in context.keep:
        out.kept.append((event.leaf_index, _with_inclusion(result, included)))
    return result, included


def _verify_batch(batch: _Batch) -> _BatchResult:
    """Verify a batch (in a worker process, or here). Never raises for bad data."""
    out = _BatchResult(Report(subject="batch"), [])
    lookup = batch.context.keys.get
    for number, line in batch.lines:
        record = json.loads(line) if isinstance(line, str) else line
        event = _parse_event(f"line {number}", record, out.report)
        if event is not None:
            # Only key events teach keys, and they never come here: a non-Principal event
            # that carries a key statement fails its event-type check, teaching nothing.
            _verify_into(out, event, batch.context, lookup)
    return out


def _is_key_event(record: dict[str, Any]) -> bool:
    name = str(record.get("topic")).rsplit(":", 1)[-1]
    return EVENT_PREDICATES.get(name) is PredicateType.KEY


def default_workers() -> int:
    return os.cpu_count() or 1


def _pool_context() -> multiprocessing.context.BaseContext:
    """Fork when this process has no other thread (fast start); else a fork server."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__])
        return context
    return multiprocessing.get_context("spawn")


# --------------------------------------------------------------------------------------------
# The verifier


# The order lines must come in; a line of an earlier stage after a later one is refused.
_STAGES = {
    "header": 0,
    "trustRoot": 1,
    "checkpoint": 2,
    "consistency": 3,
    "heads": 4,
    "claim": 5,
    "event": 6,
    "artifact": 7,
    "footer": 8,
}


class BundleVerifier:
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
        self.runs = RunTracker()
        self.complete = Completeness()
        self.consistency: dict[int, list[bytes]] = {}
        self.scope: dict[str, Any] | None = None
        self.last_leaf = -1
        self.events = 0
        self.stage = 0  # how far through the line order the bundle is (see _STAGES)
        self.footer_seen = False
        self.header_seen = False
        self.trust_root_seen = False
        self.workers = max(1, workers if workers is not None else default_workers())
        self.batch_events = max(1, batch_events)
        self._pool: ProcessPoolExecutor | None = None
        self._lines: list[tuple[int, str | dict[str, Any]]] = []
        self._chars = 0
        self._hints: set[str] = set()
        # Results not merged yet, in dispatch order: a shipped batch, or an event verified
        # here while batches shipped before it were still out.
        self._queue: deque[Future[_BatchResult] | _BatchResult] = deque()
        self._in_flight = 0

    def __enter__(self) -> BundleVerifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    @property
    def observing(self) -> bool:
        """Runs are folded for scoped bundles (bounded), claims and the caller's expectation."""
        return (
            self.complete.heads is not None
            or bool(self.runs.claims)
            or self.policy.expect is not None
        )

    # ----------------------------------------------------------------- lines

    def feed(self, number: int, line: str) -> None:
        where = f"line {number}"
        if self.footer_seen:
            self.report.fail(Check.FORMAT, where, "content after the footer")
            return
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: nested too deeply to read
            self.report.fail(Check.FORMAT, where, "not a JSON object")
            return
        kind = record.get("type") if isinstance(record, dict) else None
        if kind == "event" and self.stage == _STAGES["event"] and not _is_key_event(record):
            self._add_to_batch(number, line, record)
            return
        self._close_batch()
        handler = {
            "header": self._header,
            "trustRoot": self._trust_root,
            "checkpoint": self._checkpoint,
            "consistency": self._consistency,
            "heads": self._heads,
            "event": self._event,
            "claim": self._claim,
            "artifact": self._artifact,
            "footer": self._footer,
        }.get(str(kind))
        if handler is None:
            self.report.fail(Check.FORMAT, where, f"unknown line type {kind!r}")
            return
        stage = _STAGES[str(kind)]
        if stage < self.stage:
            self.report.fail(
                Check.FORMAT, where, f"a {kind} line after the bundle's {self._stage_name()} lines"
            )
            return
        if kind != "header" and not self.header_seen:
            self.report.fail(Check.FORMAT, where, "bundle does not start with a header")
        self.stage = stage
        handler(where, record)

    def _stage_name(self) -> str:
        return next(k for k, v in _STAGES.items() if v == self.stage)

    def finish(self) -> Report:
        self._close_batch()
        self._drain()
        report = self.report
        if not self.footer_seen:
            report.fail(Check.FORMAT, "end", "no footer: the bundle is truncated")
        if not self.trust_root_seen:
            report.fail(Check.FORMAT, "end", "the bundle has no trust root line")
        if self.checkpoint is None:
            report.fail(Check.CHECKPOINT, "end", "the bundle has no checkpoint")
        else:
            self._held_checkpoints()
        # The header is unsigned: only a whole-log bundle (every leaf) goes without heads.
        self.complete.finish(report)
        heads = self.complete.heads
        if heads is not None:
            self._check_scope(heads)
        try:
            self.runs.check_groups(report, heads)
            self.runs.check_claims(report, heads)
            if self.policy.expect is not None:
                self.runs.check_expectation(report, self.policy.expect, heads)
        except (DomainError, TypeError, ValueError, KeyError, ArithmeticError) as exc:
            # Events that passed every check still could not be folded: never a crash,
            # never a verdict on what could not be recomputed.
            report.fail(Check.CLAIM, "end", f"the runs cannot be recomputed: {exc}")
        report.facts.update(
            {"events": self.events, "keys": len(self.keys)}
            | ({"treeSize": self.checkpoint.size} if self.checkpoint else {})
        )
        return report

    # --------------------------------------------------------------- batches

    def _context(self, key_ids: Iterable[str]) -> _Context:
        tree = (self.checkpoint.size, self.checkpoint.root) if self.checkpoint else None
        return _Context(
            tree, self.trust_root, self.keys.snapshot(key_ids), self.observing, self.keep
        )

    def _add_to_batch(self, number: int, line: str, record: dict[str, Any]) -> None:
        self.events += 1
        self._lines.append((number, line if self.workers > 1 else record))
        self._chars += len(line)
        if (hint := named_keyid(record.get("envelope"))) is not None:
            self._hints.add(hint)
        if len(self._lines) >= self.batch_events or self._chars >= BATCH_CHARS:
            self._close_batch(full=True)

    def _close_batch(self, *, full: bool = False) -> None:
        """Ship the open batch with the state its lines are checked against (the current)."""
        if not self._lines:
            return
        batch = _Batch(self._context(self._hints), self._lines)
        self._lines, self._chars, self._hints = [], 0, set()
        if self._pool is None and full and self.workers > 1:
            # More than one batch of events: worth starting the worker processes.
            self._pool = ProcessPoolExecutor(self.workers, mp_context=_pool_context())
        if self._pool is None:
            # Nothing was ever shipped, so nothing is queued ahead of this batch.
            self._merge(_verify_batch(batch))
            return
        while self._in_flight >= self.workers * IN_FLIGHT_PER_WORKER:
            self._merge_next(block=True)
        self._queue.append(self._pool.submit(_verify_batch, batch))
        self._in_flight += 1
        while self._queue and self._merge_next(block=False):
            pass

    def _merge_in_turn(self, result: _BatchResult) -> None:
        """Merge a result verified here, after those of the batches shipped before it."""
        if self._queue:
            self._queue.append(result)
        else:
            self._merge(result)

    def _merge_next(self, *, block: bool) -> bool:
        head = self._queue[0]
        if isinstance(head, Future):
            if not block and not head.done():
                return False
            result = head.result()
            self._queue.popleft()
            self._in_flight -= 1
            self._merge(result)
        else:
            self._queue.popleft()
            self._merge(head)
        return True

    def _drain(self) -> None:
        while self._queue:
            self._merge_next(block=True)

    def _merge(self, item: _BatchResult) -> None:
        part = item.report
        self.report.passed.update(part.passed)
        self.report.failed.update(part.failed)
        room = MAX_FINDINGS - len(self.report.findings)
        self.report.findings.extend(part.findings[: max(room, 0)])
        for where, (leaf, position, aggregate, version, signer) in item.seen:
            self._order(leaf, position)
            self.complete.seen(
                self.report,
                leaf=leaf,
                aggregate=aggregate,
                version=version,
                signer=signer,
                where=where,
            )
        self.kept.extend(item.kept)
        for observation in item.observations:
            try:
                self.runs.observe(*observation)
            except (DomainError, TypeError, ValueError, KeyError, ArithmeticError) as exc:
                # e.g. a run ingested twice: the completeness check has failed it already;
                # the runs cannot be recomputed from such a bundle, and say so.
                why = (
                    exc.message if isinstance(exc, DomainError) else f"{type(exc).__name__}: {exc}"
                )
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

    # --------------------------------------------------------------- handlers

    def _header(self, where: str, record: dict[str, Any]) -> None:
        if self.header_seen:
            self.report.fail(Check.FORMAT, where, "second header")
            return
        self.header_seen = True
        if record.get("format") != BUNDLE_FORMAT:
            self.report.fail(
                Check.FORMAT, where, f"format is {record.get('format')!r}, not {BUNDLE_FORMAT}"
            )
        else:
            self.report.ok(Check.FORMAT)
        scope = record.get("scope")
        self.scope = scope if isinstance(scope, dict) else {}
        self.complete.whole_log = self.scope.get("all") is True
        self.report.facts["scope"] = scope

    def _trust_root(self, where: str, record: dict[str, Any]) -> None:
        try:
            bundled = TrustRoot.from_json(record.get("trustRoot"))
        except TrustRootError as exc:
            self.report.fail(Check.TRUST_ROOT, where, exc.message)
            return
        if self.trust_root_seen:
            # A second root could switch the keys that check the rest of the bundle.
            self.report.fail(Check.FORMAT, where, "second trust root")
            return
        self.trust_root_seen = True
        pinned = self.policy.trust_root
        if pinned is None:
            self.trust_root = bundled
            if self.policy.allow_unanchored:
                self.report.notes.append(
                    "UNSAFE: trusting the trust root inside the bundle, as asked; the bundle "
                    "vouches only for itself"
                )
                self.report.ok(Check.ANCHOR)
            else:
                self.report.fail(
                    Check.ANCHOR,
                    where,
                    "no trust root pinned: a bundle made on any ledger with this origin would "
                    "pass; pin the ledger's trust root (--trust-root)",
                )
        elif bundled.to_json() != pinned.to_json():
            self.report.fail(
                Check.TRUST_ROOT, where, "the bundle's trust root is not the one you pinned"
            )
        else:
            self.report.ok(Check.ANCHOR)
            self.report.ok(Check.TRUST_ROOT)

    def _checkpoint(self, where: str, record: dict[str, Any]) -> None:
        if self.trust_root is None:
            self.report.fail(
                Check.CHECKPOINT, where, "no trust root to check the checkpoint against"
            )
            return
        if self.checkpoint is not None:
            self.report.fail(Check.FORMAT, where, "second checkpoint")
            return
        root = self.trust_root
        verifier = Verifier.from_public_key(root.origin, root.log_key.raw)
        try:
            checkpoint, _ = open_checkpoint(
                str(record.get("note", "")), [verifier], origin=root.origin
            )
        except NoteError as exc:
            self.report.fail(Check.CHECKPOINT, where, f"checkpoint does not verify: {exc}")
            return
        self.checkpoint = checkpoint
        self.checkpoint_note = str(record.get("note"))
        self.verifier = verifier
        self.complete.size = checkpoint.size
        self.report.ok(Check.CHECKPOINT)

    def _consistency(self, where: str, record: dict[str, Any]) -> None:
        try:
            older = record["from"]
            if not isinstance(older, int) or isinstance(older, bool) or older < 0:
                raise ValueError("from must be a tree size")
            proof = _decode_proof(record.get("proof"))
        except (KeyError, ValueError) as exc:
            self.report.fail(Check.FORMAT, where, f"malformed consistency line: {exc}")
            return
        self.consistency[older] = proof

    def _heads(self, where: str, record: dict[str, Any]) -> None:
        if self.verifier is None or self.checkpoint is None:
            self.report.fail(Check.HEADS, where, "no verified checkpoint to bind the heads to")
            return
        if self.complete.heads is not None:
            self.report.fail(Check.FORMAT, where, "second heads line")
            return
        try:
            heads = open_heads(str(record.get("note", "")), self.verifier)
        except HeadsError as exc:
            self.report.fail(Check.HEADS, where, exc.message)
            return
        if (heads.size, heads.root) != (self.checkpoint.size, self.checkpoint.root):
            self.report.fail(
                Check.HEADS,
                where,
                f"the heads are for a tree of {heads.size} leaves with another root, not the "
                f"bundle's checkpoint of {self.checkpoint.size}",
            )
            return
        self.report.ok(Check.HEADS)
        self.complete.scoped(heads)

    def _check_scope(self, heads: Heads) -> None:
        """The runs the (unsigned) header says the bundle is about are ones its heads cover."""
        named = (self.scope or {}).get("runs")
        if not isinstance(named, list) or not all(isinstance(r, str) for r in named):
            self.report.fail(Check.FORMAT, "header", "a scoped bundle's header lists its runs")
            return
        uncovered = sorted(set(named) - set(heads.runs))
        if uncovered:
            self.report.fail(
                Check.COMPLETE,
                "header",
                f"the header names run {uncovered[0]}, which the heads do not cover",
            )

    def _held_checkpoints(self) -> None:
        """The checkpoints the caller holds: one root per size, each older one extended by
        the bundle's (a consistency proof the bundle carries), none newer (else STALE)."""
        assert self.checkpoint is not None and self.verifier is not None
        mine = self.checkpoint
        for note in self.policy.held_checkpoints:
            try:
                held, _ = open_checkpoint(note, [self.verifier], origin=mine.origin)
            except NoteError as exc:
                self.report.fail(Check.CHECKPOINT, "held checkpoint", f"does not verify: {exc}")
                continue
            where = f"held checkpoint of {held.size} leaves"
            if held.size == mine.size:
                if held.root != mine.root:
                    self.report.fail(
                        Check.CHECKPOINT,
                        where,
                        f"two different roots signed for tree size {held.size}: the log "
                        "equivocated",
                    )
                else:
                    self.report.ok(Check.CHECKPOINT)
                    self.report.ok(Check.FRESHNESS)
            elif held.size > mine.size:
                self.report.fail(
                    Check.FRESHNESS,
                    where,
                    f"you hold a checkpoint of {held.size} leaves; the bundle proves the log "
                    f"only up to {mine.size}: what it says may have changed since (export "
                    "it again, with --checkpoint)",
                )
            elif (proof := self.consistency.get(held.size)) is None:
                self.report.fail(
                    Check.CONSISTENCY,
                    where,
                    "the bundle carries no proof that its log extends the checkpoint you hold "
                    "(export it with --checkpoint)",
                )
            else:
                try:
                    verify_consistency(held.size, mine.size, proof, held.root, mine.root)
                except ProofError as exc:
                    self.report.fail(
                        Check.CONSISTENCY,
                        where,
                        f"the bundle's checkpoint does not extend the one you hold (a fork): {exc}",
                    )
                else:
                    self.report.ok(Check.CONSISTENCY)
                    self.report.ok(Check.FRESHNESS)

    def _event(self, where: str, record: dict[str, Any]) -> None:
        """A key event (or any event line out of its place), verified here, in leaf order."""
        self.events += 1
        event = _parse_event(where, record, self.report)
        if event is None:
            return
        out = _BatchResult(self.report, [])  # counted here at once; the rest merged in turn
        result, included = _verify_into(out, event, self._context(()), self.keys)
        self._merge_in_turn(
            _BatchResult(Report(subject="event"), out.seen, out.observations, out.kept)
        )
        if result is not None and included:
            learn_key(self.keys, result)

    def _claim(self, where: str, record: dict[str, Any]) -> None:
        try:
            self.runs.expect(record)
        except DomainError as exc:  # e.g. ClaimFormatError: a malformed claim line
            self.report.fail(Check.CLAIM, where, exc.message)

    def _artifact(self, where: str, record: dict[str, Any]) -> None:
        """A referenced artifact travels with its bytes: they must hash to its digest."""
        digest = str(record.get("digest"))
        try:
            content = canonical_b64decode(record.get("content", ""), "artifact content")
        except ValueError:
            self.report.fail(Check.ARTIFACT, where, f"artifact {digest} content is not base64")
            return
        if "sha256:" + hashlib.sha256(content).hexdigest() != digest:
            self.report.fail(
                Check.ARTIFACT, where, f"artifact {digest}: content hashes differently"
            )
        else:
            self.report.ok(Check.ARTIFACT)

    def _footer(self, where: str, record: dict[str, Any]) -> None:
        self.footer_seen = True
        if record.get("events") != self.events:
            self.report.fail(
                Check.FORMAT,
                where,
                f"footer says {record.get('events')} events, the bundle has {self.events}",
            )
        else:
            self.report.ok(Check.FORMAT)


def verify_bundle_lines(
    lines: Iterable[str],
    policy: VerificationPolicy | None = None,
    *,
    progress: Callable[[int], None] | None = None,
    workers: int | None = None,
    batch_events: int = BATCH_EVENTS,
) -> Report:
    """Verify a bundle's lines against ``policy`` (default: nothing pinned, so UNANCHORED).
    ``workers``: processes to verify event lines in (default one per CPU core; 1 verifies in
    this process, as do bundles of at most one batch). ``outcome_of(report)`` is the verdict."""
    with BundleVerifier(policy, workers=workers, batch_events=batch_events) as verifier:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                verifier.feed(number, line)
            if progress is not None:
                progress(number)
        return verifier.finish()
