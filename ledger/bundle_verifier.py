"""Offline verification of a bundle: no network, no database, one pass, flat memory.

Checks, each named in the report:

- ``format``          header, line types and order, footer count (truncation);
- ``trust-root``      the bundle's trust root is the one the verifier pins (if it pins one);
- ``checkpoint``      the checkpoint is signed by the trust root's log key for its origin,
                      and agrees with any other checkpoint the verifier holds (no fork);
- ``inclusion``       every event's leaf, recomputed from its contents, is in the checkpoint's
                      tree at its leaf index;
- ``signature``, ``key-valid``, ``role``, ``subject``, ``event-type``, ``envelope``,
  ``manifests``       each event re-verified exactly as ``history`` does, against keys whose
                      registration events chain to the trust root (keys are learned in leaf
                      order, so a key must be registered before it signs);
- ``order``           leaf indices strictly increase;
- ``claim``           every claimed state is recomputed from the events (when claims exist).

Memory holds the key registry and per-run facts, never the events.

Parallelism (DESIGN.md §13). This process reads the lines and itself handles everything that
changes what later lines are checked against: header, trust root, checkpoint, claims, footer
and key events (``Principal.*``, which update the key book in leaf order). Every other event
line is put in a *batch* of consecutive event lines; a batch is closed before any other line
is handled, so the state its lines must be checked against is the same for all of them, and
it is shipped (to a worker process, or verified here when ``workers`` is 1 or the bundle is
small) with a snapshot of that state: the checkpoint's size and root, the trust root, and the
key records its envelopes' ``keyid`` hints name, as the key book holds them at that moment. A
key revoked later in the bundle therefore never affects events before its revocation. Batch
results (pass counts, findings, and the leaf indices for the ``order`` check) are merged in
dispatch order, with a bounded number of batches in flight, so memory stays flat and the
counts equal those of verifying every line in turn; only the order of findings may differ.
What a claim observer is told of the events is merged the same way, so it sees them in leaf
order too.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import multiprocessing
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol
from uuid import UUID

from domain.errors import DomainError
from domain.statements import PredicateType
from ledger.authority import KeyBook, KeyLookup, KeyState
from ledger.bundle import BUNDLE_FORMAT
from ledger.event_verification import (
    EVENT_PREDICATES,
    EventVerification,
    learn_key,
    verify_event,
)
from ledger.log_entries import LogEntry
from ledger.merkle import (
    HASH_SIZE,
    ProofError,
    leaf_hash,
    node_hash,
    verify_inclusion,
)
from ledger.signed_note import Checkpoint, NoteError, Verifier, open_checkpoint
from ledger.trust import TrustRoot, TrustRootError
from ledger.verification_report import MAX_FINDINGS, Check, Report

ClaimChecker = Callable[[dict[str, Any], Report], None]


class ClaimObserver(Protocol):
    """What recomputes a bundle's claims (e.g. ``ledger.claims.ClaimTracker``): it is given
    each claim line, then, once a claim has been given, every run event whose checks all held
    (inclusion included), in leaf order, and asked to check the claims at the end."""

    def expect(self, claim: Mapping[str, Any]) -> None: ...

    def observe(
        self, event: str, position: int, signer: str, run_digest: str, predicate: Mapping[str, Any]
    ) -> None: ...

    def check(self, report: Report) -> None: ...


# (event, position, signer, run digest, predicate): what a ClaimObserver is told of an event.
Observation = tuple[str, int, str, str, dict[str, Any]]

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
    return [base64.b64decode(str(h), validate=True) for h in value]


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
    except (KeyError, TypeError, ValueError, binascii.Error) as exc:
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
    observe: bool = False  # collect observations of run events for the claims


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
    for check in result.checks:
        if check.ok:
            report.ok(check.name)
        else:
            report.fail(check.name, where, check.detail)
    return result, included


def _observation(result: EventVerification | None, included: bool) -> Observation | None:
    """What a claim observer is told of a run event whose checks all held."""
    if result is None or not (included and result.ok) or not result.event.startswith("Run."):
        return None
    assert result.envelope is not None and result.signer is not None
    # verify_event parsed this statement already; its subject digest is not in the result.
    statement = json.loads(base64.b64decode(result.envelope["payload"]))
    run_digest = "sha256:" + str(statement["subject"][0]["digest"]["sha256"])
    return (result.event, result.position, result.signer, run_digest, result.predicate or {})


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
    leaves: list[tuple[int, int]]  # (leaf index, position) of each readable event, in order
    observations: list[Observation] = field(default_factory=list)


def _verify_batch(batch: _Batch) -> _BatchResult:
    """Verify a batch (in a worker process, or here). Never raises for bad data."""
    report = Report(subject="batch")
    leaves: list[tuple[int, int]] = []
    observations: list[Observation] = []
    lookup = batch.context.keys.get
    for number, line in batch.lines:
        record = json.loads(line) if isinstance(line, str) else line
        event = _parse_event(f"line {number}", record, report)
        if event is None:
            continue
        leaves.append((event.leaf_index, event.entry.position))
        # Only key events teach keys, and they never come here: a non-Principal event that
        # carries a key statement fails its event-type check, so it would teach nothing.
        result, included = _check_event(event, batch.context, lookup, report)
        if batch.context.observe and (seen := _observation(result, included)) is not None:
            observations.append(seen)
    return _BatchResult(report, leaves, observations)


def _key_hints(record: dict[str, Any]) -> list[str]:
    """The key ids an event line's envelope names: the only keys verify_event looks up."""
    envelope = record.get("envelope")
    signatures = envelope.get("signatures") if isinstance(envelope, dict) else None
    if not isinstance(signatures, list):
        return []
    return [
        s["keyid"] for s in signatures if isinstance(s, dict) and isinstance(s.get("keyid"), str)
    ]


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


