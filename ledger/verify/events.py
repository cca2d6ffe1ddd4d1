"""One event line of a bundle: parsed, proved to be in the checkpoint's tree and re-verified
as admission judged it. Runs in this process and in worker processes alike."""

from __future__ import annotations

from typing import Any, TypeVar, cast
from uuid import UUID

import msgspec

from domain.canonical import canonical_b64decode
from domain.errors import DomainError
from domain.statements import PredicateType
from ledger.authority import KeyLookup, KeyState
from ledger.event_verification import EVENT_PREDICATES, EventVerification, verify_event
from ledger.proofs.errors import ProofError
from ledger.proofs.log_entries import DSSE_SHAPED, LogEntry
from ledger.signing.trust import TrustRoot
from ledger.verification_report import Check, Report
from ledger.verify.format import LineRoute, route_line
from ledger.verify.inclusion import InclusionChecker

__all__ = [
    "NOT_READ",
    "EventContext",
    "Observation",
    "ParsedEvent",
    "Seen",
    "check_event",
    "decode_proof",
    "is_key_event",
    "is_key_topic",
    "observation_of",
    "parse_event",
    "read_worker_event",
    "seen_of",
    "verified",
    "with_inclusion",
    "worker_event",
]

# (event, position, signer, run digest, predicate): what the run tracker folds of an event.
Observation = tuple[str, int, str, str, dict[str, Any]]
# (leaf index, position, aggregate, version, verified signer or None) of each readable event.
Seen = tuple[int, int, str, int, str | None]


def decode_proof(value: object) -> list[bytes]:
    """The hashes of a proof as a bundle spells them: a list of canonical base64 strings.

    Neighbouring leaves' proofs share most of their hashes, so each spelling is decoded once
    per process (a memo of this pure function, cleared when it holds too many)."""
    if not isinstance(value, list):
        raise ValueError("proof must be a list")
    try:
        # Every spelling seen before (a bundle's usual case): one C loop, no per-hash checks.
        # None marks one not seen (or not a string: the memo holds strings alone); an empty
        # hash (b"", refused later by its length) also takes the loop below, to the same end.
        known: list[bytes | None] = list(map(_DECODED.get, value))
    except TypeError:  # an unhashable item: refused below, in the words of each hash's check
        known = [None]
    if all(known):
        return cast("list[bytes]", known)
    hashes = []
    for text in value:
        found = _DECODED.get(text) if type(text) is str else None
        if found is None:
            found = canonical_b64decode(text, "proof hash")
            if len(_DECODED) >= _DECODED_KEPT:
                _DECODED.clear()
            _DECODED[text] = found
        hashes.append(found)
    return hashes


_DECODED: dict[str, bytes] = {}
_DECODED_KEPT = 1 << 16


class ParsedEvent(msgspec.Struct, frozen=True):
    """An event line, read: its leaf, the log entry it commits to and its inclusion proof."""

    leaf_index: int
    entry: LogEntry
    proof: list[bytes]
    aggregate: UUID
    # ``entry.leaf_hash()``, where the line's read proved the envelope's types and it was
    # made then (``read_worker_event``); None: made when the inclusion is checked.
    leaf: bytes | None = None

    @property
    def where(self) -> str:
        return f"leaf {self.leaf_index} (position {self.entry.position})"


