"""Re-verifying a stored event from what it carries, check by named check.

Used by ``history`` (and later audit and offline verification). Never raises for bad data:
a tampered or unreadable record is reported as failing, with the reason, so it is neither
hidden nor able to crash the reader.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from domain.errors import DomainError
from domain.manifests.manifest_set import check_manifest_set
from domain.statements import SIGNER_ROLES, PredicateType, Role, Statement
from domain.timestamps import parse_time
from ledger.aggregates import principal_id, run_id
from ledger.dsse import Envelope, parse_envelope, verify_envelope
from ledger.key_registry import KeyRecord
from ledger.keys import PublicKey
from ledger.trust import TrustRoot

# Stored event class → the predicate type its envelope must carry.
EVENT_PREDICATES: dict[str, PredicateType] = {
    "Run.Ingested": PredicateType.INGESTION,
    "Run.Attested": PredicateType.ATTESTATION,
    "Run.Retracted": PredicateType.LIFECYCLE,
    "Run.Superseded": PredicateType.LIFECYCLE,
    "Run.RerunRequested": PredicateType.RERUN_REQUEST,
    "Run.RerunRecorded": PredicateType.RERUN,
    "Run.RerunClaimed": PredicateType.RERUN_CLAIM,
    "Principal.Registered": PredicateType.KEY,
    "Principal.Revoked": PredicateType.KEY,
}

KeyLookup = Callable[[str], KeyRecord | None]


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str = ""


@dataclass
class EventVerification:
    position: int
    version: int
    event: str
    received_at: str | None = None
    signer: str | None = None
    role: str | None = None
    predicate_type: str | None = None
    predicate: dict[str, Any] | None = None
    envelope: dict[str, Any] | None = None
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

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


def verify_stored_event(
    *,
    position: int,
    version: int,
    event: str,
    aggregate_id: UUID,
    state: bytes,
    keys: KeyLookup,
    trust_root: TrustRoot,
) -> EventVerification:
    """Re-check one stored event from its database bytes (history, audit)."""
    try:
        stored = json.loads(state)
        envelope_json = stored["envelope"]
        received_at = str(stored["received_at"])
    except (ValueError, KeyError, TypeError) as exc:
        result = EventVerification(position=position, version=version, event=event)
        result.checks.append(Check("record-readable", False, f"stored record is unreadable: {exc}"))
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
    )


def expected_aggregate(event: str, statement: Statement) -> UUID:
    """The aggregate a statement belongs in: its run's, or its key's."""
    if event.startswith("Principal."):
        return principal_id(statement.subject_name)
    return run_id(statement.subject_digest)


def verify_event(
    *,
    position: int,
    version: int,
    event: str,
    aggregate_id: UUID,
    envelope_json: object,
    received_at: str,
    keys: KeyLookup,
    trust_root: TrustRoot,
) -> EventVerification:
    """Re-check one event: well-formed, about the aggregate it is filed under, signed in role
    by a key valid when the ledger received it, and (ingestions) digests that hold."""
    result = EventVerification(position=position, version=version, event=event)
    checks = result.checks
    result.received_at = received_at
    result.envelope = envelope_json if isinstance(envelope_json, dict) else None
    try:
        received = parse_time(received_at, "receivedAt")
    except DomainError as exc:
        checks.append(Check("record-readable", False, exc.message))
        return result
    checks.append(Check("record-readable", True))
    try:
        envelope = parse_envelope(envelope_json)
        statement = envelope.statement()
    except DomainError as exc:
        checks.append(Check("envelope", False, exc.message))
        return result
    checks.append(Check("envelope", True))
    result.predicate_type = str(statement.predicateType)
    result.predicate = statement.predicate

    expected_type = EVENT_PREDICATES.get(event)
    checks.append(
        Check(
            "event-type",
            expected_type == statement.predicateType,
            ""
            if expected_type == statement.predicateType
            else f"a {event} event carries a {statement.predicateType} statement",
        )
    )
    belongs = expected_aggregate(event, statement) == aggregate_id
    checks.append(
        Check(
            "subject",
            belongs,
            "" if belongs else f"statement about {statement.subject_digest} is filed elsewhere",
        )
    )
    _check_signer(result, envelope, statement, received, keys, trust_root)
    if statement.predicateType is PredicateType.INGESTION:
        _check_ingested_content(result, statement)
    return result


def _self_signed_key(statement: Statement) -> PublicKey | None:
    """The key a key statement registers or revokes, when the envelope is signed by it."""
    if statement.predicateType is not PredicateType.KEY:
        return None
    try:
        return PublicKey.from_b64(str(statement.predicate.get("publicKey")))
    except ValueError:
        return None


def _check_signer(
    result: EventVerification,
    envelope: Envelope,
    statement: Statement,
    received: Any,
    keys: KeyLookup,
    trust_root: TrustRoot,
) -> None:
    checks = result.checks
    own = _self_signed_key(statement)
    own_id = own.key_id if own is not None else None

    def lookup(key_id: str) -> KeyRecord | None:
        try:
            return keys(key_id)
        except DomainError:
            return None  # a key whose own record is damaged verifies nothing

    def resolve(key_id: str) -> PublicKey | None:
        if own is not None and key_id == own_id:
            return own
        record = lookup(key_id)
        return record.public_key if record is not None else None

    try:
        signer = verify_envelope(envelope, resolve)
    except DomainError as exc:
        checks.append(Check("signature", False, exc.message))
        return
    result.signer = signer
    checks.append(Check("signature", True))
    if signer == own_id:
        action = statement.predicate.get("action")
        roles = statement.predicate.get("roles") or []
        allowed = (
            action == "revoke" or roles == [Role.ATTESTER.value] or trust_root.is_admin(signer)
        )
        result.role = "self"
        checks.append(
            Check("role", allowed, "" if allowed else "self-signed key statement beyond attester")
        )
        return
    record = lookup(signer)
    assert record is not None  # verify_envelope only returns ids resolve() could find
    result.role = ",".join(sorted(record.roles))
    why = record.invalid_at(received)
    checks.append(Check("key-valid", why is None, why or ""))
    needed = SIGNER_ROLES[statement.predicateType]
    in_role = bool(record.roles & needed)
    checks.append(
        Check(
            "role",
            in_role,
            "" if in_role else f"role {result.role} may not sign {statement.predicateType}",
        )
    )


def _check_ingested_content(result: EventVerification, statement: Statement) -> None:
    manifests = statement.predicate.get("manifests")
    if not isinstance(manifests, dict):
        result.checks.append(Check("manifests", False, "manifests is not a JSON object"))
        return
    try:
        checked = check_manifest_set(manifests)
    except DomainError as exc:
        result.checks.append(Check("manifests", False, exc.message))
        return
    same = checked.run_digest == statement.subject_digest
    result.checks.append(
        Check("manifests", same, "" if same else f"run manifest digests to {checked.run_digest}")
    )
