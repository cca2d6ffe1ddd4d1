"""Re-verifying a stored event from what it carries, check by named check.

Used by ``history``, ``audit`` and the offline bundle verifier. The rules are admission's
own: the envelope profile (``ledger.signing.dsse``), the predicate schemas (``domain.statements``),
who may sign what (``ledger.authority``) and what a statement must say about its subject
(``ledger.authority.content``), judged at the event's place in the log. So every event the
ledger admitted re-verifies, and an event it would have refused does not.

Never raises for bad data: a tampered or unreadable record is reported as failing, with the
reason, so it is neither hidden nor able to crash the reader.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Any
from uuid import UUID

import msgspec

from domain.errors import DomainError
from domain.event_names import EventName
from domain.statements import PredicateType, parse_predicate
from domain.timestamps import parse_time
from ledger.authority import (
    KeyBook,
    KeyLookup,
    LogPoint,
    authorize,
    check_ingestion,
    check_key_statement,
    check_timely,
)
from ledger.authority.content import TIMELY
from ledger.errors import ClockSkewError, ExpiredKeyError, RevokedKeyError, WrongRoleError
from ledger.ids import principal_id, run_id
from ledger.signing.dsse import Envelope, SignatureError, parse_envelope
from ledger.signing.trust import TrustRoot
from ledger.verification_report import Check, Report

if TYPE_CHECKING:
    # The statement models are made on first use (domain.statements): a process that
    # reads without checking a statement (a read command) never makes them.
    # Where a model is needed as a value, the function that needs it imports it.
    from domain.statements import IngestionPredicate, KeyPredicate, SignedPredicate, Statement
    from ledger.store.stored_events import StoredRecord

# Stored event class → the predicate type its envelope must carry.
EVENT_PREDICATES: dict[str, PredicateType] = {
    EventName.RUN_INGESTED: PredicateType.INGESTION,
    EventName.RUN_ATTESTED: PredicateType.ATTESTATION,
    EventName.RUN_RETRACTED: PredicateType.LIFECYCLE,
    EventName.RUN_SUPERSEDED: PredicateType.LIFECYCLE,
    EventName.RUN_MANIFESTS_ATTACHED: PredicateType.ATTACHMENT,
    EventName.RUN_RERUN_REQUESTED: PredicateType.RERUN_REQUEST,
    EventName.RUN_RERUN_RECORDED: PredicateType.RERUN,
    EventName.RUN_RERUN_CLAIMED: PredicateType.RERUN_CLAIM,
    EventName.KEY_REGISTERED: PredicateType.KEY,
    EventName.KEY_REVOKED: PredicateType.KEY,
}


class CheckOutcome(msgspec.Struct, frozen=True):
    name: Check
    ok: bool
    detail: str = ""


class EventVerification(msgspec.Struct):
    position: int
    version: int
    event: str
    received_at: str | None = None
    signer: str | None = None
    role: str | None = None
    predicate_type: str | None = None
    predicate: dict[str, Any] | None = None
    envelope: dict[str, Any] | None = None
    subject_digest: str | None = None
    checks: list[CheckOutcome] = msgspec.field(default_factory=list)
    # The parsed predicate, when it parsed (key events teach a key book from it).
    parsed: SignedPredicate | None = None

    @property
    def ok(self) -> bool:
        # A list, not a generator: asked of every event of a bundle, several times.
        # all(), not ``False not in``: only a true ``ok`` passes (a Struct does not check
        # that ``ok`` is a bool when made).
        return bool(self.checks) and all([c.ok for c in self.checks])

    @property
    def failures(self) -> list[CheckOutcome]:
        return [c for c in self.checks if not c.ok]

    def check(self, name: Check, ok: bool = True, detail: str = "") -> None:
        self.checks.append(CheckOutcome(name, ok, detail))

    def report_to(self, report: Report, where: str) -> None:
        """Count this event's checks in ``report`` (audit, verify)."""
        if self.ok:  # every check of every event of a bundle: counted in one C loop
            report.ok_each([check.name for check in self.checks])
            return
        for check in self.checks:
            if check.ok:
                report.ok(check.name)
            else:
                report.fail(check.name, where, check.detail)

    def to_json(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "version": self.version,
            "event": self.event,
            "receivedAt": self.received_at,
            "signer": self.signer,
            "role": self.role,
            "predicateType": self.predicate_type,
            "predicate": self.predicate,
            "envelope": self.envelope,
            "verified": self.ok,
            "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in self.checks],
        }


