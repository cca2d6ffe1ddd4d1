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
from datetime import datetime
from functools import cache
from operator import attrgetter
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


_HELD: dict[Check, CheckOutcome] = {name: CheckOutcome(name, True) for name in Check}
# Runs of checks that hold together, in the order verify_event records them.
_READ_HELD = (_HELD[Check.RECORD], _HELD[Check.ENVELOPE], _HELD[Check.PREDICATE])
_FILED_HELD = (_HELD[Check.EVENT_TYPE], _HELD[Check.SUBJECT])
_SIGNER_HELD = (_HELD[Check.SIGNATURE], _HELD[Check.KEY_VALID], _HELD[Check.ROLE])
_SELF_SIGNED_HELD = (_HELD[Check.SIGNATURE], _HELD[Check.ROLE])
_OUTCOME_OK = attrgetter("ok")
_OUTCOME_NAME = attrgetter("name")


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
        # map() in C, not a generator or a list: asked of every event of a bundle, several
        # times. all(), not ``False not in``: only a true ``ok`` passes (a Struct does not
        # check that ``ok`` is a bool when made).
        return bool(self.checks) and all(map(_OUTCOME_OK, self.checks))

    @property
    def failures(self) -> list[CheckOutcome]:
        return [c for c in self.checks if not c.ok]

    def check(self, name: Check, ok: bool = True, detail: str = "") -> None:
        # A check that held is one shared (frozen) outcome per name: ~8 an event, not made anew.
        self.checks.append(
            _HELD[name] if ok is True and not detail else CheckOutcome(name, ok, detail)
        )

    def report_to(self, report: Report, where: str) -> None:
        """Count this event's checks in ``report`` (audit, verify)."""
        if self.ok:  # every check of every event of a bundle: counted in one C loop
            report.ok_each(list(map(_OUTCOME_NAME, self.checks)))
            return
        for check in self.checks:
            if check.ok:
                report.ok(check.name)
            else:
                report.fail(check.name, where, check.detail)

    def held(self, name: Check) -> None:
        """``check(name)``: a check that held (the common case, without the arguments)."""
        self.checks.append(_HELD[name])

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
    # The class remembered (``_predicate_classes``): audit asks this of every event.
    if result.ok and isinstance(result.parsed, _predicate_classes()[1]) and result.received_at:
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
    result = EventVerification(
        position=position,
        version=version,
        event=event,
        received_at=received_at,
        envelope=envelope_json if isinstance(envelope_json, dict) else None,
    )
    read = _read_event(result, envelope_json, received_at)
    if read is None:
        return result
    received, envelope, statement, predicate = read
    ingestion_class, key_class = _predicate_classes()

    _check_filing(result, event, aggregate_id, statement)
    at = LogPoint(position, received)
    # Each rule below in its own try (no lambda per rule and event): a domain error's
    # message is the failed check's detail.
    if isinstance(predicate, key_class):
        try:
            check_key_statement(statement, predicate, at, signer=envelope.keyid)
        except DomainError as exc:
            result.check(Check.KEY_STATEMENT, False, exc.message)
        else:
            result.held(Check.KEY_STATEMENT)
    _check_signer(result, envelope, statement, predicate, keys, trust_root, at)
    if statement.predicateType in TIMELY:
        try:
            check_timely(statement, predicate, received)
        except DomainError as exc:
            result.check(Check.TIMELY, False, exc.message)
        else:
            result.held(Check.TIMELY)
    if isinstance(predicate, ingestion_class):
        try:
            # The statement is the strict reader's (``Envelope.statement``): JSON values.
            check_ingestion(statement, predicate, admitted=admitted, json_read=True)
        except DomainError as exc:
            result.check(Check.MANIFESTS, False, exc.message)
        else:
            result.held(Check.MANIFESTS)
    return result


@cache
def _predicate_classes() -> tuple[type[IngestionPredicate], type[KeyPredicate]]:
    """The predicate classes ``verify_event`` tells apart, imported on first use (see the
    imports) and then remembered: an import statement run for every event of a bundle
    cost ~1 µs of it (its from-list is resolved again each time)."""
    from domain.statements import IngestionPredicate, KeyPredicate  # noqa: PLC0415

    return IngestionPredicate, KeyPredicate


# What an event carries, once its record, envelope and predicate have been read: the time
# it was received, its envelope, statement and predicate (a tuple: made for every event).
_ReadEvent = tuple[datetime, Envelope, "Statement", "SignedPredicate"]


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
    try:
        envelope = parse_envelope(envelope_json)
        statement = envelope.statement()
    except DomainError as exc:
        result.held(Check.RECORD)
        result.check(Check.ENVELOPE, False, exc.message)
        return None
    result.predicate_type = str(statement.predicateType)
    result.predicate = statement.predicate
    result.subject_digest = statement.subject_digest
    try:
        # Stored: rules added after an event was admitted (the rerun vocabulary) do not apply.
        predicate = parse_predicate(statement, stored=True)
    except DomainError as exc:
        result.checks += _READ_HELD[:2]
        result.check(Check.PREDICATE, False, exc.message)
        return None
    result.checks += _READ_HELD  # the three held, in their order, added at once
    result.parsed = predicate
    return received, envelope, statement, predicate


def _check_filing(
    result: EventVerification, event: str, aggregate_id: UUID, statement: Statement
) -> None:
    """``event-type`` and ``subject``: the statement is of the kind its event class carries,
    and about the aggregate it is filed under."""
    same_type = EVENT_PREDICATES.get(event) == statement.predicateType
    belongs = expected_aggregate(event, statement) == aggregate_id
    if same_type and belongs:
        result.checks += _FILED_HELD
        return
    if same_type:
        result.held(Check.EVENT_TYPE)
    else:
        detail = f"a {event} event carries a {statement.predicateType} statement"
        result.check(Check.EVENT_TYPE, False, detail)
    if belongs:
        result.held(Check.SUBJECT)
    else:
        detail = f"statement about {statement.subject_digest} is filed elsewhere"
        result.check(Check.SUBJECT, False, detail)


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
    result.checks += _SELF_SIGNED_HELD if auth.self_signed else _SIGNER_HELD
