"""Event-sourced aggregates: a Run per run digest, a Principal per key id.

Every event stores the DSSE envelope exactly as the actor signed it, the time the ledger
received it and the key id whose signature the ledger accepted. Anything else an aggregate
knows is derived from those envelopes at admission, so a stored event can always be
re-verified from what it carries.

Each aggregate indexes its events by *signed digest* (what was signed, and by which key:
``ledger.signing.dsse.signed_digest``), so a statement resubmitted in another envelope is recognised
as the event it already is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import msgspec
from eventsourcing.domain import Aggregate
from eventsourcing.utils import get_topic

from domain.manifests.manifest_set import CheckedManifestSet, attach_manifests, with_attached
from domain.rerun_binding import device_classes
from domain.timestamps import format_time, parse_time
from ledger.errors import AlreadyExistsError, RerunJobError, SubjectMismatchError
from ledger.ids import STATE_EVENTS, STATE_TOPICS, principal_id, run_id, topic_of
from ledger.run_manifests import MANIFEST_TOPICS, run_manifests
from ledger.signing.dsse import stored_signed_digest, stored_statement

if TYPE_CHECKING:
    # The statement models are made on first use (domain.statements): a process that
    # reads without checking a statement (a read command) never makes them.
    # Where a model is needed as a value, the function that needs it imports it.
    from domain.statements import RerunClaimPredicate, RerunPredicate, RerunRequestPredicate

__all__ = [
    "MANIFEST_TOPICS",
    "STATE_EVENTS",
    "STATE_TOPICS",
    "Principal",
    "RerunJob",
    "Run",
    "Signed",
    "principal_id",
    "run_id",
    "topic_of",
]


_new_event = object.__new__  # an event made without its dataclass ``__init__`` (``Run.ingest``)


class Signed(msgspec.Struct, frozen=True):
    """What every event records about the envelope it was admitted from. (A Struct: made
    once per admitted envelope, ~13× cheaper than a frozen dataclass.)"""

    envelope: dict[str, Any]
    envelope_digest: str
    received_at: str
    signer: str

    def fields(self) -> dict[str, Any]:
        return {
            "envelope": self.envelope,
            "envelope_digest": self.envelope_digest,
            "received_at": self.received_at,
            "signer": self.signer,
        }


class SignedEvent(Aggregate.Event):
    """An event after the first: remembers its envelope (for idempotency), then applies."""

    envelope: dict[str, Any]
    envelope_digest: str
    received_at: str
    signer: str

    def apply(self, aggregate: Aggregate) -> None:
        # The envelope is indexed once the event has applied: an apply that fails leaves
        # no entry to answer a later resubmission as a duplicate of an event never stored.
        self.apply_to(aggregate)
        envelopes: dict[str, int] = aggregate.envelopes  # type: ignore[attr-defined]
        envelopes[stored_signed_digest(self.envelope)] = self.originator_version

    def apply_to(self, aggregate: Any) -> None:
        """What the event changes beyond the envelope index."""


class RerunJob(NamedTuple):
    """A requested rerun: what the result must match, and its result once recorded."""

    nonce: str
    expires_at: str
    product: str
    architecture: str
    result_version: int | None
    claimant: str | None = None  # the agent key holding the job, while its lease lasts
    lease_until: str | None = None
    # The device the claimant said it measures on: (product, architecture, gpuUuidHash,
    # backend). A result must come from exactly that device.
    device: tuple[str, str, str, str] | None = None


class HoldsRunState(Protocol):
    """What a run's state events change (``Run``, or ``RunState``: a reader folding them
    without the run's attestations)."""

    attached: dict[str, Any]
    retracted: bool
    superseded_by: str | None
    jobs: dict[str, RerunJob]


