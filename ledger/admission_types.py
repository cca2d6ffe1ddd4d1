"""Admission's small types and helpers: an admitted envelope, a group's outcome, a refusal."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

import msgspec
from eventsourcing.domain import Aggregate

from domain.errors import DomainError
from domain.timestamps import format_time
from ledger.aggregates import Signed
from ledger.errors import UnprocessableEnvelopeError
from ledger.logged_event import LoggedEvent
from ledger.signing.dsse import Envelope
from ledger.store.transparency_log import InclusionProof

if TYPE_CHECKING:
    # The statement models are made on first use (domain.statements): a process that
    # reads without checking a statement (a read command) never makes them.
    # Where a model is needed as a value, the function that needs it imports it.
    from domain.statements import Statement


class Admitted(msgspec.Struct, frozen=True):
    """An envelope accepted into the group: its first new event's index among the group's.
    (A Struct: one per admitted envelope, far cheaper to make than a frozen dataclass.)"""

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
    # The envelopes admitted, as parsed: the commit takes their payload bytes and JCS
    # (``fold_fields.handed_payloads``, ``log_leaves.parsed_at``) where an event stores that
    # very envelope, also when the group was sent as raw JSON (one process).
    parsed: list[Envelope] = field(default_factory=list)


def receipt_of(  # noqa: PLR0913 - one per field of LoggedEvent
    *,
    position: int,
    aggregate_id: UUID,
    version: int,
    event: str,
    subject_digest: str,
    envelope_digest: str,
    received_at: str,
    duplicate: bool,
    inclusion: InclusionProof | None,
    signer: str,
) -> LoggedEvent:
    """``LoggedEvent(...)`` of these fields (every one, in its field order), made without the
    frozen dataclass's ``__init__``, which sets each of its ten fields through
    ``object.__setattr__`` (~3 µs a receipt natively; one per admitted envelope, in the
    writer's answer). It has no ``__post_init__``: its fields are all it holds, set here as
    that ``__init__`` sets them (tests/ledger/test_receipt_fields.py holds the two equal,
    field for field and in order, for every field the class declares)."""
    made: LoggedEvent = object.__new__(LoggedEvent)
    vars(made).update(
        {
            "position": position,
            "aggregate_id": aggregate_id,
            "version": version,
            "event": event,
            "subject_digest": subject_digest,
            "envelope_digest": envelope_digest,
            "received_at": received_at,
            "duplicate": duplicate,
            "inclusion": inclusion,
            "signer": signer,
        }
    )
    return made


def _unprocessable(step: str, exc: Exception) -> UnprocessableEnvelopeError:
    return UnprocessableEnvelopeError(
        f"the ledger could not {step} this envelope ({type(exc).__name__}); it is not stored. "
        "This is the ledger's failure, logged for its operator, not a verdict on the envelope"
    )


def _signed(envelope: Envelope, now: datetime, signer: str) -> Signed:
    return Signed(dict(envelope.raw), envelope.digest, received_text(now), signer)


# The last received time and its text: a group's envelopes are mostly received within the
# same millisecond (``Admission._received_now``), and ``format_time`` costs ~1.6 µs. One
# tuple, read and replaced whole (threads may race on it; either value is right).
_last_received: tuple[datetime, str] | None = None


def received_text(moment: datetime) -> str:
    """``format_time(moment)``, the text of the last time asked for remembered. Equal
    instants have one text (UTC), so equality (any offsets) is the key."""
    global _last_received  # noqa: PLW0603 - the one remembered value, by design
    last = _last_received
    if last is not None and last[0] == moment:
        return last[1]
    text = format_time(moment)
    _last_received = (moment, text)
    return text
