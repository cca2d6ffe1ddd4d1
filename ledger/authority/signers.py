"""Which signature counts, which key and role it is, and whether that role may sign that.

The envelope carries exactly one signature (``ledger.signing.dsse`` refuses any other count), so
there is never a choice of which signature counts. It counts if it verifies under

* the key a key statement is about (proof of possession): a key may always revoke itself and
  may register itself as an attester; a trust-root admin key may register itself
  (bootstrap); or
* a registered key, registered earlier in the log than the event and not revoked earlier,
  not expired when the ledger received the event, valid at the statement's ``issuedAt``
  (which may not be in the future), in a role that may sign the statement's predicate type.

Everything is judged at a :class:`LogPoint`: the event's position and the time the ledger
recorded on it. Admission judges at (None, now): after everything stored, at the time it is
about to record; re-verification at the stored position and time. Same inputs, same answer.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING

import msgspec

from domain.errors import DigestMismatchError, ManifestError
from domain.statements import SIGNER_ROLES, KeyAction, Role
from domain.timestamps import format_time, parse_time
from ledger.authority.key_book import KeyLookup, KeyState
from ledger.errors import (
    ClockSkewError,
    ExpiredKeyError,
    RevokedKeyError,
    SubjectMismatchError,
    WrongRoleError,
)
from ledger.signing.dsse import Envelope, SignatureError, UnknownKeyError
from ledger.signing.dsse import signed_by as _signed_by
from ledger.signing.keys import PublicKey
from ledger.signing.trust import TrustRoot
from ledger.signing.verdict import SignatureVerdict
from ledger.timing import Stage, timed

if TYPE_CHECKING:
    # The statement models are made on first use (domain.statements): a process that
    # reads without checking a statement (a read command) never makes them.
    # Where a model is needed as a value, the function that needs it imports it.
    from domain.statements import KeyPredicate, SignedPredicate, Statement

signed_by = timed(Stage.VERIFY)(_signed_by)


# The refusal of a signature that does not verify under the registered key its id names
# (a server's worker answers it too, without the writer: ``ledger.admission_checks``).
BAD_SIGNATURE = "signature does not verify under the registered key it names"


def signed_or_vouched(envelope: Envelope, key: PublicKey, verdict: SignatureVerdict | None) -> bool:
    """Whether ``key`` signed ``envelope``: a verdict about exactly this envelope and key
    (another process verified it: ``ledger.signing.verdict``) says so; else verify here."""
    return (verdict is not None and verdict.matches(envelope, key)) or signed_by(envelope, key)


# How far a signer's clock may run ahead of the ledger's, and how far before the ledger
# received a key's registration the key may say it became valid.
MAX_CLOCK_SKEW = timedelta(minutes=5)
SELF = "self"


def quantize(moment: datetime) -> datetime:
    """The moment as the ledger records it (UTC, milliseconds). Admission judges the time it
    will store, so re-verification from the stored time reaches the same verdict."""
    if moment.tzinfo is not None:
        utc = moment.astimezone(UTC)
        if utc.year >= 1000:  # four digits: the text reads back as exactly this
            # The microseconds below the millisecond taken away (never past the second): a
            # subtraction costs ~2 k instructions, ``replace(microsecond=...)``'s keyword
            # parsing ~12 k (callgrind), once per envelope admitted.
            return utc - _BELOW_MS[utc.microsecond % 1000]
    return parse_time(format_time(moment))


_BELOW_MS = tuple(timedelta(microseconds=n) for n in range(1000))


class LogPoint(msgspec.Struct, frozen=True):
    """Where and when an event is judged: its log position (None: being admitted now, after
    everything stored) and the time the ledger recorded (or will record) on it."""

    position: int | None
    received_at: datetime


class Authorization(msgspec.Struct, frozen=True):
    """The signature that counts: its key id, the role it signed in, and the key's state
    (None when a key signed a statement about itself)."""

    signer: str
    role: str
    key: KeyState | None

    @property
    def self_signed(self) -> bool:
        return self.key is None


@cache
def _key_predicate() -> type[KeyPredicate]:
    """``KeyPredicate``, imported on first use (see the imports) and then remembered: an
    import statement run for every event cost ~13 k instructions of each (h/vcore)."""
    from domain.statements import KeyPredicate  # noqa: PLC0415 - see the imports

    return KeyPredicate


def authorize(
    envelope: Envelope,
    statement: Statement,
    predicate: SignedPredicate,
    *,
    keys: KeyLookup,
    trust_root: TrustRoot,
    at: LogPoint,
    verdict: SignatureVerdict | None = None,
) -> Authorization:
    """The signer of ``envelope`` if it may say ``statement`` at ``at``; else raise why
    (UnknownKeyError / SignatureError, RevokedKeyError / ExpiredKeyError / ClockSkewError,
    WrongRoleError). ``verdict``: a signature check made elsewhere, taken only if it names
    the very key judged here (``signed_or_vouched``)."""
    keyid = envelope.keyid
    if isinstance(predicate, _key_predicate()) and keyid == predicate.keyId:
        return _self_signed(envelope, predicate, trust_root, verdict)
    state = keys(keyid)
    if state is None or not state.registered_before(at.position):
        raise UnknownKeyError.naming(keyid)
    if state.key_id != keyid or not signed_or_vouched(envelope, state.public_key, verdict):
        raise SignatureError(BAD_SIGNATURE)
    check_usable(state, at, parse_time(predicate.issuedAt, "predicate.issuedAt"))
    allowed = SIGNER_ROLES[statement.predicateType]
    if not state.roles & allowed:
        have = ", ".join(sorted(state.roles)) or "none"
        need = " or ".join(sorted(allowed))
        raise WrongRoleError(
            f"key {keyid} has role {have}; a {statement.predicateType} statement needs {need}"
        )
    return Authorization(keyid, _role_text(state.roles), state)


# The text of each set of roles a key held (a handful of sets: subsets of ``Role``).
_ROLE_TEXTS: dict[frozenset[Role], str] = {}


def _role_text(roles: frozenset[Role]) -> str:
    """``",".join(sorted(roles))``, made once per set of roles."""
    text = _ROLE_TEXTS.get(roles)
    if text is None:
        text = _ROLE_TEXTS[roles] = ",".join(sorted(roles))
    return text


def _self_signed(
    envelope: Envelope,
    predicate: KeyPredicate,
    trust_root: TrustRoot,
    verdict: SignatureVerdict | None,
) -> Authorization:
    own = _public_key(predicate).strong()  # a weak key "signs" anything: it vouches for nothing
    if own.key_id != predicate.keyId or not signed_or_vouched(envelope, own, verdict):
        raise SignatureError("the key statement's own signature does not verify")
    if predicate.action is KeyAction.REGISTER and not (
        predicate.roles == [Role.ATTESTER] or trust_root.is_admin(predicate.keyId)
    ):
        raise WrongRoleError(
            "a key may register itself only with the attester role; "
            "other roles need an admin signature"
        )
    return Authorization(predicate.keyId, SELF, None)


def _public_key(predicate: KeyPredicate) -> PublicKey:
    try:
        return PublicKey.from_b64(predicate.publicKey)
    except ValueError:
        raise DigestMismatchError("publicKey is not an Ed25519 public key") from None


def check_usable(state: KeyState, at: LogPoint, issued_at: datetime) -> None:
    """May this key sign a statement issued at ``issued_at``, received at ``at``?

    A revoked key signs nothing new whatever date it claims, since a thief controls the date.
    """
    if state.revoked_before(at.position):
        when = format_time(state.revoked_at) if state.revoked_at else "earlier in the log"
        raise RevokedKeyError(f"key {state.key_id} was revoked at {when}")
    received = at.received_at
    if state.valid_until is not None and received > state.valid_until:
        raise ExpiredKeyError(f"key {state.key_id} expired at {format_time(state.valid_until)}")
    if issued_at > received + MAX_CLOCK_SKEW:
        raise ClockSkewError(f"issuedAt {format_time(issued_at)} is in the future")
    if issued_at < state.valid_from or (
        state.valid_until is not None and issued_at > state.valid_until
    ):
        raise ExpiredKeyError(
            f"key {state.key_id} is not valid at issuedAt {format_time(issued_at)}"
        )


def check_key_statement(
    statement: Statement, predicate: KeyPredicate, at: LogPoint, *, signer: str
) -> None:
    """The canonical form of a key statement: about the key it names, a key the ledger may
    trust when registered (``PublicKey.strong``), roles unique and sorted, a validity window
    that ends after it starts, issued no later than received. A self-registration (no admin
    vouches for it) may not start its window before the ledger received it: back-dated, the
    key could sign statements "issued" years before it existed."""
    if statement.subject_name != predicate.keyId or statement.subject_digest != predicate.keyId:
        raise SubjectMismatchError(
            "a key statement's subject must be the key: name and sha256 digest equal to keyId"
        )
    key = _public_key(predicate)
    if key.key_id != predicate.keyId:
        raise DigestMismatchError(f"keyId {predicate.keyId} is not the id of the publicKey given")
    if predicate.action is KeyAction.REGISTER:
        # Small-order or non-canonical: refused whoever signs it. A revocation still names
        # such a key, so one stored before this rule can be revoked.
        key.strong()
    issued_at = parse_time(predicate.issuedAt, "predicate.issuedAt")
    if issued_at > at.received_at + MAX_CLOCK_SKEW:
        raise ClockSkewError(f"issuedAt {predicate.issuedAt} is in the future")
    if predicate.action is not KeyAction.REGISTER:
        if any(v is not None for v in (predicate.roles, predicate.validFrom, predicate.validUntil)):
            raise ManifestError("a revocation names the key only (no roles or validity)")
        return
    if predicate.roles is None or predicate.validFrom is None:
        raise ManifestError("registering a key needs predicate.roles and predicate.validFrom")
    names = [str(r) for r in predicate.roles]
    if names != sorted(set(names)):
        raise ManifestError('predicate.roles must be unique and sorted, e.g. ["admin", "agent"]')
    valid_from = parse_time(predicate.validFrom, "predicate.validFrom")
    if signer == predicate.keyId and valid_from < at.received_at - MAX_CLOCK_SKEW:
        raise ClockSkewError(
            f"validFrom {predicate.validFrom} is before the ledger received this "
            "self-registration: a key cannot vouch for itself before it is registered"
        )
    if predicate.validUntil is not None and parse_time(predicate.validUntil) <= valid_from:
        raise ManifestError("predicate.validUntil must be after validFrom")