class Run(Aggregate):
    """One benchmark run: its ingestion and everything appended about it afterwards."""

    class Ingested(Aggregate.Created):
        envelope: dict[str, Any]
        envelope_digest: str
        received_at: str
        signer: str
        run_digest: str
        run_name: str

    class Attested(SignedEvent):
        def apply_to(self, aggregate: Run) -> None:
            aggregate.attestation_count += 1

    class Retracted(SignedEvent):
        def apply_to(self, aggregate: HoldsRunState) -> None:
            aggregate.retracted = True

    class Superseded(SignedEvent):
        superseded_by: str | None

        def apply_to(self, aggregate: HoldsRunState) -> None:
            aggregate.superseded_by = self.superseded_by or "unspecified"

    class ManifestsAttached(SignedEvent):
        run_digest: str
        roles: list[str]

        def apply_to(self, aggregate: HoldsRunState) -> None:
            aggregate.attached.update(self.manifests())

        def manifests(self) -> dict[str, Any]:
            """The manifests this event attached, by role."""
            attached = stored_statement(self.envelope)["predicate"]["manifests"]
            return {r: attached[r] for r in self.roles}

    class RerunRequested(SignedEvent):
        job_id: str
        nonce: str
        expires_at: str
        product: str
        architecture: str

        def apply_to(self, aggregate: HoldsRunState) -> None:
            aggregate.jobs[self.job_id] = RerunJob(
                self.nonce, self.expires_at, self.product, self.architecture, None
            )

    class RerunClaimed(SignedEvent):
        job_id: str
        lease_until: str

        def apply_to(self, aggregate: HoldsRunState) -> None:
            job = aggregate.jobs[self.job_id]
            device = stored_statement(self.envelope)["predicate"]["device"]
            aggregate.jobs[self.job_id] = job._replace(
                claimant=self.signer,
                lease_until=self.lease_until,
                device=(
                    str(device["product"]),
                    str(device["architecture"]),
                    str(device["gpuUuidHash"]),
                    str(device["backend"]),
                ),
            )

    class RerunRecorded(SignedEvent):
        job_id: str

        def apply_to(self, aggregate: HoldsRunState) -> None:
            job = aggregate.jobs[self.job_id]
            aggregate.jobs[self.job_id] = job._replace(result_version=self.originator_version)

    def __init__(
        self,
        envelope: dict[str, Any],
        envelope_digest: str,
        received_at: str,
        signer: str,
        run_digest: str,
        run_name: str,
    ) -> None:
        self.run_digest = run_digest
        self.run_name = run_name
        self.ingested_at = received_at
        self.envelopes: dict[str, int] = {stored_signed_digest(envelope): 1}
        self._ingestion = envelope  # decoded only when a manifest is attached (rare)
        self.attached: dict[str, Any] = {}
        self.attestation_count = 0
        self.retracted = False
        self.superseded_by: str | None = None
        self.jobs: dict[str, RerunJob] = {}

    @classmethod
    def ingest(cls, signed: Signed, *, run_digest: str, run_name: str) -> Run:
        """A new run and its one pending ``Ingested`` event: what ``Aggregate._create`` makes
        (the same event, the same run), by its steps for this one event class only. Its
        generic ones (a topic check, id and keyword filtering, resolving the class from its
        topic) cost ~5 µs an ingestion in the writer; ``tests/ledger/test_aggregate_fast_paths``
        holds both roads to the same event, stored bytes and run."""
        # The event's fields set as its dataclass ``__init__`` sets them, in its field order
        # (the order its state is stored in), without that ``__init__``: a frozen dataclass
        # sets each of its ten fields through ``object.__setattr__`` (~3 µs an ingestion).
        # Its ``__post_init__`` only checks that the id is a UUID, which ``run_id`` makes.
        event = _new_event(cls.Ingested)
        vars(event).update(
            {
                "originator_id": run_id(run_digest),
                "originator_version": cls.INITIAL_VERSION,
                "timestamp": cls.Ingested.create_timestamp(),
                "originator_topic": get_topic(cls),  # a dict lookup: eventsourcing caches it
                "envelope": signed.envelope,
                "envelope_digest": signed.envelope_digest,
                "received_at": signed.received_at,
                "signer": signed.signer,
                "run_digest": run_digest,
                "run_name": run_name,
            }
        )
        run = cls.__new__(cls)
        run.__base_init__(event.originator_id, event.originator_version, event.timestamp)
        cls.__init__(
            run,
            signed.envelope,
            signed.envelope_digest,
            signed.received_at,
            signed.signer,
            run_digest,
            run_name,
        )
        event.apply(run)
        run.pending_events.append(event)
        return run

    def manifests(self) -> dict[str, Any]:
        """The run's manifests: those it was ingested with and those attached since."""
        return run_manifests(self._ingestion, self.attached)

    def attach(self, signed: Signed, attached: Mapping[str, Any]) -> CheckedManifestSet:
        """Add manifests the run names by digest and lacks (``attach_manifests``); evidence
        and rank inputs other than the comparison key do not change."""
        members = with_attached({}, attached)
        current = self.manifests()  # decoded once
        present = sorted(r for r in members if r in current)
        if present:
            raise AlreadyExistsError(
                f"run {self.run_digest} already has its {' and '.join(present)} manifest"
            )
        checked = attach_manifests(current, members)
        self.trigger_event(
            self.ManifestsAttached,
            **signed.fields(),
            run_digest=self.run_digest,
            roles=sorted(members),
        )
        return checked

    # The commands below hold the run's rules: each checks that the run may take the event
    # now, then triggers it. (Replaying stored events runs ``apply_to`` only, never these.)

    def attest(self, signed: Signed) -> None:
        self.trigger_event(self.Attested, **signed.fields())

    def retract(self, signed: Signed) -> None:
        if self.retracted:
            raise AlreadyExistsError(f"run {self.run_digest} is already retracted")
        self.trigger_event(self.Retracted, **signed.fields())

    def supersede(self, signed: Signed, *, superseded_by: str | None) -> None:
        if self.superseded_by is not None:
            raise AlreadyExistsError(f"run {self.run_digest} is already superseded")
        if superseded_by == self.run_digest:
            raise SubjectMismatchError("a run cannot supersede itself")
        self.trigger_event(self.Superseded, **signed.fields(), superseded_by=superseded_by)

    def request_rerun(self, signed: Signed, job: RerunRequestPredicate, now: datetime) -> None:
        """A new job for this run, open until it expires."""
        self._about_this_run(job.runDigest)
        if job.jobId in self.jobs:
            raise AlreadyExistsError(f"job {job.jobId} already exists for this run")
        if parse_time(job.expiresAt, "predicate.expiresAt") <= now:
            raise RerunJobError("the job would already be expired")
        self.trigger_event(
            self.RerunRequested,
            **signed.fields(),
            job_id=job.jobId,
            nonce=job.nonce,
            expires_at=job.expiresAt,
            product=job.requirements.product,
            architecture=job.requirements.architecture,
        )

    def claim_rerun(self, signed: Signed, claim: RerunClaimPredicate, now: datetime) -> None:
        """An agent takes an open job: not expired, no result yet, nobody else's lease
        running, on the hardware the job requires. The same agent may renew its lease."""
        self._about_this_run(claim.runDigest)
        job = self._open_job(claim.jobId, now, "")
        device = claim.device
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
                f"job {claim.jobId} is claimed by {job.claimant} until {job.lease_until}"
            )
        lease_until = min(now + timedelta(seconds=claim.leaseSeconds), parse_time(job.expires_at))
        self.trigger_event(
            self.RerunClaimed,
            **signed.fields(),
            job_id=claim.jobId,
            lease_until=format_time(lease_until),
        )

    def record_rerun(self, signed: Signed, result: RerunPredicate, now: datetime) -> None:
        """An agent's result: only for an open job of this run, with its nonce, before it
        expires, from its claimant, measured on the device the claim named, once."""
        job = self._open_job(result.jobId, now, " (replay?)")
        if job.claimant != signed.signer:
            holder = job.claimant or "nobody"
            raise RerunJobError(
                f"only the job's claimant may post its result; job {result.jobId} is "
                f"claimed by {holder}"
            )
        if result.nonce != job.nonce:
            raise RerunJobError("the result's nonce is not the job's")
        measured = result.environment
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
        self.trigger_event(self.RerunRecorded, **signed.fields(), job_id=result.jobId)

    def _about_this_run(self, run_digest: str) -> None:
        if run_digest != self.run_digest:
            raise SubjectMismatchError("predicate.runDigest is not the statement's subject")

    def _open_job(self, job_id: str, now: datetime, replay_hint: str) -> RerunJob:
        job = self.jobs.get(job_id)
        if job is None:
            raise RerunJobError(f"no rerun job {job_id} was requested for this run")
        if job.result_version is not None:
            raise RerunJobError(f"job {job_id} already has its result{replay_hint}")
        if now > parse_time(job.expires_at):
            raise RerunJobError(f"job {job_id} expired at {job.expires_at}")
        return job