def verify_record(
    record: StoredRecord, keys: KeyLookup, trust_root: TrustRoot
) -> EventVerification:
    """A reader's check of one stored record (history, the key list): the ledger's own
    events, their manifests schema-checked at admission."""
    return verify_stored_event(
        position=record.position,
        version=record.version,
        event=record.event_name,
        aggregate_id=record.aggregate_id,
        state=record.state,
        keys=keys,
        trust_root=trust_root,
        admitted=True,
    )


def verify_stored_event(
    *,
    position: int,
    version: int,
    event: str,
    aggregate_id: UUID,
    state: bytes,
    keys: KeyLookup,
    trust_root: TrustRoot,
    admitted: bool = False,
) -> EventVerification:
    """Re-check one stored event from its database bytes (history, audit).

    ``admitted``: a read of the ledger's own log (history, run pages), where the manifests
    were schema-checked at admission and are not again
    (``domain.manifests.canonical_form.admitted_manifest_digest`` says why that is sound);
    audit keeps the gate."""
    try:
        stored = json.loads(state)
        envelope_json = stored["envelope"]
        received_at = str(stored["received_at"])
    except (ValueError, KeyError, TypeError) as exc:
        result = EventVerification(position=position, version=version, event=event)
        result.check(Check.RECORD, False, f"stored record is unreadable: {exc}")
        return result
    return verify_event(
        position=position,
        version=version,
        event=event,
        aggregate_id=aggregate_id,
        envelope_json=envelope_json,
        received_at=received_at,
        keys=keys,
        trust_root=trust_root,
        admitted=admitted,
    )


def learn_key(keys: KeyBook, result: EventVerification) -> None:
    """Teach ``keys`` a key event whose checks all held (fed in log order)."""
    from domain.statements import KeyPredicate  # noqa: PLC0415 - see the imports

    if result.ok and isinstance(result.parsed, KeyPredicate) and result.received_at:
        keys.learn(
            result.parsed,
            position=result.position,
            received_at=parse_time(result.received_at),
            signer=result.signer or "",
        )


def expected_aggregate(event: str, statement: Statement) -> UUID:
    """The aggregate a statement belongs in: its run's, or its key's."""
    if event.startswith("Principal."):
        return principal_id(statement.subject_name)
    return run_id(statement.subject_digest)


# What each refusal of ``ledger.authority`` means as a named check.
_AUTHORITY_CHECKS: tuple[tuple[type[DomainError], Check], ...] = (
    (SignatureError, Check.SIGNATURE),
    (RevokedKeyError, Check.KEY_VALID),
    (ExpiredKeyError, Check.KEY_VALID),
    (ClockSkewError, Check.KEY_VALID),
    (WrongRoleError, Check.ROLE),
)


def _authority_check(exc: DomainError) -> Check:
    return next(
        (check for cls, check in _AUTHORITY_CHECKS if isinstance(exc, cls)), Check.SIGNATURE
    )


def verify_event(  # noqa: PLR0913 - the event's fields, the keys, and how it was read
    *,
    position: int,
    version: int,
    event: str,
    aggregate_id: UUID,
    envelope_json: object,
    received_at: str,
    keys: KeyLookup,
    trust_root: TrustRoot,
    admitted: bool = False,
) -> EventVerification:
    """Re-check one event: well-formed, about the aggregate it is filed under, signed by a
    key that may say it at the event's place in the log, and (ingestions) digests that hold.

    ``keys`` answers with each key's registration and revocation positions; a key registered
    after ``position`` or revoked before it does not sign the event. ``admitted``: see
    :func:`verify_stored_event` (never for a bundle: third-party input is schema-checked)."""
    result = EventVerification(position=position, version=version, event=event)
    result.received_at = received_at
    result.envelope = envelope_json if isinstance(envelope_json, dict) else None
    read = _read_event(result, envelope_json, received_at)
    if read is None:
        return result
    statement, predicate = read.statement, read.predicate
    ingestion_class, key_class = _predicate_classes()

    _check_filing(result, event, aggregate_id, statement)
    at = LogPoint(position, read.received)
    if isinstance(predicate, key_class):
        _checked(
            result,
            Check.KEY_STATEMENT,
            lambda: check_key_statement(statement, predicate, at, signer=read.envelope.keyid),
        )
    _check_signer(result, read.envelope, statement, predicate, keys, trust_root, at)
    if statement.predicateType in TIMELY:
        _checked(result, Check.TIMELY, lambda: check_timely(statement, predicate, read.received))
    if isinstance(predicate, ingestion_class):
        _checked(
            result,
            Check.MANIFESTS,
            # The statement is the strict reader's (``Envelope.statement``): JSON values.
            lambda: check_ingestion(statement, predicate, admitted=admitted, json_read=True),
        )
    return result


