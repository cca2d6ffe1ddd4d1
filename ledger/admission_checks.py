"""Admission's stateless checks: what an envelope is, whatever the log holds.

Parsing the envelope and its statement, the predicate's schema, an ingestion's manifests and
their digests, and the Ed25519 signature against given public-key bytes depend on nothing
stored, so they run where the cores are: in each HTTP worker of ``kernelindex serve``, and
in-process for ``Ledger.append``/``append_many``, through the one function here
(``check_stateless``). The writer then applies the stateful rules (``ledger.admission``: key
state, run state, duplicates, sequencing), in the order ``ledger.application`` lists, taking
each stateless result at the very step where it checked it before: a predicate that did not
parse is refused where the predicate is read, after the run is found, so every refusal keeps
its code whichever process found it.

The signature is the one stateless check that needs a key: the worker reads the key's bytes
for the key id the envelope names and sends a ``SignatureVerdict`` bound to them; the writer
takes it only if the key it holds for that key id at its state has those bytes
(``ledger.authority.signed_or_vouched``), else verifies itself. A key the worker does not
know (registered a moment ago, or in the same group) means no verdict, not a refusal.
"""

from __future__ import annotations

import enum
import functools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from domain.canonical import is_digest
from domain.errors import DomainError
from domain.statements import PredicateType
from domain.statements import parse_predicate as _parse_predicate
from ledger.admission_types import _unprocessable
from ledger.authority import check_ingestion
from ledger.authority.key_book import KeyState
from ledger.authority.signers import BAD_SIGNATURE
from ledger.errors import is_store_failure
from ledger.signing import dsse
from ledger.signing.dsse import Envelope, SignatureError
from ledger.signing.keys import PublicKey
from ledger.signing.verdict import SignatureVerdict
from ledger.timing import Stage, timed

if TYPE_CHECKING:
    from domain.statements import IngestionPredicate, KeyPredicate, SignedPredicate, Statement

__all__ = ["Checked", "KnownKeys", "RunNamed", "check_stateless", "judged_predicate"]

parse_envelope = timed(Stage.PARSE)(dsse.parse_envelope)
parse_predicate = timed(Stage.PREDICATE)(_parse_predicate)
vouch = timed(Stage.VERIFY)(SignatureVerdict.of)  # one Ed25519 check, wherever it runs
_log = logging.getLogger(__name__)

T = TypeVar("T")
# The public key for a key id, if the caller knows it (None: the writer verifies).
KeyOf = Callable[[str], PublicKey | None]


@dataclass(frozen=True)
class RunNamed:
    """What an ingestion's manifests, checked, say the run is."""

    run_digest: str
    run_name: str


@dataclass(frozen=True)
class Checked:
    """An envelope after the stateless checks: each result, or the refusal it gave, kept for
    the step of admission that asks for it."""

    envelope: Envelope
    statement: Statement
    predicate: SignedPredicate | DomainError
    # An ingestion's manifests (None: not an ingestion, or its predicate did not parse).
    run: RunNamed | DomainError | None
    # The signature verified here against the key id's bytes (None: not checked here).
    verdict: SignatureVerdict | None
    # The signature does not verify under the key id's bytes (which never change).
    bad_signature: bool = False

    def parsed_predicate(self) -> SignedPredicate:
        if isinstance(self.predicate, DomainError):
            raise self.predicate
        return self.predicate

    def checked_run(self) -> RunNamed:
        if isinstance(self.run, DomainError):
            raise self.run
        assert self.run is not None  # an ingestion whose predicate parsed
        return self.run

    def refusal(self) -> DomainError | None:
        """The refusal admission would give whatever the log holds, if the stateless checks
        already know it: an ingestion's first steps are its predicate and then its signature
        (a stored duplicate has the same payload, so the same predicate, and its signature is
        checked the same way), so a worker answers those without the writer. Other
        statements find their run or key first, whose absence is the answer then."""
        if self.statement.predicateType is not PredicateType.INGESTION:
            return None
        if isinstance(self.predicate, DomainError):
            return self.predicate
        if self.bad_signature:
            return SignatureError(BAD_SIGNATURE)
        return None


def check_stateless(value: object, key_of: KeyOf | None = None) -> Checked:
    """Every stateless check of one envelope (the JSON value received, a parsed ``Envelope``,
    or a ``Checked`` already: returned as it is). Raises the envelope's or statement's
    refusal, which comes first whatever the log holds; keeps every later one in the result.
    ``key_of``: the public key of a registered key id, where this process can read it."""
    if isinstance(value, Checked):
        return value
    envelope = value if isinstance(value, Envelope) else parse_envelope(value)
    statement = envelope.statement()
    envelope.signed_digest  # noqa: B018 - read here: what the group matches on
    predicate = judged_predicate(statement)
    run: RunNamed | DomainError | None = None
    if names_a_run(statement, predicate):
        run = _judged(lambda: _run_named(statement, predicate))
    key = _signer_key(envelope, predicate, key_of)
    verdict = None if key is None else vouch(envelope, key)
    return Checked(envelope, statement, predicate, run, verdict, key is not None and not verdict)