class Principal(Aggregate):
    """A signing key: its roles, validity window and revocation."""

    class Registered(Aggregate.Created):
        envelope: dict[str, Any]
        envelope_digest: str
        received_at: str
        signer: str
        key_id: str
        public_key: str
        roles: list[str]
        valid_from: str
        valid_until: str | None
        label: str | None

    class Revoked(SignedEvent):
        reason: str | None

        def apply_to(self, aggregate: Principal) -> None:
            aggregate.revoked_at = self.received_at
            aggregate.revocation_reason = self.reason

    def __init__(  # noqa: PLR0913 - one parameter per field of the Registered event
        self,
        envelope: dict[str, Any],
        envelope_digest: str,
        received_at: str,
        signer: str,
        key_id: str,
        public_key: str,
        roles: list[str],
        valid_from: str,
        valid_until: str | None,
        label: str | None,
    ) -> None:
        self.key_id = key_id
        self.public_key = public_key
        self.roles = list(roles)
        self.valid_from = valid_from
        self.valid_until = valid_until
        self.label = label
        self.registered_at = received_at
        self.registered_by = signer
        self.envelopes: dict[str, int] = {stored_signed_digest(envelope): 1}
        self.revoked_at: str | None = None
        self.revocation_reason: str | None = None
        # Read from the signed registration (the event stores no copy: older events read alike).
        self.devices = device_classes(stored_statement(envelope)["predicate"].get("devices"))

    @classmethod
    def register(
        cls,
        signed: Signed,
        *,
        key_id: str,
        public_key: str,
        roles: list[str],
        valid_from: str,
        valid_until: str | None,
        label: str | None,
    ) -> Principal:
        return cls._create(
            cls.Registered,
            id=principal_id(key_id),
            **signed.fields(),
            key_id=key_id,
            public_key=public_key,
            roles=list(roles),
            valid_from=valid_from,
            valid_until=valid_until,
            label=label,
        )

    def revoke(self, signed: Signed, *, reason: str | None) -> None:
        if self.revoked_at is not None:
            raise AlreadyExistsError(f"key {self.key_id} was already revoked at {self.revoked_at}")
        self.trigger_event(self.Revoked, **signed.fields(), reason=reason)


@dataclass
class RunState:
    """What a run is, without its attestations: folded from its state events
    (``STATE_EVENTS``) by the events' own rules (``HoldsRunState``), for readers that need
    its name, manifests, lifecycle or jobs (``Ledger.run_state``). A run flooded with notes
    reads as fast as any."""

    run_digest: str
    run_name: str
    ingestion: dict[str, Any]  # the ingestion's envelope: its manifests, decoded on demand
    attached: dict[str, Any] = field(default_factory=dict)
    retracted: bool = False
    superseded_by: str | None = None
    jobs: dict[str, RerunJob] = field(default_factory=dict)

    def manifests(self) -> dict[str, Any]:
        """The run's manifests, as ``Run.manifests`` gives them."""
        return run_manifests(self.ingestion, self.attached)