@cache
def _predicate_classes() -> tuple[type[IngestionPredicate], type[KeyPredicate]]:
    """The predicate classes ``verify_event`` tells apart, imported on first use (see the
    imports) and then remembered: an import statement run for every event of a bundle
    cost ~1 µs of it (its from-list is resolved again each time)."""
    from domain.statements import IngestionPredicate, KeyPredicate  # noqa: PLC0415

    return IngestionPredicate, KeyPredicate


class _ReadEvent(msgspec.Struct, frozen=True):
    """What an event carries, once its record, envelope and predicate have been read."""

    received: datetime
    envelope: Envelope
    statement: Statement
    predicate: SignedPredicate


def _read_event(
    result: EventVerification, envelope_json: object, received_at: str
) -> _ReadEvent | None:
    """``record``, ``envelope`` and ``predicate``, in turn: None at the first that fails,
    since every later check needs what it reads."""
    try:
        received = parse_time(received_at, "receivedAt")
    except DomainError as exc:
        result.check(Check.RECORD, False, exc.message)
        return None
    result.check(Check.RECORD)
    try:
        envelope = parse_envelope(envelope_json)
        statement = envelope.statement()
    except DomainError as exc:
        result.check(Check.ENVELOPE, False, exc.message)
        return None
    result.check(Check.ENVELOPE)
    result.predicate_type = str(statement.predicateType)
    result.predicate = statement.predicate
    result.subject_digest = statement.subject_digest
    try:
        # Stored: rules added after an event was admitted (the rerun vocabulary) do not apply.
        predicate = parse_predicate(statement, stored=True)
    except DomainError as exc:
        result.check(Check.PREDICATE, False, exc.message)
        return None
    result.check(Check.PREDICATE)
    result.parsed = predicate
    return _ReadEvent(received, envelope, statement, predicate)


def _check_filing(
    result: EventVerification, event: str, aggregate_id: UUID, statement: Statement
) -> None:
    """``event-type`` and ``subject``: the statement is of the kind its event class carries,
    and about the aggregate it is filed under."""
    expected_type = EVENT_PREDICATES.get(event)
    same_type = expected_type == statement.predicateType
    result.check(
        Check.EVENT_TYPE,
        same_type,
        "" if same_type else f"a {event} event carries a {statement.predicateType} statement",
    )
    belongs = expected_aggregate(event, statement) == aggregate_id
    result.check(
        Check.SUBJECT,
        belongs,
        "" if belongs else f"statement about {statement.subject_digest} is filed elsewhere",
    )


def _checked(result: EventVerification, check: Check, rule: Callable[[], object]) -> None:
    """Record ``check`` as holding unless ``rule`` raises a domain error, whose message says
    why it does not."""
    try:
        rule()
    except DomainError as exc:
        result.check(check, False, exc.message)
    else:
        result.check(check)


def _check_signer(
    result: EventVerification,
    envelope: Envelope,
    statement: Statement,
    predicate: SignedPredicate,
    keys: KeyLookup,
    trust_root: TrustRoot,
    at: LogPoint,
) -> None:
    def lookup(key_id: str) -> Any:
        try:
            return keys(key_id)
        except DomainError:
            return None  # a key whose own record is damaged signs nothing

    try:
        auth = authorize(envelope, statement, predicate, keys=lookup, trust_root=trust_root, at=at)
    except DomainError as exc:
        check = _authority_check(exc)
        if check is not Check.SIGNATURE:
            # The signature verified; the key may not say this here. Show whose it is.
            result.signer = envelope.keyid
            state = lookup(envelope.keyid)
            result.role = ",".join(sorted(state.roles)) if state is not None else None
            result.check(Check.SIGNATURE)
            if check is Check.ROLE:
                result.check(Check.KEY_VALID)
        result.check(check, False, exc.message)
        return
    result.signer = auth.signer
    result.role = auth.role
    result.check(Check.SIGNATURE)
    if not auth.self_signed:
        result.check(Check.KEY_VALID)
    result.check(Check.ROLE)