def names_a_run(statement: Statement, predicate: SignedPredicate | DomainError) -> bool:
    """Whether a statement's manifests name a run: an ingestion whose predicate reads."""
    return statement.predicateType is PredicateType.INGESTION and not isinstance(
        predicate, DomainError
    )


def judged_predicate(statement: Statement) -> SignedPredicate | DomainError:
    """The statement's predicate, or the refusal its reading gave (kept for its step)."""
    return _judged(lambda: parse_predicate(statement))


@functools.cache
def _models() -> tuple[type[IngestionPredicate], type[KeyPredicate]]:
    """The two predicate models asked about here, made on first use (not an import
    statement per envelope: each cost ~0.4 µs)."""
    from domain.statements import IngestionPredicate, KeyPredicate  # noqa: PLC0415

    return IngestionPredicate, KeyPredicate


def _run_named(statement: Statement, predicate: SignedPredicate | DomainError) -> RunNamed:
    assert isinstance(predicate, _models()[0])
    # The statement is the envelope's, read from its payload by the strict JSON reader.
    checked = check_ingestion(statement, predicate, json_read=True)
    return RunNamed(checked.run_digest, checked.run_name)


def _judged(step: Callable[[], T]) -> T | DomainError:
    try:
        return step()
    except DomainError as exc:
        return exc
    except Exception as exc:
        if isinstance(exc, MemoryError) or is_store_failure(exc):
            raise  # the process's or the database's failure, not this envelope's
        # Judging what someone sent failed in a way no rule names: that envelope's refusal
        # alone, and a bug, logged for whoever runs the ledger.
        _log.exception("could not judge an envelope; it is refused, its group goes on")
        return _unprocessable("judge", exc)


def _signer_key(
    envelope: Envelope, predicate: SignedPredicate | DomainError, key_of: KeyOf | None
) -> PublicKey | None:
    """The key the signature must verify under, where this process knows it: a key
    statement's own key when it signs about itself, else the registered key's bytes."""
    key_predicate = _models()[1]
    if isinstance(predicate, key_predicate) and envelope.keyid == predicate.keyId:
        try:
            own = PublicKey.from_b64(predicate.publicKey)
        except (ValueError, DomainError):
            return None  # admission says why, at its step
        return own if own.key_id == envelope.keyid and own.weakness is None else None
    if key_of is None:
        return None
    key = key_of(envelope.keyid)
    return key if key is not None and key.key_id == envelope.keyid else None


class _Unread(enum.Enum):
    """KnownKeys: what only a read of the key book can answer."""

    UNREAD = 0


_UNREAD = _Unread.UNREAD


class KnownKeys:
    """A worker's key ids → public keys, read from the log's key book on first use. A key
    id is the hash of its key's bytes, so what is found stays true for good (revocation,
    expiry and roles are the writer's to judge). An id not found is not read again for
    ``miss_s`` (bodies naming made-up key ids cost one read each otherwise): meanwhile the
    worker sends no verdict for it and the writer verifies, as for any key it does not know.
    """

    def __init__(
        self,
        read: Callable[[Iterable[str]], Mapping[str, KeyState]],
        size: int = 10_000,
        miss_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._size = size
        self._miss_s = miss_s
        self._clock = clock
        self._keys: OrderedDict[str, PublicKey] = OrderedDict()
        self._missed: OrderedDict[str, float] = OrderedDict()  # key id → when it was missed
        self._lock = threading.Lock()

    def needs_read(self, key_id: str) -> bool:
        """Whether asking for ``key_id`` now would read the database (a caller on an event
        loop asks from a thread then)."""
        return isinstance(self._held(key_id, self._clock()), _Unread)

    def __call__(self, key_id: str) -> PublicKey | None:
        now = self._clock()
        held = self._held(key_id, now)
        if not isinstance(held, _Unread):
            return held
        try:
            state = self._read([key_id]).get(key_id)
        except Exception as exc:
            if is_store_failure(exc):
                return None  # no verdict: the writer verifies, and answers for the store
            raise
        with self._lock:
            if state is None:
                self._remember(self._missed, key_id, now)
                return None
            self._missed.pop(key_id, None)
            self._remember(self._keys, key_id, state.public_key)
        return state.public_key

    def _held(self, key_id: str, now: float) -> PublicKey | _Unread | None:
        """The key as held (None: no key has this id, or it was missed a moment ago), or
        ``_UNREAD`` where only the database can say."""
        with self._lock:
            # Only digests are ever held, so a held one needs no pattern check (every
            # envelope a worker checks asks: the check is for the others).
            key = self._keys.get(key_id)
            if key is not None:
                self._keys.move_to_end(key_id)
                return key
        if not is_digest(key_id):  # no key has such an id: nothing to read or remember
            return None
        with self._lock:
            missed = self._missed.get(key_id)
            return None if missed is not None and now - missed < self._miss_s else _UNREAD

    def _remember(self, found: OrderedDict[str, T], key_id: str, value: T) -> None:
        found[key_id] = value
        found.move_to_end(key_id)
        if len(found) > self._size:
            found.popitem(last=False)
