"""Admission's small types and helpers: an admitted envelope, a group's outcome, a refusal."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from domain.errors import DomainError
from domain.timestamps import format_time
from ledger.aggregates import Signed
from ledger.errors import UnprocessableEnvelopeError
from ledger.logged_event import LoggedEvent
from ledger.signing.dsse import Envelope

if TYPE_CHECKING:
    # The statement models are made on first use (domain.statements): a process that
    # reads without checking a statement (a read command) never makes them.
    # Where a model is needed as a value, the function that needs it imports it.
    from domain.statements import Statement


@dataclass(frozen=True)
class Admitted:
    """An envelope accepted into the group: its first new event's index among the group's."""

    first_event: int
    statement: Statement
    duplicate: bool


@dataclass
class AdmittedGroup:
    """A group's outcome before it is stored: per envelope its receipt (a duplicate), its
    refusal or its admission; the new events in order; what they change."""

    results: list[LoggedEvent | DomainError | Admitted] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    touched: dict[UUID, Aggregate] = field(default_factory=dict)
    # The stored version of each stored key that authorised an envelope (not one the group
    # itself registered or revoked): read again under the log's lock before the commit.
    signers: dict[UUID, int] = field(default_factory=dict)
    groups: dict[str, tuple[str, int]] = field(default_factory=dict)


def _unprocessable(step: str, exc: Exception) -> UnprocessableEnvelopeError:
    return UnprocessableEnvelopeError(
        f"the ledger could not {step} this envelope ({type(exc).__name__}); it is not stored. "
        "This is the ledger's failure, logged for its operator, not a verdict on the envelope"
    )


def _signed(envelope: Envelope, now: datetime, signer: str) -> Signed:
    return Signed(dict(envelope.raw), envelope.digest, format_time(now), signer)
