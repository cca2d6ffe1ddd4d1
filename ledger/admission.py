"""Admission: whether each envelope of a group may be appended, and what it appends.

The order of checks is the one ``ledger.application`` lists; each fails closed with a named
reason and admits nothing. Who may sign what is ``ledger.authority`` (the rule every verifier
uses too); what a run or a key may take next is the aggregate's own command
(``ledger.aggregates``); this module reads the ledger as the group has left it so far, and
calls them in order.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeVar
from uuid import UUID

from eventsourcing.domain import Aggregate
from eventsourcing.persistence import Mapper

from domain import statements as models
from domain.errors import DigestMismatchError, DomainError, ManifestError
from domain.rerun_binding import check_agent_registration
from domain.run_facts import comparison_key_of
from domain.statements import KeyAction, LifecycleAction, PredicateType
from ledger.admission_cache import GroupState, KeyCache, RunCache
from ledger.admission_checks import Checked, check_stateless
from ledger.admission_lookups import AdmissionLookups
from ledger.admission_types import Admitted, AdmittedGroup, _signed, _unprocessable
from ledger.aggregates import Principal, Run, Signed, principal_id, run_id
from ledger.authority import (
    Authorization,
    LogPoint,
    authorize,
    check_key_statement,
    check_timely,
    quantize,
    signed_or_vouched,
)
from ledger.authority.job_code import check_job_code
from ledger.authority.key_book import check_device
from ledger.authority.signers import BAD_SIGNATURE
from ledger.errors import (
    AlreadyExistsError,
    SubjectMismatchError,
    UnknownKeyError,
    UnknownRunError,
    is_store_failure,
)
from ledger.logged_event import LoggedEvent
from ledger.signing.dsse import Envelope, SignatureError
from ledger.signing.trust import TrustRoot
from ledger.signing.verdict import SignatureVerdict
from ledger.store.artifacts import ArtifactStore
from ledger.store.event_store import EventStore
from ledger.store.stored_events import stored_versions
from ledger.timing import Stage, timed

if TYPE_CHECKING:
    # Models made on first use (a read never makes them); values: ``models.X``.
    from domain.statements import (
        AttachmentPredicate,
        KeyPredicate,
        LifecyclePredicate,
        RerunClaimPredicate,
        RerunPredicate,
        RerunRequestPredicate,
        SignedPredicate,
        Statement,
    )

# Admitted and AdmittedGroup live in ledger.admission_types; importers take them from here.
__all__ = ["KEY_CACHE_SIZE", "Admission", "Admitted", "AdmittedGroup", "Outcome"]

KEY_CACHE_SIZE = 10_000
_ONE_MS = timedelta(milliseconds=1)
P = TypeVar("P", bound="SignedPredicate")
Outcome = LoggedEvent | Run | Principal  # a duplicate's receipt, or an aggregate to store

_log = logging.getLogger(__name__)


class Admission(AdmissionLookups):
    def __init__(
        self,
        store: EventStore,
        mapper: Mapper[UUID],
        trust_root: TrustRoot,
        clock: Callable[[], datetime],
        cache_size: int,
        before_group: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        # Called first in each group's read transaction (the ledger checks there that its
        # caches still describe the database: ``Ledger._watch_log``).
        self._before_group = before_group
        self.mapper = mapper
        self.trust_root = trust_root
        self.clock = clock
        self._group = GroupState()
        self._runs = RunCache(cache_size)
        self._keys = KeyCache(KEY_CACHE_SIZE)
        self._last_received: datetime | None = None
        # Each statement type's rule, built once (not per envelope).
        self._rules: dict[PredicateType, Callable[[Checked], Outcome]] = {
            PredicateType.INGESTION: self._ingestion,
            PredicateType.ATTESTATION: self._attestation,
            PredicateType.KEY: self._key,
            PredicateType.LIFECYCLE: self._lifecycle,
            PredicateType.RERUN_REQUEST: self._rerun_request,
            PredicateType.RERUN: self._rerun,
            PredicateType.RERUN_CLAIM: self._rerun_claim,
            PredicateType.ATTACHMENT: self._attachment,
        }

    # ------------------------------------------------------------- a group

    def admit(self, envelopes: Sequence[object]) -> AdmittedGroup:
        """Admit envelopes in order, each seeing the effect of those before it. Each is the
        JSON value received, an ``Envelope`` the edge already parsed, or a ``Checked`` one (a
        server's worker ran the stateless checks: ``ledger.admission_checks``)."""
        parsed: list[Checked | DomainError] = []
        for raw in envelopes:
            try:
                parsed.append(check_stateless(raw))
            except DomainError as exc:
                parsed.append(exc)
            except Exception as exc:  # reading one envelope touches no state
                # A failure of ours to read what someone sent is that envelope's refusal
                # alone: nothing sent into a group may make the others fail with it. It is
                # a bug all the same: logged, with its traceback, for whoever runs the ledger.
                _log.exception("could not read an envelope; it is refused, its group goes on")
                parsed.append(_unprocessable("read", exc))
        # Every read of the group (versions, runs, keys) in one transaction: each costs a
        # session of its own otherwise.
        with self.store.transaction(commit=False):
            if self._before_group is not None:
                self._before_group()
            return self._admit_parsed(parsed)

    def _admit_parsed(self, parsed: list[Checked | DomainError]) -> AdmittedGroup:
        out = AdmittedGroup()
        admitted_digests: dict[str, int] = {}
        group = self._group
        group.begin()
        assert group.aggregates is not None and group.signers is not None
        assert group.groups is not None
        out.touched, out.groups = group.aggregates, group.groups
        try:
            # One query for the stored versions of every run the group is about and every
            # signer key read before: what is unchanged is reused, not reloaded.
            self._read_versions(group, [p for p in parsed if not isinstance(p, DomainError)])
            for item in parsed:
                if isinstance(item, DomainError):
                    out.results.append(item)
                    continue
                envelope, statement = item.envelope, item.statement
                group.fetched = []
                try:
                    if envelope.signed_digest in admitted_digests:  # sent twice in a group
                        first = admitted_digests[envelope.signed_digest]
                        self._check_resubmission(envelope, envelope.keyid, item.verdict)
                        out.results.append(Admitted(first, statement, True))
                        continue
                    outcome = self._admit(item)
                except DomainError as exc:
                    self._undo(group.fetched, out)
                    out.results.append(exc)
                    continue
                except Exception as exc:
                    if isinstance(exc, MemoryError) or is_store_failure(exc):
                        raise  # the database's failure, or ours: not this envelope's
                    # Judging what someone sent failed in a way no rule names: that
                    # envelope's refusal alone (nothing sent into a group may make the
                    # others fail with it), and a bug, logged for whoever runs the ledger.
                    # Where it failed is unknown (inside an event's apply, say), so every
                    # aggregate the envelope looked up is taken for changed.
                    self._undo(group.fetched, out, unknown=True)
                    _log.exception("could not judge an envelope; it is refused, its group goes on")
                    out.results.append(_unprocessable("judge", exc))
                    continue
                if isinstance(outcome, LoggedEvent):
                    out.results.append(outcome)
                    continue
                out.touched[outcome.id] = outcome
                admitted_digests[envelope.signed_digest] = len(out.events)
                out.results.append(Admitted(len(out.events), statement, False))
                out.parsed.append(envelope)
                out.events.extend(outcome.collect_events())
            out.signers = {p: v for p, v in group.signers.items() if p not in out.touched}
        except BaseException:
            self._runs.forget(out.touched)
            self._runs.forget({a.id: a for a in group.fetched or ()})
            raise
        finally:
            group.end()
        return out

    def _undo(self, fetched: list[Aggregate], out: AdmittedGroup, *, unknown: bool = False) -> None:
        """An envelope was refused: whatever its command did to the aggregates it looked up
        is taken back. A rule that refuses after its command has applied the event (a check
        placed after the effect) must not leave that event to be stored with the next
        envelope about the aggregate, nor its state to be seen by the group's later checks.
        A named refusal changed an aggregate only if it left an event pending; an unforeseen
        failure (``unknown``) may have changed one without (an event's apply that raised
        half-way), so every aggregate looked up is taken for changed."""
        for aggregate in fetched:
            if not (unknown or aggregate.pending_events):  # refused before any effect
                continue
            aggregate.collect_events()  # the refused envelope's events: dropped
            self._runs.forget({aggregate.id: aggregate})  # its state is not the stored one
            if out.touched.get(aggregate.id) is aggregate:
                # Earlier envelopes of the group changed it: as stored when the group read
                # it (not as stored now: another writer may have appended since, and the
                # group's commit will conflict and be admitted again), then their events.
                ours = [e for e in out.events if e.originator_id == aggregate.id]
                again = self._replay(aggregate.id, below=ours[0].originator_version)
                for event in ours:
                    again = event.mutate(again)
                assert again is not None
                out.touched[aggregate.id] = again
            if not unknown:
                _log.error(
                    "a refusal came after %s's command had applied its event; it was taken back",
                    aggregate.id,
                )

    @timed(Stage.KEYS)
    def _read_versions(self, group: GroupState, parsed: list[Checked]) -> None:
        named = {c.envelope.keyid for c in parsed}
        cached = self._keys.known(named)
        runs = {run_id(c.statement.subject_digest) for c in parsed}
        versions = stored_versions(self.store, runs | {principal_id(k) for k in cached})
        group.read_versions(runs, versions)
        group.keys = dict(self._keys.unchanged(cached, versions))

    def stored(self, group: AdmittedGroup) -> None:
        """The group is committed: its runs are the stored state now."""
        self._runs.remember(group.touched)

    def abandoned(self, group: AdmittedGroup) -> None:
        """The group was not stored: what it changed was never the stored state."""
        self._runs.forget(group.touched)

    def signers_changed(self, principals: list[UUID]) -> None:
        self._keys.forget(principals)

    def forget_everything(self) -> None:
        """Drop every cached run and key: the database is not what they were read from."""
        self._runs.clear()
        self._keys.clear()

    # -------------------------------------------------------- the rules

    def _admit(self, c: Checked) -> Outcome:
        handler = self._rules.get(c.statement.predicateType)
        if handler is None:
            raise ManifestError(f"predicate type {c.statement.predicateType} is not accepted yet")
        return handler(c)

    def _ingestion(self, c: Checked) -> Outcome:
        envelope, statement = c.envelope, c.statement
        existing = self.get(Run, run_id(statement.subject_digest))
        if existing is not None and envelope.signed_digest in existing.envelopes:
            return self._duplicate(existing, c)
        predicate = c.parsed_predicate()  # each stateless result taken at its old step
        assert isinstance(predicate, models.IngestionPredicate)
        now = self._received_now()
        signer = self._authorize(c, predicate, now)
        checked = c.checked_run()
        if existing is not None:
            raise AlreadyExistsError(
                f"run {checked.run_digest} was already ingested at {existing.ingested_at}",
                position=self._position(existing.id, 1),
            )
        run = Run.ingest(
            _signed(envelope, now, signer.signer),
            run_digest=checked.run_digest,
            run_name=checked.run_name,
        )
        # Only an admitted ingestion says which group its run joins (a refused one in the
        # same group of writes must not: the group index would disagree with the log), so
        # this is the last step, after everything that may refuse it.
        group = comparison_key_of(statement.predicate["manifests"])
        if group is not None:
            self._group.join_group(checked.run_digest, group, 1)
        return run

    def _about_run(
        self, c: Checked, model: type[P], command: Callable[[Run, Signed, P, datetime], None]
    ) -> Outcome:
        """A statement about an ingested run: the run exists, a duplicate returns its
        receipt, the predicate parses, the signer may say it; then the run's own command
        (``ledger.aggregates``) decides whether the run may take it now."""
        run = self._existing_run(c.statement)
        if c.envelope.signed_digest in run.envelopes:
            return self._duplicate(run, c)
        predicate = c.parsed_predicate()
        assert isinstance(predicate, model)
        now = self._received_now()
        signer = self._authorize(c, predicate, now)
        command(run, _signed(c.envelope, now, signer.signer), predicate, now)
        return run

    def _attestation(self, c: Checked) -> Outcome:
        return self._about_run(
            c, models.AttestationPredicate, lambda run, signed, _, __: run.attest(signed)
        )

    def _attachment(self, c: Checked) -> Outcome:
        def attach(run: Run, signed: Signed, _: AttachmentPredicate, __: datetime) -> None:
            had = comparison_key_of(run.manifests())
            checked = run.attach(signed, c.statement.predicate["manifests"])
            group = comparison_key_of(checked.documents)
            # A run joins a comparison group when its workload arrives (it had none before).
            if had is None and group is not None:
                self._group.join_group(run.run_digest, group, run.version)

        return self._about_run(c, models.AttachmentPredicate, attach)

    def _lifecycle(self, c: Checked) -> Outcome:
        def change(run: Run, signed: Signed, predicate: LifecyclePredicate, _: datetime) -> None:
            if predicate.action is LifecycleAction.RETRACT:
                run.retract(signed)
            else:
                run.supersede(signed, superseded_by=predicate.supersededBy)

        return self._about_run(c, models.LifecyclePredicate, change)

    def _rerun_request(self, c: Checked) -> Outcome:
        def request(run: Run, signed: Signed, job: RerunRequestPredicate, now: datetime) -> None:
            # The job measures the run's own code, held here (domain.rerun_binding): the
            # workload's bytes are checked too, since no digest covers its reference.
            store = ArtifactStore(self.store)
            check_job_code(
                run.manifests(),
                job.artifactDigest,
                job.workloadDigest,
                store.has,
                lambda digest: store.get(digest).content if store.has(digest) else None,
            )
            run.request_rerun(signed, job, now)

        return self._about_run(c, models.RerunRequestPredicate, request)

    def _rerun(self, c: Checked) -> Outcome:
        def record(run: Run, signed: Signed, result: RerunPredicate, now: datetime) -> None:
            measured = result.environment
            self._check_device(
                signed.signer, measured.product, measured.architecture, measured.backend
            )
            run.record_rerun(signed, result, now)

        return self._about_run(c, models.RerunPredicate, record)

    def _rerun_claim(self, c: Checked) -> Outcome:
        def claim(run: Run, signed: Signed, predicate: RerunClaimPredicate, now: datetime) -> None:
            check_timely(c.statement, predicate, now)
            device = predicate.device
            self._check_device(signed.signer, device.product, device.architecture, device.backend)
            run.claim_rerun(signed, predicate, now)

        return self._about_run(c, models.RerunClaimPredicate, claim)

    def _key(self, c: Checked) -> Outcome:
        envelope, statement = c.envelope, c.statement
        existing = self.get(Principal, principal_id(statement.subject_name))
        if existing is not None and envelope.signed_digest in existing.envelopes:
            return self._duplicate(existing, c)
        predicate = c.parsed_predicate()
        assert isinstance(predicate, models.KeyPredicate)
        now = self._received_now(after_everything=predicate.action is KeyAction.REVOKE)
        check_key_statement(statement, predicate, LogPoint(None, now), signer=envelope.keyid)
        if predicate.action is KeyAction.REGISTER:
            return self._register_key(c, predicate, existing, now)
        if existing is None:
            raise UnknownKeyError(f"key {predicate.keyId} is not registered")
        if existing.public_key != predicate.publicKey:
            raise DigestMismatchError("publicKey differs from the registered key")
        # The key itself (on compromise) or an admin key.
        signer = self._authorize(c, predicate, now)
        existing.revoke(_signed(envelope, now, signer.signer), reason=predicate.reason)
        return existing

    def _register_key(
        self, c: Checked, predicate: KeyPredicate, existing: Principal | None, now: datetime
    ) -> Outcome:
        assert predicate.roles is not None and predicate.validFrom is not None
        check_agent_registration(predicate)
        signer = self._authorize(c, predicate, now)
        if existing is not None:
            raise AlreadyExistsError(
                f"key {predicate.keyId} is already registered (at {existing.registered_at}); "
                "keys are registered once: revoke it and register a new key to change roles",
                position=self._position(existing.id, 1),
            )
        return Principal.register(
            _signed(c.envelope, now, signer.signer),
            key_id=predicate.keyId,
            public_key=predicate.publicKey,
            roles=[str(r) for r in predicate.roles],
            valid_from=predicate.validFrom,
            valid_until=predicate.validUntil,
            label=predicate.label,
        )

    # -------------------------------------------------------- shared steps

    def _check_device(self, signer: str, product: str, architecture: str, backend: str) -> None:
        """The agent key (authorised already) is registered for this device."""
        state = self.key_state(signer)
        assert state is not None  # _authorize found it
        check_device(state, product, architecture, backend)

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

    @timed(Stage.AUTHORIZE)
    def _authorize(self, c: Checked, predicate: SignedPredicate, now: datetime) -> Authorization:
        """Who signed, and may they say this now (``ledger.authority``). A stored key that
        authorises the envelope is remembered, to be read again under the log's lock."""
        auth = authorize(
            c.envelope,
            c.statement,
            predicate,
            keys=self.key_state,
            trust_root=self.trust_root,
            at=LogPoint(None, now),
            verdict=c.verdict,
        )
        signers, pending = self._group.signers, self._group.aggregates
        if auth.key is not None and signers is not None and pending is not None:
            pid = principal_id(auth.signer)
            if pid not in pending:
                signers[pid] = auth.key.version
        return auth

    def _check_resubmission(
        self, envelope: Envelope, signer: str, verdict: SignatureVerdict | None
    ) -> None:
        """A statement stored already, sent again: it is the same event only if it carries
        its signer's own signature (not a copy of the statement under a made-up one)."""
        state = self.key_state(signer)
        if (
            envelope.keyid != signer
            or state is None
            or not signed_or_vouched(envelope, state.public_key, verdict)
        ):
            raise SignatureError(BAD_SIGNATURE)

    def _existing_run(self, statement: Statement) -> Run:
        run = self.get(Run, run_id(statement.subject_digest))
        if run is None:
            raise UnknownRunError(f"no run with digest {statement.subject_digest} is in the ledger")
        if statement.subject_name != run.run_name:
            raise SubjectMismatchError(
                f"statement subject name {statement.subject_name!r} is not the run's name "
                f"{run.run_name!r}"
            )
        return run

    def _duplicate(self, aggregate: Run | Principal, c: Checked) -> LoggedEvent:
        envelope, statement = c.envelope, c.statement
        version = aggregate.envelopes[envelope.signed_digest]
        record = self._record_at(aggregate.id, version)
        state = json.loads(record.state)
        self._check_resubmission(envelope, str(state.get("signer", "")), c.verdict)
        return LoggedEvent(
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
