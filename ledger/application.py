"""The ledger: the only way in. Every write is a signed DSSE envelope, checked, then appended.

Admission order (each step fails closed with a named reason; nothing is stored on failure):
1. envelope shape, base64 and statement schema;
2. an identical envelope already stored → its original receipt, nothing new (idempotent);
3. predicate schema;
4. who may sign it (``ledger.authority``, the rule re-verification uses too): a registered
   key, unrevoked and valid at issuedAt, in a role allowed to sign the predicate;
5. what the statement claims about its subject (digests, references, the run exists...);
6. append, retrying on optimistic-concurrency conflicts so no acknowledged write is lost.
   Inside the transaction that stores and sequences the group, under the log's lock, the
   signers' keys are read again: if another process revoked one meanwhile, the group is
   admitted again from the new state. So every event's signer is judged as the log stands at
   the event's own place in it, which is what every re-verification judges too.
"""

from __future__ import annotations

import dataclasses
import json
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar, Union
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import (
    IntegrityError,
    MapperDeserialisationError,
    OperationalError,
    Recording,
)
from sqlalchemy import func, select
from sqlalchemy.engine import make_url

from domain.errors import DigestMismatchError, DomainError, ManifestError
from domain.run_facts import comparison_key_of
from domain.statements import (
    AttachmentPredicate,
    AttestationPredicate,
    IngestionPredicate,
    KeyAction,
    KeyPredicate,
    LifecycleAction,
    LifecyclePredicate,
    PredicateType,
    RerunClaimPredicate,
    RerunPredicate,
    RerunRequestPredicate,
    Role,
    SignedPredicate,
    Statement,
    parse_predicate,
)
from domain.timestamps import format_time, parse_time, utc_now
from ledger.aggregates import Principal, Run, Signed, principal_id, run_id, topic_of
from ledger.authority import (
    Authorization,
    KeyBook,
    KeyState,
    LogPoint,
    authorize,
    check_ingestion,
    check_key_statement,
    check_timely,
    quantize,
)
from ledger.errors import (
    AlreadyExistsError,
    ConflictError,
    CorruptRecordError,
    NotFoundError,
    RerunJobError,
    StoreError,
    SubjectMismatchError,
    UnknownKeyError,
    UnknownRunError,
    is_transient,
    lost_connection,
    write_refusal,
)
from ledger.signing.dsse import (
    Envelope,
    SignatureError,
    parse_envelope,
    signed_by,
    stored_statement,
)
from ledger.signing.keys import PublicKey, SigningKey
from ledger.signing.trust import TrustRoot
from ledger.store.connections import ping_on_checkout
from ledger.store.event_store import EventStore
from ledger.store.group_index import record_members
from ledger.store.schema import APPLICATION_NAME, SchemaError, require_current
from ledger.store.transparency_log import InclusionProof, LogIntegrityError, TransparencyLog

MAX_APPEND_ATTEMPTS = 20
KEY_CACHE_SIZE = 10_000
_ONE_MS = timedelta(milliseconds=1)
A = TypeVar("A", bound=Aggregate)
P = TypeVar("P", bound=SignedPredicate)


@dataclass(frozen=True)
class Receipt:
    """What the ledger acknowledges for an accepted (or already stored) envelope."""

    position: int
    aggregate_id: UUID
    version: int
    event: str
    subject_digest: str
    envelope_digest: str
    received_at: str
    duplicate: bool
    inclusion: InclusionProof | None = None
    signer: str = ""  # the key id whose signature admitted the event

    def to_json(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "aggregateId": str(self.aggregate_id),
            "version": self.version,
            "event": self.event,
            "subjectDigest": self.subject_digest,
            "envelopeDigest": self.envelope_digest,
            "receivedAt": self.received_at,
            "duplicate": self.duplicate,
            "signer": self.signer,
            "log": self.inclusion.to_json() if self.inclusion else None,
        }


Outcome = Union["Receipt", Run, Principal]  # a duplicate's receipt, or an aggregate to store


@dataclass(frozen=True)
class _Admitted:
    """An envelope accepted into the group: its first new event's index among the group's."""

    first_event: int
    statement: Statement
    duplicate: bool


class _Overlay(threading.local):
    """Aggregates changed by the group being admitted, visible only to the writing thread,
    and the keys it has looked up (a group reads each unchanged key once)."""

    aggregates: dict[UUID, Aggregate] | None = None
    keys: dict[str, KeyState | None] | None = None
    # Stored version of each run the group's envelopes are about, read in one query.
    versions: dict[UUID, int] | None = None
    # The stored version of each key that authorised an admitted envelope of the group:
    # checked again under the log's lock before the group commits.
    signers: dict[UUID, int] | None = None
    # Comparison key of each run the group ingests, for the ledger's group index.
    # run digest -> (its comparison key, the version of the event that gave it one).
    groups: dict[str, tuple[str, int]] | None = None


class _SignerChanged(Exception):
    """A key that authorised part of the group changed (was revoked) in another process
    before the group committed: admit the group again from the new state."""


@dataclass(frozen=True)
class StoredRecord:
    """A stored event exactly as the database holds it (for history, audit and export)."""

    position: int
    aggregate_id: UUID
    version: int
    topic: str
    state: bytes

    @property
    def event_name(self) -> str:
        return self.topic.rsplit(":", 1)[-1]