class BundleVerifier:
    """Feed it a bundle's lines in order, then ``finish()``; call ``close()`` (or use it as a
    context manager) to stop its worker processes. ``workers=1`` verifies in this process."""

    def __init__(
        self,
        *,
        pinned_root: TrustRoot | None = None,
        known_checkpoints: Iterable[str] = (),
        claim_checker: ClaimChecker | None = None,
        claims: ClaimObserver | None = None,
        workers: int | None = None,
        batch_events: int = BATCH_EVENTS,
    ) -> None:
        self.pinned_root = pinned_root
        self.known_checkpoints = list(known_checkpoints)
        self.claim_checker = claim_checker
        self.claims = claims
        self.claims_seen = False
        self.report = Report(subject="bundle")
        self.trust_root: TrustRoot | None = pinned_root
        self.checkpoint: Checkpoint | None = None
        self.keys = KeyBook()
        self.last_leaf = -1
        self.events = 0
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
        if kind == "event" and self.header_seen and not _is_key_event(record):
            self._add_to_batch(number, line, record)
            return
        self._close_batch()
        handler = {
            "header": self._header,
            "trustRoot": self._trust_root,
            "checkpoint": self._checkpoint,
            "event": self._event,
            "claim": self._claim,
            "artifact": self._artifact,
            "footer": self._footer,
        }.get(str(kind))
        if handler is None:
            self.report.fail(Check.FORMAT, where, f"unknown line type {kind!r}")
            return
        if kind != "header" and not self.header_seen:
            self.report.fail(Check.FORMAT, where, "bundle does not start with a header")
        handler(where, record)

    def finish(self) -> Report:
        self._close_batch()
        self._drain()
        if self.claims is not None and self.claims_seen:
            self.claims.check(self.report)
        if not self.footer_seen:
            self.report.fail(Check.FORMAT, "end", "no footer: the bundle is truncated")
        if self.checkpoint is None:
            self.report.fail(Check.CHECKPOINT, "end", "the bundle has no checkpoint")
        self.report.facts.update(
            {"events": self.events, "keys": len(self.keys)}
            | ({"treeSize": self.checkpoint.size} if self.checkpoint else {})
        )
        return self.report

    # --------------------------------------------------------------- batches

    def _context(self, key_ids: Iterable[str]) -> _Context:
        tree = (self.checkpoint.size, self.checkpoint.root) if self.checkpoint else None
        observe = self.claims is not None and self.claims_seen
        return _Context(tree, self.trust_root, self.keys.snapshot(key_ids), observe)

    def _add_to_batch(self, number: int, line: str, record: dict[str, Any]) -> None:
        self.events += 1
        self._lines.append((number, line if self.workers > 1 else record))
        self._chars += len(line)
        self._hints.update(_key_hints(record))
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
        for leaf_index, position in item.leaves:
            self._order(leaf_index, position)
        if self.claims is not None:
            for observation in item.observations:
                try:
                    self.claims.observe(*observation)
                except DomainError as exc:
                    # e.g. an event line repeated: the order check has failed it already;
                    # the claims cannot be recomputed from such a bundle, and say so.
                    self.report.fail(
                        Check.CLAIM, f"event at position {observation[1]}", exc.message
                    )

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
        self.report.facts["scope"] = record.get("scope")

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
        if self.pinned_root is None:
            self.trust_root = bundled
            self.report.notes.append(
                "trusting the trust root inside the bundle; pass --trust-root to pin your own"
            )
            self.report.ok(Check.TRUST_ROOT)
        elif bundled.to_json() != self.pinned_root.to_json():
            self.report.fail(
                Check.TRUST_ROOT, where, "the bundle's trust root is not the one you pinned"
            )
        else:
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
        self.report.ok(Check.CHECKPOINT)
        for other_note in self.known_checkpoints:
            self._compare_checkpoint(other_note, verifier)

    def _compare_checkpoint(self, note: str, verifier: Verifier) -> None:
        """A checkpoint the verifier already holds must be consistent with the bundle's."""
        assert self.checkpoint is not None
        try:
            other, _ = open_checkpoint(note, [verifier], origin=self.checkpoint.origin)
        except NoteError as exc:
            self.report.fail(Check.CHECKPOINT, "given checkpoint", f"does not verify: {exc}")
            return
        if other.size == self.checkpoint.size and other.root != self.checkpoint.root:
            self.report.fail(
                Check.CHECKPOINT,
                "given checkpoint",
                f"two different roots signed for tree size {other.size}: the log equivocated",
            )
        elif other.size != self.checkpoint.size:
            self.report.notes.append(
                f"held checkpoint is for size {other.size}, the bundle's for "
                f"{self.checkpoint.size}: ask the ledger for a consistency proof "
                "(kernelindex log consistency)"
            )
        else:
            self.report.ok(Check.CHECKPOINT)

    def _event(self, where: str, record: dict[str, Any]) -> None:
        """A key event (or any event before the header), verified here, in leaf order."""
        self.events += 1
        event = _parse_event(where, record, self.report)
        if event is None:
            return
        context = self._context(())
        result, included = _check_event(event, context, self.keys, self.report)
        seen = _observation(result, included) if context.observe else None
        self._merge_in_turn(
            _BatchResult(
                Report(subject="event"),
                [(event.leaf_index, event.entry.position)],
                [seen] if seen is not None else [],
            )
        )
        if result is not None and included:
            learn_key(self.keys, result)

    def _claim(self, where: str, record: dict[str, Any]) -> None:
        if self.claims is not None:
            self.claims_seen = True  # from now on, run events are observed for it
            try:
                self.claims.expect(record)
            except DomainError as exc:  # e.g. ClaimFormatError: a malformed claim line
                self.report.fail(Check.CLAIM, where, exc.message)
            return
        self._drain()  # a claim is judged against everything before it
        if self.claim_checker is None:
            self.report.fail(
                Check.CLAIM, where, "the bundle makes a claim this verifier cannot recompute"
            )
            return
        self.claim_checker(record, self.report)

    def _artifact(self, where: str, record: dict[str, Any]) -> None:
        """A referenced artifact travels with its bytes: they must hash to its digest."""
        digest = str(record.get("digest"))
        try:
            content = base64.b64decode(str(record.get("content", "")), validate=True)
        except (binascii.Error, ValueError):
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
    *,
    pinned_root: TrustRoot | None = None,
    known_checkpoints: Iterable[str] = (),
    claim_checker: ClaimChecker | None = None,
    claims: ClaimObserver | None = None,
    progress: Callable[[int], None] | None = None,
    workers: int | None = None,
    batch_events: int = BATCH_EVENTS,
) -> Report:
    """Verify a bundle's lines. ``workers``: processes to verify event lines in (default one
    per CPU core; 1 verifies in this process, as do bundles of at most one batch).
    ``claims``: recomputes the bundle's claims from its events (see ClaimObserver)."""
    with BundleVerifier(
        pinned_root=pinned_root,
        known_checkpoints=known_checkpoints,
        claim_checker=claim_checker,
        claims=claims,
        workers=workers,
        batch_events=batch_events,
    ) as verifier:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                verifier.feed(number, line)
            if progress is not None:
                progress(number)
        return verifier.finish()