def parse_event(where: str, record: dict[str, Any], report: Report) -> ParsedEvent | None:
    """Read an event line; a malformed one fails ``format`` and gives None."""
    try:
        leaf_index = _exactly(int, record, "leafIndex")
        entry = LogEntry(
            _exactly(int, record, "position"),
            _exactly(str, record, "aggregate"),
            _exactly(int, record, "version"),
            _exactly(str, record, "topic"),
            record["envelope"],
            _exactly(str, record, "receivedAt"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        report.fail(Check.FORMAT, where, f"malformed event line: {exc}")
        return None
    return _with_proof(where, leaf_index, entry, record.get("proof"), report)


def _with_proof(
    where: str,
    leaf_index: int,
    entry: LogEntry,
    proof: object,
    report: Report,
    leaf: bytes | None = None,
) -> ParsedEvent | None:
    """The rest of ``parse_event``, once its fields are read: the proof and the aggregate."""
    try:
        hashes = decode_proof(proof)
        aggregate = _aggregate_id(entry.aggregate)
    except (KeyError, TypeError, ValueError) as exc:
        report.fail(Check.FORMAT, where, f"malformed event line: {exc}")
        return None
    return ParsedEvent(leaf_index, entry, hashes, aggregate, leaf)


class _EventLine(msgspec.Struct, forbid_unknown_fields=True):
    """An event line of exactly the fields the exporter writes, of the types ``parse_event``
    requires (msgspec's ``int`` and ``str``: exact, no bool, float or string for an int)."""

    type: str
    leafIndex: int
    position: int
    aggregate: str
    version: int
    topic: str
    receivedAt: str
    # Of ``_dsse_shaped``'s types (every envelope the log writes): its leaf is made without
    # that walk (``LogEntry.shaped_leaf_hash``). An envelope of others: the reference road.
    envelope: DSSE_SHAPED
    proof: Any = None


_EVENT_LINE = msgspec.json.Decoder(_EventLine)
NOT_READ: Any = object()  # ``read_worker_event``: the line is for the reference road


def read_worker_event(where: str, line: str, report: Report) -> ParsedEvent | None:
    """``parse_event(where, read_line(line), report)`` of a worker's line that reads as a
    non-key event line, without the dict (~1.4 µs of ~5): decoded into ``_EventLine``, which
    accepts only lines whose every field ``read_line`` reads to the same value (a repeated
    key's last, as both take it) and ``parse_event`` would accept as read; no other field
    (one skipped unread could hold what ``read_line`` refuses). Else ``NOT_READ``, and the
    caller reads the line as before (property-tested against that road)."""
    try:
        read = _EVENT_LINE.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, UnicodeEncodeError):
        return cast("ParsedEvent | None", NOT_READ)
    if read.type != "event" or is_key_topic(read.topic):
        return cast("ParsedEvent | None", NOT_READ)
    entry = LogEntry(
        read.position, read.aggregate, read.version, read.topic, read.envelope, read.receivedAt
    )
    shaped = entry.shaped_leaf_hash()  # the decoder proved the envelope's types
    return _with_proof(where, read.leafIndex, entry, read.proof, report, shaped)


def _aggregate_id(text: str) -> UUID:
    """``UUID(text)`` of the one spelling the log writes (``str(uuid)``), remembered: a run's
    events are neighbours in a bundle, and parsing a UUID costs more than the lookup (a memo
    of this pure function, cleared when full). ``UUID()`` also reads upper case, braces,
    ``urn:uuid:`` and bare hex, which would pass the filing check (a UUID comparison) while
    the whole-log heads fold keys the aggregate by its text: a run's event so respelled
    would sit under another map key, its real head left one event short."""
    found = _AGGREGATES.get(text)
    if found is None:
        found = UUID(text)
        if str(found) != text:
            raise ValueError(f"aggregate {text!r} is not a UUID in its canonical form")
        if len(_AGGREGATES) >= _AGGREGATES_KEPT:
            _AGGREGATES.clear()
        _AGGREGATES[text] = found
    return found


_AGGREGATES: dict[str, UUID] = {}
_AGGREGATES_KEPT = 1 << 12

_T = TypeVar("_T")


def _exactly(kind: type[_T], record: dict[str, Any], name: str) -> _T:
    """A field of the JSON type the exporter writes, as written: a position of "5" or 5.7
    is not read as 5, so a bundle has one spelling of what it says (the leaf hash covers
    the value read, and would not see the difference)."""
    value = record[name]
    if type(value) is not kind:
        raise TypeError(f"{name} must be a JSON {'integer' if kind is int else 'string'}")
    found: _T = value
    return found


def is_key_event(record: dict[str, Any]) -> bool:
    """Whether an event line is a key event (``Principal.*``), which teaches the key book."""
    return is_key_topic(record.get("topic"))


def is_key_topic(topic: object) -> bool:
    """Whether an event line's topic is a key event's (see :func:`is_key_event`)."""
    name = str(topic).rsplit(":", 1)[-1]
    return EVENT_PREDICATES.get(name) is PredicateType.KEY


def worker_event(line: str) -> LineRoute | None:
    """How an event line that a worker verifies (not a key event) is routed, read without
    the rest of it (``route_line``); None for any other line, or one to read whole here."""
    route = route_line(line)
    if route is None or route.type != "event" or is_key_topic(route.topic):
        return None
    return route


_INCLUSION = InclusionChecker()  # one per process: it reuses the paths it has accepted


class EventContext(msgspec.Struct, frozen=True):
    """What event lines are checked against, as it stood when their batch was closed."""

    tree: tuple[int, bytes] | None  # the verified checkpoint's (size, root)
    trust_root: TrustRoot | None
    keys: dict[str, KeyState] = msgspec.field(default_factory=dict)
    observe: bool = False  # collect observations of run events for the run tracker
    keep: frozenset[str] = frozenset()  # aggregates whose events' verifications are kept


def check_event(
    event: ParsedEvent,
    context: EventContext,
    keys: KeyLookup,
    report: Report,
    where: str | None = None,
) -> tuple[EventVerification | None, bool]:
    """Inclusion and re-verification of one parsed event (not ``order``: that is sequential).
    Returns the verification, and whether the event is in the checkpoint's tree. ``where``:
    ``event.where``, if the caller has made it already (a string formatted per event)."""
    included = _check_inclusion(event, context, report)
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
    result.report_to(report, event.where if where is None else where)
    return result, included


def _check_inclusion(event: ParsedEvent, context: EventContext, report: Report) -> bool:
    """The event's leaf, recomputed from its contents, is in the checkpoint's tree."""
    if context.tree is None:
        report.fail(
            Check.INCLUSION, event.where, "no verified checkpoint to prove inclusion against"
        )
        return False
    size, root = context.tree
    try:
        leaf = event.leaf if event.leaf is not None else event.entry.leaf_hash()
        _INCLUSION.verify(leaf, event.leaf_index, size, event.proof, root)
    except (ProofError, DomainError) as exc:
        report.fail(Check.INCLUSION, event.where, f"not in the checkpoint's tree: {exc}")
        return False
    report.ok(Check.INCLUSION)
    return True


def observation_of(
    result: EventVerification | None, included: bool, ok: bool | None = None
) -> Observation | None:
    """What the run tracker is told of a run event whose checks all held. ``ok``:
    ``result.ok``, if the caller has asked it already (see ``verified``)."""
    if result is None or not included or not (result.ok if ok is None else ok):
        return None
    if not result.event.startswith("Run."):
        return None
    assert result.signer is not None and result.subject_digest is not None
    return (
        result.event,
        result.position,
        result.signer,
        result.subject_digest,
        result.predicate or {},
    )


def with_inclusion(result: EventVerification, included: bool) -> EventVerification:
    """The event's verification, with whether it is in the checkpoint's tree."""
    result.check(Check.INCLUSION, included, "" if included else "not in the checkpoint's tree")
    return result


def verified(result: EventVerification | None) -> bool:
    """Whether an event was re-verified and every check held: ``result.ok`` (a loop over
    its checks), asked once per event and handed to ``seen_of`` and ``observation_of``."""
    return result is not None and result.ok


def seen_of(event: ParsedEvent, result: EventVerification | None, ok: bool | None = None) -> Seen:
    """What the order and completeness checks need of a readable event. ``ok``:
    ``verified(result)``, if the caller has asked it already."""
    if ok is None:
        ok = verified(result)
    signer = result.signer if ok and result is not None else None
    return (
        event.leaf_index,
        event.entry.position,
        event.entry.aggregate,
        event.entry.version,
        signer,
    )