def decode_stored(state: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """(stored event fields, the statement its envelope carries), without verifying anything.

    For readers that fold already-admitted events (projections, importer index); history and
    audit re-verify instead. Raises ValueError/KeyError/TypeError on a damaged record.
    """
    stored = json.loads(state)
    return stored, statement_of(stored)


def statement_of(stored: dict[str, Any]) -> dict[str, Any]:
    """The statement inside a stored event's envelope (decoded, not verified)."""
    return stored_statement(stored["envelope"])


def _signed(envelope: Envelope, now: datetime, signer: str) -> Signed:
    return Signed(dict(envelope.raw), envelope.digest, format_time(now), signer)


def fold_key_events(key_id: str, records: Sequence[StoredRecord]) -> KeyState | None:
    """A key's state from its stored events, in order (``ledger.authority.KeyBook``).
    A record that no longer decodes fails closed."""
    book = KeyBook()
    for record in records:
        try:
            stored, statement = decode_stored(record.state)
            predicate = KeyPredicate.model_validate(statement["predicate"])
            received = parse_time(str(stored["received_at"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptRecordError(
                f"stored key event at position {record.position} of {key_id} cannot be read "
                f"({type(exc).__name__})"
            ) from None
        book.learn(
            predicate,
            position=record.position,
            received_at=received,
            signer=str(stored.get("signer", "")),
        )
    return book(key_id)


def _pending_key_state(principal: Principal) -> KeyState:
    """A key registered or revoked earlier in the group being admitted (not sequenced yet)."""
    return KeyState(
        key_id=principal.key_id,
        public_key=PublicKey.from_b64(principal.public_key),
        roles=frozenset(Role(r) for r in principal.roles),
        valid_from=parse_time(principal.valid_from),
        valid_until=parse_time(principal.valid_until) if principal.valid_until else None,
        registered_at=parse_time(principal.registered_at),
        registered_position=None,
        registered_by=principal.registered_by,
        label=principal.label,
        revoked_at=parse_time(principal.revoked_at) if principal.revoked_at else None,
        revocation_reason=principal.revocation_reason,
        version=principal.version,
    )


_READ_FACTORY = "ledger.store.read_only:ReadFactory"


class Ledger(Application[UUID]):
    """KernelIndex event store (eventsourcing Application on SQLAlchemy)."""

    name = APPLICATION_NAME

    def __init__(
        self,
        db_url: str,
        trust_root: TrustRoot,
        *,
        clock: Callable[[], datetime] = utc_now,
        cache_size: int = 10_000,
        log_key: SigningKey | None = None,
        read_only: bool = False,
    ) -> None:
        # read_only: for commands that never append (ledger/store/read_only.py says why it exists).
        self.read_only = read_only
        super().__init__(
            env={
                "PERSISTENCE_MODULE": (
                    "ledger.store.read_only:ReadFactory"
                    if read_only
                    else "eventsourcing_sqlalchemy"
                ),
                "SQLALCHEMY_URL": db_url,
                # Tables are made by `kernelindex db upgrade` (ledger/store/schema.py), never here.
                "CREATE_TABLE": "n",
                # The cache fast-forwards from the database on every get, so other writers'
                # events (revocations included) are always seen.
                "AGGREGATE_CACHE_MAXSIZE": str(cache_size),
                "AGGREGATE_CACHE_FASTFORWARD": "y",
            }
        )
        # eventsourcing-sqlalchemy makes the engine without pre-ping; API workers, projector
        # and sequencer all need a connection PostgreSQL dropped while idle to be replaced.
        self.store = EventStore(self.recorder)
        ping_on_checkout(self.store.engine)
        try:
            require_current(
                self.store.engine,
                make_url(db_url).render_as_string(hide_password=True),
            )
        except SchemaError:
            self.close()  # no pooled connection outlives a refused open
            raise
        self.trust_root = trust_root
        self.clock = clock
        if log_key is not None and log_key.key_id != trust_root.log_key.key_id:
            raise DomainError("the log key given is not the trust root's log key")
        self.tlog = TransparencyLog(self.store, trust_root.origin, trust_root.log_key, log_key)
        self._overlay = _Overlay()
        self._writer = threading.Lock()  # one group admitted at a time per ledger object
        # Keys read by earlier groups, with the version read; reused only while unchanged.
        self._key_cache: dict[str, tuple[int, KeyState]] = {}
        # Runs as the last committed group left them, reused (without a copy or a
        # fast-forward query) while their stored version is still the one they carry.
        self._runs: OrderedDict[UUID, Aggregate] = OrderedDict()
        self._runs_max = cache_size
        self._last_received: datetime | None = None

    # ---------------------------------------------------------------- writes

    def append(self, envelope_json: object) -> Receipt:
        """Admit one signed envelope; return its receipt or raise a DomainError saying why."""
        result = self.append_many([envelope_json])[0]
        if isinstance(result, DomainError):
            raise result
        return result

    def append_many(self, envelopes: Sequence[object]) -> list[Receipt | DomainError]:
        """Admit envelopes in order and commit the accepted ones in one transaction.

        Each envelope gets its receipt or the reason it was refused; a refusal does not affect
        the others, and later envelopes see the effect of earlier ones (a key registered, then
        used). Events are stored and logged in arrival order. One commit (one fsync, one log
        sequencing pass) for the whole group is what makes concurrent writers fast.
        """
        if self.read_only:
            raise StoreError("this ledger was opened to read: open it to write to append")
        with self._writer:
            outcome_unknown = False
            for attempt in range(MAX_APPEND_ATTEMPTS):
                try:
                    results, committed = self._append_group(envelopes)
                    break
                except _SignerChanged:
                    # Not a lost race to retry blindly: the keys are read afresh, so the
                    # revoked key's envelopes are refused this time (each key changes at
                    # most twice, so this settles).
                    if attempt == MAX_APPEND_ATTEMPTS - 1:
                        raise ConflictError(
                            "the signing keys kept changing while this write was admitted; "
                            "nothing was stored, send it again"
                        ) from None
                    continue
                except (IntegrityError, OperationalError) as exc:
                    # Retried only if another writer won the race (or held the SQLite lock),
                    # or the connection dropped (the retry takes a fresh one, and finds the
                    # group's envelopes stored if the lost COMMIT went through); a full,
                    # read-only or failing store refuses at once, saying so.
                    outcome_unknown = outcome_unknown or lost_connection(exc)
                    if not is_transient(exc) or attempt == MAX_APPEND_ATTEMPTS - 1:
                        raise write_refusal(exc, attempt + 1, outcome_unknown) from exc
                    # Full jitter: two processes that keep colliding on one run stop
                    # retrying in lockstep (a fixed backoff let one starve the other).
                    time.sleep(random.uniform(0, min(0.001 * 2**attempt, 0.2)))  # noqa: S311
        # Outside the retry: once committed, a group is never admitted again (its envelopes
        # would come back as duplicates of themselves).
        return [self._settled_receipt(r, committed) for r in results]

    def _settled_receipt(
        self,
        result: Receipt | DomainError | _Admitted,
        committed: tuple[list[Recording[UUID]], tuple[int, dict[int, InclusionProof]] | None],
    ) -> Receipt | DomainError:
        """The group is committed: a failure now (reading a duplicate's proof) concerns that
        envelope alone, and never means that nothing was stored."""
        try:
            return self._receipt(result, committed)
        except (IntegrityError, OperationalError) as exc:
            return StoreError(
                "the envelope is stored, but reading its inclusion proof failed "
                f"({type(exc).__name__}); send it again for its receipt"
            )

    def _append_group(
        self, envelopes: Sequence[object]
    ) -> tuple[
        list[Receipt | DomainError | _Admitted],
        tuple[list[Recording[UUID]], tuple[int, dict[int, InclusionProof]] | None],
    ]:
        results: list[Receipt | DomainError | _Admitted] = []
        events: list[Any] = []
        admitted_digests: dict[str, int] = {}
        parsed: list[tuple[Envelope, Statement] | DomainError] = []
        for raw in envelopes:
            try:
                envelope = parse_envelope(raw)
                parsed.append((envelope, envelope.statement()))
            except DomainError as exc:
                parsed.append(exc)
        touched: dict[UUID, Aggregate] = {}
        self._overlay.aggregates = touched
        self._overlay.keys = {}
        signers: dict[UUID, int] = {}
        self._overlay.signers = signers
        groups: dict[str, tuple[str, int]] = {}
        self._overlay.groups = groups
        try:
            # One query for the stored versions of every run the group is about and every
            # signer key read before: what is unchanged is reused, not reloaded.
            cached = self._cached_signers(parsed)
            runs = {run_id(p[1].subject_digest) for p in parsed if not isinstance(p, DomainError)}
            versions = self._stored_versions(runs | {principal_id(k) for k in cached})
            self._overlay.versions = versions
            self._reuse_unchanged_keys(cached, versions)
            for item in parsed:
                if isinstance(item, DomainError):
                    results.append(item)
                    continue
                envelope, statement = item
                try:
                    if envelope.signed_digest in admitted_digests:  # sent twice in a group
                        first = admitted_digests[envelope.signed_digest]
                        self._check_resubmission(envelope, envelope.keyid)
                        results.append(_Admitted(first, statement, True))
                        continue
                    outcome = self._admit(envelope, statement)
                except DomainError as exc:
                    results.append(exc)
                    continue
                if isinstance(outcome, Receipt):
                    results.append(outcome)
                    continue
                touched[outcome.id] = outcome
                new_events = outcome.collect_events()
                admitted_digests[envelope.signed_digest] = len(events)
                results.append(_Admitted(len(events), statement, False))
                events.extend(new_events)
        except BaseException:
            self._forget_runs(touched)
            raise
        finally:
            self._overlay.aggregates = None
            self._overlay.keys = None
            self._overlay.versions = None
            self._overlay.signers = None
            self._overlay.groups = None
        if not events:
            return results, ([], None)
        try:
            unchanged_here = {p: v for p, v in signers.items() if p not in touched}
            committed = self._commit(events, unchanged_here, groups)
        except BaseException:
            self._forget_runs(touched)  # admitted against state that was never stored
            raise
        self._remember_runs(touched)
        return results, committed

    def _stored_versions(self, ids: set[UUID]) -> dict[UUID, int]:
        """The stored version of each of these aggregates, in one query (absent: none)."""
        if not ids:
            return {}
        record = self.store.events.c
        found: dict[UUID, int] = {}
        with self.store.transaction(commit=False) as session:
            ordered = sorted(ids, key=str)
            for start in range(0, len(ordered), 500):
                rows = session.execute(
                    select(record.originator_id, func.max(record.originator_version))
                    .where(record.originator_id.in_(ordered[start : start + 500]))
                    .group_by(record.originator_id)
                )
                found.update({UUID(str(r[0])): int(r[1]) for r in rows})
        return found

    def _cached_run(self, aggregate_id: UUID) -> Aggregate | None:
        """The cached run, if the group's version query shows nobody has appended to it since
        and it carries nothing uncommitted; else None (read it from the store)."""
        versions = self._overlay.versions
        cached = self._runs.get(aggregate_id)
        if versions is None or cached is None:
            return None
        if versions.get(aggregate_id) != cached.version or cached.pending_events:
            self._runs.pop(aggregate_id, None)
            return None
        self._runs.move_to_end(aggregate_id)
        return cached

    def _remember_runs(self, touched: dict[UUID, Aggregate]) -> None:
        for aggregate_id, aggregate in touched.items():
            if isinstance(aggregate, Run) and not aggregate.pending_events:
                self._runs[aggregate_id] = aggregate
                self._runs.move_to_end(aggregate_id)
        while len(self._runs) > self._runs_max:
            self._runs.popitem(last=False)

    def _forget_runs(self, touched: dict[UUID, Aggregate]) -> None:
        for aggregate_id in touched:
            self._runs.pop(aggregate_id, None)

    def _admit(self, envelope: Envelope, statement: Statement) -> Outcome:
        handlers: dict[PredicateType, Callable[[Envelope, Statement], Outcome]] = {
            PredicateType.INGESTION: self._append_ingestion,
            PredicateType.ATTESTATION: self._append_attestation,
            PredicateType.KEY: self._append_key,
            PredicateType.LIFECYCLE: self._append_lifecycle,
            PredicateType.RERUN_REQUEST: self._append_rerun_request,
            PredicateType.RERUN: self._append_rerun,
            PredicateType.RERUN_CLAIM: self._append_rerun_claim,
            PredicateType.ATTACHMENT: self._append_attachment,
        }
        handler = handlers.get(statement.predicateType)
        if handler is None:
            raise ManifestError(f"predicate type {statement.predicateType} is not accepted yet")
        return handler(envelope, statement)

    def _append_ingestion(self, envelope: Envelope, statement: Statement) -> Outcome:
        existing = self._get(Run, run_id(statement.subject_digest))
        if existing is not None and envelope.signed_digest in existing.envelopes:
            return self._duplicate(existing, envelope, statement)
        predicate = parse_predicate(statement)
        assert isinstance(predicate, IngestionPredicate)
        now = self._received_now()
        signer = self._authorize(envelope, statement, predicate, now)
        checked = check_ingestion(statement, predicate)
        if existing is not None:
            raise AlreadyExistsError(
                f"run {checked.run_digest} was already ingested at {existing.ingested_at}",
                position=self._position(existing.id, 1),
            )
        # Only an admitted ingestion says which group its run joins (a refused one in the
        # same group of writes must not: the group index would disagree with the log).
        group = comparison_key_of(statement.predicate["manifests"])
        if group is not None and self._overlay.groups is not None:
            self._overlay.groups[checked.run_digest] = (group, 1)
        return Run.ingest(
            _signed(envelope, now, signer.signer),
            run_digest=checked.run_digest,
            run_name=checked.run_name,
        )

    def _admit_about_run(
        self, envelope: Envelope, statement: Statement, model: type[P]
    ) -> Receipt | tuple[Run, P, Signed, datetime]:
        """The common steps for a statement about an ingested run: the run exists, a
        duplicate returns its receipt, the predicate parses, the signer may say it."""
        run = self._existing_run(statement)
        if envelope.signed_digest in run.envelopes:
            return self._duplicate(run, envelope, statement)
        predicate = parse_predicate(statement)
        assert isinstance(predicate, model)
        now = self._received_now()
        signer = self._authorize(envelope, statement, predicate, now)
        return run, predicate, _signed(envelope, now, signer.signer), now

    def _append_attestation(self, envelope: Envelope, statement: Statement) -> Outcome:
        admitted = self._admit_about_run(envelope, statement, AttestationPredicate)
        if isinstance(admitted, Receipt):
            return admitted
        run, _, signed, _ = admitted
        run.attest(signed)
        return run

    def _append_attachment(self, envelope: Envelope, statement: Statement) -> Outcome:
        admitted = self._admit_about_run(envelope, statement, AttachmentPredicate)
        if isinstance(admitted, Receipt):
            return admitted
        run, _, signed, _ = admitted
        had = comparison_key_of(run.manifests())
        checked = run.attach(signed, statement.predicate["manifests"])
        group = comparison_key_of(checked.documents)
        # A run joins a comparison group when its workload arrives (it had none before).
        if had is None and group is not None and self._overlay.groups is not None:
            self._overlay.groups[run.run_digest] = (group, run.version)
        return run

    def _append_lifecycle(self, envelope: Envelope, statement: Statement) -> Outcome:
        admitted = self._admit_about_run(envelope, statement, LifecyclePredicate)
        if isinstance(admitted, Receipt):
            return admitted
        run, predicate, signed, _ = admitted
        if predicate.action is LifecycleAction.RETRACT:
            if run.retracted:
                raise AlreadyExistsError(f"run {run.run_digest} is already retracted")
            run.retract(signed)
        else:
            if run.superseded_by is not None:
                raise AlreadyExistsError(f"run {run.run_digest} is already superseded")
            if predicate.supersededBy == run.run_digest:
                raise SubjectMismatchError("a run cannot supersede itself")
            run.supersede(signed, superseded_by=predicate.supersededBy)
        return run

    def _append_rerun_request(self, envelope: Envelope, statement: Statement) -> Outcome:
        admitted = self._admit_about_run(envelope, statement, RerunRequestPredicate)
        if isinstance(admitted, Receipt):
            return admitted
        run, predicate, signed, now = admitted
        if predicate.runDigest != run.run_digest:
            raise SubjectMismatchError("predicate.runDigest is not the statement's subject")
        if predicate.jobId in run.jobs:
            raise AlreadyExistsError(f"job {predicate.jobId} already exists for this run")
        if parse_time(predicate.expiresAt, "predicate.expiresAt") <= now:
            raise RerunJobError("the job would already be expired")
        run.request_rerun(
            signed,
            job_id=predicate.jobId,
            nonce=predicate.nonce,
            expires_at=predicate.expiresAt,
            product=predicate.requirements.product,
            architecture=predicate.requirements.architecture,
        )
        return run

    def _append_rerun(self, envelope: Envelope, statement: Statement) -> Outcome:
        """An agent's result: only for an open job of this run, with its nonce, before it
        expires, measured on the hardware the job requires, once."""
        admitted = self._admit_about_run(envelope, statement, RerunPredicate)
        if isinstance(admitted, Receipt):
            return admitted
        run, predicate, signed, now = admitted
        job = run.jobs.get(predicate.jobId)
        if job is None:
            raise RerunJobError(f"no rerun job {predicate.jobId} was requested for this run")
        if job.result_version is not None:
            raise RerunJobError(f"job {predicate.jobId} already has its result (replay?)")
        if now > parse_time(job.expires_at):
            raise RerunJobError(f"job {predicate.jobId} expired at {job.expires_at}")
        if job.claimant != signed.signer:
            holder = job.claimant or "nobody"
            raise RerunJobError(
                f"only the job's claimant may post its result; job {predicate.jobId} is "
                f"claimed by {holder}"
            )
        if predicate.nonce != job.nonce:
            raise RerunJobError("the result's nonce is not the job's")
        measured = predicate.environment
        if (measured.product, measured.architecture) != (job.product, job.architecture):
            raise RerunJobError(
                f"measured on {measured.product} ({measured.architecture}); the job requires "
                f"{job.product} ({job.architecture})"
            )
        on = (measured.product, measured.architecture, measured.gpuUuidHash, measured.backend)
        if job.device is not None and on != job.device:
            raise RerunJobError(
                f"measured on {on[0]} GPU {on[2][:12]}… ({on[3]}); the claim named "
                f"{job.device[0]} GPU {job.device[2][:12]}… ({job.device[3]})"
            )
        run.record_rerun(signed, job_id=predicate.jobId)
        return run

    def _append_rerun_claim(self, envelope: Envelope, statement: Statement) -> Outcome:
        """An agent takes an open job: not expired, no result yet, nobody else's lease
        running, on the hardware the job requires. The same agent may renew its lease."""
        admitted = self._admit_about_run(envelope, statement, RerunClaimPredicate)
        if isinstance(admitted, Receipt):
            return admitted
        run, predicate, signed, now = admitted
        check_timely(statement, predicate, now)
        if predicate.runDigest != run.run_digest:
            raise SubjectMismatchError("predicate.runDigest is not the statement's subject")
        job = run.jobs.get(predicate.jobId)
        if job is None:
            raise RerunJobError(f"no rerun job {predicate.jobId} was requested for this run")
        if job.result_version is not None:
            raise RerunJobError(f"job {predicate.jobId} already has its result")
        if now > parse_time(job.expires_at):
            raise RerunJobError(f"job {predicate.jobId} expired at {job.expires_at}")
        device = predicate.device
        if (device.product, device.architecture) != (job.product, job.architecture):
            raise RerunJobError(
                f"the device is {device.product} ({device.architecture}); the job requires "
                f"{job.product} ({job.architecture})"
            )
        if (
            job.claimant is not None
            and job.claimant != signed.signer
            and job.lease_until is not None
            and now < parse_time(job.lease_until)
        ):
            raise RerunJobError(
                f"job {predicate.jobId} is claimed by {job.claimant} until {job.lease_until}"
            )
        lease_until = min(
            now + timedelta(seconds=predicate.leaseSeconds), parse_time(job.expires_at)
        )
        run.claim_rerun(signed, job_id=predicate.jobId, lease_until=format_time(lease_until))
        return run

    def _append_key(self, envelope: Envelope, statement: Statement) -> Outcome:
        existing = self._get(Principal, principal_id(statement.subject_name))
        if existing is not None and envelope.signed_digest in existing.envelopes:
            return self._duplicate(existing, envelope, statement)
        predicate = parse_predicate(statement)
        assert isinstance(predicate, KeyPredicate)
        now = self._received_now(after_everything=predicate.action is KeyAction.REVOKE)
        check_key_statement(statement, predicate, LogPoint(None, now), signer=envelope.keyid)
        if predicate.action is KeyAction.REGISTER:
            return self._register_key(envelope, statement, predicate, existing, now)
        return self._revoke_key(envelope, statement, predicate, existing, now)

    def _register_key(
        self,
        envelope: Envelope,
        statement: Statement,
        predicate: KeyPredicate,
        existing: Principal | None,
        now: datetime,
    ) -> Outcome:
        assert predicate.roles is not None and predicate.validFrom is not None
        signer = self._authorize(envelope, statement, predicate, now)
        if existing is not None:
            raise AlreadyExistsError(
                f"key {predicate.keyId} is already registered (at {existing.registered_at}); "
                "keys are registered once: revoke it and register a new key to change roles",
                position=self._position(existing.id, 1),
            )
        return Principal.register(
            _signed(envelope, now, signer.signer),
            key_id=predicate.keyId,
            public_key=predicate.publicKey,
            roles=[str(r) for r in predicate.roles],
            valid_from=predicate.validFrom,
            valid_until=predicate.validUntil,
            label=predicate.label,
        )

    def _revoke_key(
        self,
        envelope: Envelope,
        statement: Statement,
        predicate: KeyPredicate,
        existing: Principal | None,
        now: datetime,
    ) -> Outcome:
        if existing is None:
            raise UnknownKeyError(f"key {predicate.keyId} is not registered")
        if existing.public_key != predicate.publicKey:
            raise DigestMismatchError("publicKey differs from the registered key")
        # The key itself (on compromise) or an admin key.
        signer = self._authorize(envelope, statement, predicate, now)
        if existing.revoked_at is not None:
            raise AlreadyExistsError(
                f"key {predicate.keyId} was already revoked at {existing.revoked_at}"
            )
        existing.revoke(_signed(envelope, now, signer.signer), reason=predicate.reason)
        return existing

    # ------------------------------------------------------------ admission

    def _received_now(self, *, after_everything: bool = False) -> datetime:
        """The time an event is received, as it will be recorded (milliseconds): what the
        checks compare is what re-verification will read back. A revocation
        (``after_everything``) is stamped strictly later than every event received before
        it here, so the recorded times read in the order the log holds them."""
        now = quantize(self.clock())
        last = self._last_received
        if after_everything and last is not None and now < last + _ONE_MS:
            now = last + _ONE_MS
        self._last_received = now if last is None else max(last, now)
        return now

    def _authorize(
        self, envelope: Envelope, statement: Statement, predicate: SignedPredicate, now: datetime
    ) -> Authorization:
        """Who signed, and may they say this now (``ledger.authority``). A stored key that
        authorises the envelope is remembered, to be read again under the log's lock."""
        auth = authorize(
            envelope,
            statement,
            predicate,
            keys=self.key_state,
            trust_root=self.trust_root,
            at=LogPoint(None, now),
        )
        signers, pending = self._overlay.signers, self._overlay.aggregates
        if auth.key is not None and signers is not None and pending is not None:
            pid = principal_id(auth.signer)
            if pid not in pending:
                signers[pid] = auth.key.version
        return auth

    def _check_resubmission(self, envelope: Envelope, signer: str) -> None:
        """A statement stored already, sent again: it is the same event only if it carries
        its signer's own signature (not a copy of the statement under a made-up one)."""
        state = self.key_state(signer)
        if envelope.keyid != signer or state is None or not signed_by(envelope, state.public_key):
            raise SignatureError("signature does not verify under the key it names")

    def _existing_run(self, statement: Statement) -> Run:
        run = self._get(Run, run_id(statement.subject_digest))
        if run is None:
            raise UnknownRunError(f"no run with digest {statement.subject_digest} is in the ledger")
        if statement.subject_name != run.run_name:
            raise SubjectMismatchError(
                f"statement subject name {statement.subject_name!r} is not the run's name "
                f"{run.run_name!r}"
            )
        return run

    # --------------------------------------------------------- persistence

    def _get(self, cls: type[A], aggregate_id: UUID) -> A | None:
        pending = self._overlay.aggregates
        if pending is not None and aggregate_id in pending:
            found = pending[aggregate_id]
            if not isinstance(found, cls):
                raise DomainError(f"aggregate {aggregate_id} is not a {cls.__name__}")
            return found
        if cls is Run and (cached := self._cached_run(aggregate_id)) is not None:
            return cached  # type: ignore[return-value]
        try:
            aggregate: Aggregate = self.repository.get(aggregate_id)
        except AggregateNotFoundError:
            return None
        except MapperDeserialisationError:
            # Fail closed: nothing is appended to, or read from, an aggregate whose stored
            # events no longer decode. History and audit report which record is damaged.
            raise CorruptRecordError(
                f"stored events of {aggregate_id} cannot be decoded; run 'kernelindex history' "
                "or 'kernelindex audit' to see which"
            ) from None
        if not isinstance(aggregate, cls):
            raise DomainError(f"aggregate {aggregate_id} is not a {cls.__name__}")
        return aggregate

    def _commit(
        self, events: list[Any], signers: dict[UUID, int], groups: dict[str, tuple[str, int]]
    ) -> tuple[list[Recording[UUID]], tuple[int, dict[int, InclusionProof]] | None]:
        """Store the new events and sequence them into the log in one transaction.

        Storing takes the event table's lock (PostgreSQL: LOCK TABLE, held to the commit;
        SQLite: the write lock), so no other writer can commit until this one has: the keys
        that authorised the group are read again here, and the group is refused back to its
        admission (``_SignerChanged``) if any of them changed since it was read.
        """
        with self.store.transaction(commit=True) as session:
            recordings = self.save(*events)
            if signers:
                now = self._stored_versions(set(signers))
                changed = [pid for pid, version in signers.items() if now.get(pid) != version]
                if changed:
                    self._key_cache_forget(changed)
                    raise _SignerChanged(f"{len(changed)} signer key(s) changed")
            # A run joins its group at the one event that gave it a workload: its admitted
            # ingestion, or the attachment that completed it (matched by version).
            joined = [
                (event.run_digest, groups[event.run_digest][0], r.notification.id)
                for r in recordings
                if isinstance(event := r.domain_event, Run.Ingested | Run.ManifestsAttached)
                and event.run_digest in groups
                and groups[event.run_digest][1] == r.notification.originator_version
            ]
            record_members(session, joined)
            sequenced = self.tlog.sequence(session)
            proofs = self.tlog.inclusions(
                session, [r.notification.id for r in recordings], sequenced.compact.size
            )
        self.tlog.committed(sequenced)
        return recordings, (sequenced.compact.size, proofs)

    def _receipt(
        self,
        result: Receipt | DomainError | _Admitted,
        committed: tuple[list[Recording[UUID]], tuple[int, dict[int, InclusionProof]] | None],
    ) -> Receipt | DomainError:
        if isinstance(result, DomainError):
            return result
        if isinstance(result, Receipt):
            return self._with_inclusion(result)
        recordings, logged = committed
        assert logged is not None
        recording = recordings[result.first_event]
        event = recording.domain_event
        position = recording.notification.id  # the event's place in the notification log
        return Receipt(
            position=position,
            aggregate_id=UUID(str(recording.notification.originator_id)),
            version=recording.notification.originator_version,
            event=recording.notification.topic.rsplit(":", 1)[-1],
            subject_digest=result.statement.subject_digest,
            envelope_digest=str(getattr(event, "envelope_digest", "")),
            received_at=str(getattr(event, "received_at", "")),
            duplicate=result.duplicate,
            inclusion=logged[1][position],
            signer=str(getattr(event, "signer", "")),
        )

    def _with_inclusion(self, receipt: Receipt) -> Receipt:
        """A duplicate's receipt, with the inclusion proof of the original event."""
        with self.store.transaction(commit=False) as session:
            leaf = self.tlog.leaf_for_position(session, receipt.position)
        if leaf is None:  # stored before a crash, not yet sequenced
            self.tlog.catch_up()
        with self.store.transaction(commit=False) as session:
            leaf = self.tlog.leaf_for_position(session, receipt.position)
            if leaf is None:
                raise LogIntegrityError(f"event {receipt.position} was not sequenced")
            inclusion = self.tlog.inclusion(session, leaf, self.tlog.tree_size(session))
        return dataclasses.replace(receipt, inclusion=inclusion)

    def _duplicate(
        self, aggregate: Run | Principal, envelope: Envelope, statement: Statement
    ) -> Receipt:
        version = aggregate.envelopes[envelope.signed_digest]
        record = self._record_at(aggregate.id, version)
        state = json.loads(record.state)
        self._check_resubmission(envelope, str(state.get("signer", "")))
        return Receipt(
            position=record.position,
            aggregate_id=aggregate.id,
            version=version,
            event=record.event_name,
            subject_digest=statement.subject_digest,
            # The stored envelope's, which may differ from the resubmitted one's bytes.
            envelope_digest=str(state.get("envelope_digest", "")),
            received_at=str(state.get("received_at", "")),
            duplicate=True,
            signer=str(state.get("signer", "")),
        )

    def _position(self, aggregate_id: UUID, version: int) -> int | None:
        """Where an event is stored; None while it is only admitted in the current group."""
        records = self.stored_records(aggregate_id, version=version)
        return records[0].position if records else None

    def _record_at(self, aggregate_id: UUID, version: int) -> StoredRecord:
        records = self.stored_records(aggregate_id, version=version)
        if not records:
            raise NotFoundError(f"no stored event {aggregate_id} v{version}")
        return records[0]

    # ----------------------------------------------------------------- reads

    def stored_records(
        self,
        aggregate_id: UUID,
        version: int | None = None,
        *,
        start: int = 1,
        limit: int | None = None,
        events: Sequence[str] | None = None,
        newest: bool = False,
    ) -> list[StoredRecord]:
        """Raw stored events of one aggregate, with their notification positions, in version
        order: all of them, one ``version``, or a page — from version ``start``, at most
        ``limit``, only the event classes named (``"Run.Attested"``...), or the ``newest``
        ones (still returned oldest first). Reads cost the page, not the aggregate."""
        record_cls = self.store.events.c
        query = select(
            record_cls.id, record_cls.originator_version, record_cls.topic, record_cls.state
        ).where(record_cls.originator_id == aggregate_id)
        if version is not None:
            query = query.where(record_cls.originator_version == version)
        if start > 1:
            query = query.where(record_cls.originator_version >= start)
        if events is not None:
            query = query.where(record_cls.topic.in_([topic_of(e) for e in events]))
        order = record_cls.originator_version
        query = query.order_by(order.desc() if newest else order)
        if limit is not None:
            query = query.limit(limit)
        with self.store.transaction(commit=False) as session:
            rows = session.execute(query).all()
        records = [
            StoredRecord(
                position=r[0],
                aggregate_id=aggregate_id,
                version=r[1],
                topic=r[2],
                state=bytes(r[3]),
            )
            for r in rows
        ]
        return records[::-1] if newest else records

    def event_count(self, aggregate_id: UUID) -> int:
        """How many events an aggregate has (its last version; versions run 1, 2, ...)."""
        return self._stored_versions({aggregate_id}).get(aggregate_id, 0)

    def stored_versions(self, ids: set[UUID]) -> dict[UUID, int]:
        """The stored version of each of these aggregates (absent: none), in one query."""
        return self._stored_versions(ids)

    def run(self, run_digest: str) -> Run | None:
        return self._get(Run, run_id(run_digest))

    def principal(self, key_id: str) -> Principal | None:
        return self._get(Principal, principal_id(key_id))

    def key_state(self, key_id: str) -> KeyState | None:
        """The key as the log holds it, with the positions of its registration and
        revocation (inside a group being admitted: as the group has left it so far)."""
        memo, pending = self._overlay.keys, self._overlay.aggregates
        if pending is not None and (found := pending.get(principal_id(key_id))) is not None:
            return _pending_key_state(found) if isinstance(found, Principal) else None
        if memo is None:
            return self._load_key_state(key_id)
        if key_id not in memo:
            memo[key_id] = self._load_key_state(key_id)
        return memo[key_id]

    def key_states(self, key_ids: Iterable[str]) -> dict[str, KeyState]:
        """The states of many keys (those registered), read in one query a chunk."""
        wanted = {principal_id(k): k for k in set(key_ids)}
        record_cls = self.store.events.c
        found: dict[UUID, list[StoredRecord]] = {}
        ordered = sorted(wanted, key=str)
        with self.store.transaction(commit=False) as session:
            for start in range(0, len(ordered), 500):
                rows = session.execute(
                    select(
                        record_cls.originator_id,
                        record_cls.id,
                        record_cls.originator_version,
                        record_cls.topic,
                        record_cls.state,
                    )
                    .where(record_cls.originator_id.in_(ordered[start : start + 500]))
                    .order_by(record_cls.originator_id, record_cls.originator_version)
                )
                for aggregate, position, version, topic, state in rows:
                    aggregate_id = UUID(str(aggregate))
                    found.setdefault(aggregate_id, []).append(
                        StoredRecord(position, aggregate_id, version, topic, bytes(state))
                    )
        states = {wanted[a]: fold_key_events(wanted[a], records) for a, records in found.items()}
        return {k: state for k, state in states.items() if state is not None}

    def _cached_signers(
        self, parsed: Sequence[tuple[Envelope, Statement] | DomainError]
    ) -> list[str]:
        """Key ids the group's envelopes name that earlier groups already read."""
        named = {item[0].keyid for item in parsed if not isinstance(item, DomainError)}
        return sorted(named & set(self._key_cache))

    def _reuse_unchanged_keys(self, signers: list[str], versions: dict[UUID, int]) -> None:
        """Seed the group's key lookups from keys read before, where the stored version shows
        none of them changed since (another process may have revoked one)."""
        if self._overlay.keys is None:
            return
        for key_id in signers:
            version, state = self._key_cache[key_id]
            if versions.get(principal_id(key_id)) == version:
                self._overlay.keys[key_id] = state

    def _key_cache_forget(self, principals: list[UUID]) -> None:
        gone = set(principals)
        for key_id in [k for k in self._key_cache if principal_id(k) in gone]:
            del self._key_cache[key_id]

    def _load_key_state(self, key_id: str) -> KeyState | None:
        state = fold_key_events(key_id, self.stored_records(principal_id(key_id)))
        if state is not None and self._overlay.aggregates is not None:
            if len(self._key_cache) >= KEY_CACHE_SIZE:
                self._key_cache.clear()
            self._key_cache[key_id] = (state.version, state)
        return state

    def stored_states(self, event_class: type[Any]) -> Iterator[dict[str, Any]]:
        """The decoded stored fields of every event of one class, in ledger order."""
        topic = topic_of(event_class.__qualname__)
        start = 1
        while True:
            batch = self.recorder.select_notifications(start, 1000, topics=[topic])
            for notification in batch:
                try:
                    yield json.loads(notification.state)
                except ValueError:
                    continue  # unreadable records are reported by history/audit, not here
            if len(batch) < 1000:
                return
            start = batch[-1].id + 1

    def run_index(self) -> Iterator[tuple[str, str]]:
        """(run digest, run name) of every ingested run, in ledger order."""
        for state in self.stored_states(Run.Ingested):
            yield str(state.get("run_digest")), str(state.get("run_name"))

    def key_ids(self) -> list[str]:
        return [str(state.get("key_id")) for state in self.stored_states(Principal.Registered)]

    def registered_keys(self, after: int = 0, limit: int = 100) -> list[tuple[int, str]]:
        """(position, key id) of the key registrations after log position ``after``, at most
        ``limit``, in log order: a page of keys (anyone may register attester keys)."""
        batch = self.recorder.select_notifications(
            after + 1, limit, topics=[topic_of("Principal.Registered")]
        )
        found = []
        for notification in batch:
            try:
                found.append((int(notification.id), str(json.loads(notification.state)["key_id"])))
            except (ValueError, KeyError, TypeError):
                continue  # an unreadable record: history and audit report it
        return found

    def require_run(self, run_digest: str) -> str:
        """``run_digest`` if a run was ingested under it. A raw lookup, not a projection's:
        a damaged record must still be reachable by history and audit. (Prefixes, names and
        external ids are resolved over the views: ``projections.references``.)"""
        full = "sha256:" + run_digest.strip().lower().removeprefix("sha256:")
        if len(full) != 71 or not self.stored_records(run_id(full), version=1):
            raise NotFoundError(f"no run with digest {full}")
        return full
