"""From signed statements to the facts the evidence and ranking policies read.

Pure: takes decoded predicates (as the ledger stored them) and returns policy inputs. The
projections, the exporter's claims and the offline verifier all use these, so a claim is
recomputed from events with exactly the code that made it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgspec

from domain.comparison import (
    MAPPINGS,
    NO_MEASUREMENT,
    ComparisonKeyError,
    PrimaryMeasurement,
    comparison_key,
    readable_primary,
)
from domain.errors import DomainError
from domain.event_names import EventName
from domain.evidence import (
    AttestationFacts,
    EvidenceResult,
    EvidenceState,
    IngestionFacts,
    LifecycleFacts,
    RerunFacts,
    ingestion_facts_from_manifests,
)
from domain.manifests.manifest_set import attach_manifests
from domain.ranking import RankEntry, verified_value
from domain.rerun_binding import DeviceClass, counts_for_evidence, job_code_problem
from domain.statements import MEASURING_BACKENDS


class RunProfile(msgspec.Struct, frozen=True):
    """What a leaderboard shows about a run, read from its ingestion statement."""

    run_digest: str
    name: str
    title: str | None
    source: str
    external_id: str | None
    benchmark: str | None
    status: str
    comparison_key: str | None
    metric: str
    statistic: str | None
    unit: str | None
    claimed: float | None
    product: str | None
    architecture: str | None
    observed_at: str | None
    # What a comparison key is made of, by digest: what tells two groups apart.
    protocol_digest: str | None = None
    environment_digest: str | None = None
    workload_digest: str | None = None
    # Who the run is by, as its implementation manifest says (when the run carries one).
    author: str | None = None
    # The implementation it ran, by digest (held or not): its terms (license, install) are
    # read from the manifest the views hold under it (``domain.implementation_terms``).
    implementation_digest: str | None = None


def comparison_key_of(
    manifests: Mapping[str, Any], *, primary: PrimaryMeasurement | None = None
) -> str | None:
    """A run's comparison key from its (admitted) ingestion manifests, or None when the
    workload manifest was not supplied: the one definition the ledger's group index, the
    projections and the offline verifier share. ``primary``: the run's primary measurement,
    when the caller has read it already."""
    workload = manifests.get("workload")
    # A run without a workload manifest (most) is answered before the Mapping ABC is asked.
    if workload is None or not isinstance(workload, MAPPINGS):
        return None
    try:
        # The ledger validated every manifest at admission.
        return comparison_key(manifests["run"], workload, trusted=True, primary=primary)
    except (ComparisonKeyError, DomainError):
        return None


def ingestion_profile(run_digest: str, predicate: Mapping[str, Any]) -> RunProfile:
    return _profile(run_digest, predicate)[0]


def _profile(
    run_digest: str, predicate: Mapping[str, Any]
) -> tuple[RunProfile, PrimaryMeasurement]:
    """The profile, and the primary measurement it was read with (the evidence facts read
    the same one)."""
    manifests = predicate["manifests"]
    run = manifests["run"]
    spec = run.get("spec", {})
    native = spec.get("sourceNative") or {}
    hardware = (manifests.get("environment") or {}).get("spec", {}).get("hardware", {})
    primary = readable_primary(run)
    metadata = run.get("metadata", {})
    # Positional, in the fields' order (``tests/projections/test_fold_rows.py`` holds it):
    # msgspec matches keywords to fields one at a time, ~4x this call's cost for 20 fields.
    profile = RunProfile(
        run_digest,
        str(metadata.get("name")),  # name
        metadata.get("title"),  # title
        str(predicate.get("source")),  # source
        predicate.get("externalId"),  # external_id
        native.get("benchmark"),  # benchmark
        str(spec.get("status")),  # status
        # comparison_key. Without a measurement, the key reads it again: a run whose claim
        # does not read has no group, as the ledger's group index said when it was admitted.
        comparison_key_of(manifests, primary=None if primary is NO_MEASUREMENT else primary),
        primary.metric,  # metric
        primary.statistic,  # statistic
        primary.unit,  # unit
        float(primary.value) if primary.value is not None else None,  # claimed
        hardware.get("product"),  # product
        hardware.get("architecture"),  # architecture
        spec.get("observedAt"),  # observed_at
        spec.get("protocolDigest"),  # protocol_digest
        spec.get("environmentDigest"),  # environment_digest
        spec.get("workloadDigest"),  # workload_digest
        _author(manifests.get("implementation")),  # author
        spec.get("implementationDigest"),  # implementation_digest
    )
    return profile, primary


def _author(implementation: Any) -> str | None:
    """The implementation's authors as its manifest names them (``metadata.authors``)."""
    # None (most runs carry no implementation) answered before the Mapping ABC is asked.
    if implementation is None or not isinstance(implementation, MAPPINGS):
        return None
    authors = (implementation.get("metadata") or {}).get("authors")
    if not isinstance(authors, list):
        return None
    names = [str(a.get("name")) for a in authors if isinstance(a, MAPPINGS) and a.get("name")]
    return ", ".join(names) or None


def ingestion_facts(position: int, predicate: Mapping[str, Any]) -> IngestionFacts:
    return _ingestion_facts(position, predicate, None)


def _ingestion_facts(
    position: int, predicate: Mapping[str, Any], primary: PrimaryMeasurement | None
) -> IngestionFacts:
    manifests = predicate["manifests"]
    implementation = manifests.get("implementation")
    # "Pinned source": the implementation's source artifact is named by digest.
    pinned = (
        implementation is not None  # most runs: answered before the Mapping ABC is asked
        and isinstance(implementation, MAPPINGS)
        and bool((implementation.get("spec", {}).get("source") or {}).get("contentDigest"))
    )
    return ingestion_facts_from_manifests(
        position,
        manifests["run"],
        manifests.get("environment") or {},
        has_pinned_source=pinned,
        primary=primary,
    )


def rerun_facts(
    position: int,
    signer: str,
    predicate: Mapping[str, Any],
    *,
    bound: bool,
    signer_devices: Iterable[DeviceClass] | None = None,
) -> RerunFacts:
    """A rerun the ledger admitted (agent-signed, by the job's claimant, for an open job).

    ``bound``: its job measures the run's own code (``domain.rerun_binding``). ``signer_devices``:
    the device classes the signer's key registration names, where the caller reads them (the
    views, and the offline verifier from the bundle's key events); None trusts admission,
    which refused any result whose device is not one of them.
    """
    summary = predicate["summary"]
    environment = predicate["environment"]
    ci95 = summary.get("ci95Ns")
    device = (
        str(environment["product"]),
        str(environment["architecture"]),
        str(environment.get("backend")),
    )
    on_its_devices = signer_devices is None or counts_for_evidence(signer_devices, *device)
    return RerunFacts(
        position=position,
        agent_key_id=signer,
        gpu_uuid_hash=str(environment["gpuUuidHash"]),
        product=str(environment["product"]),
        architecture=str(environment["architecture"]),
        all_cases_correct=bool(summary["allCorrect"]),
        median_ns=summary.get("medianNs") or None,
        ci95_ns=(float(ci95[0]), float(ci95[1])) if ci95 else None,
        # Only a completed measurement by a real GPU backend, for a job bound to the run's
        # code, from a key bound to that GPU, counts; a failed job, a CPU test double or an
        # unbound job is on the record but moves nothing.
        accepted=predicate.get("outcome", "completed") == "completed"
        and environment.get("backend") in MEASURING_BACKENDS
        and bound
        and on_its_devices,
        mean_ns=summary.get("meanNs") or None,
    )


def rerun_samples(predicate: Mapping[str, Any]) -> list[float]:
    return [float(v) for v in (predicate.get("summary", {}).get("samplesNs") or [])]


def verified_standing(
    digest: str,
    state: EvidenceState,
    reruns: dict[int, RerunFacts],
    samples: dict[int, list[float]],
) -> tuple[float | None, tuple[float, float] | None]:
    """Median and bootstrap CI95 of the pooled samples of the reruns that verify the run;
    without samples, the latest verifying rerun's own summary."""
    qualifying = [q.position for q in state.qualifying]
    if not qualifying:
        return None, None
    pooled = [v for pos in qualifying for v in samples.get(pos, [])]
    if pooled:
        return verified_value(pooled, digest)
    latest = reruns[max(qualifying)]
    return latest.median_ns, latest.ci95_ns


def ingestion_fold(
    position: int, run_digest: str, predicate: Mapping[str, Any]
) -> tuple[RunProfile, EvidenceState]:
    """What a run's ingestion alone folds to: its profile and evidence state, as
    :meth:`RunFold.ingested` starts from (a reader that folds no later event, as the views do
    for a run new in a batch, need not build the rest of a :class:`RunFold`)."""
    profile, primary = _profile(run_digest, predicate)
    return profile, EvidenceState.start(_ingestion_facts(position, predicate, primary))


class RunFold(msgspec.Struct):
    """One run folded from its events in order: profile, evidence, lifecycle, verified value.

    The single definition of "what a run's events add up to", used by the projections, by
    the exporter's claims and by the offline verifier.
    """

    profile: RunProfile
    state: EvidenceState
    # The ingestion's predicate with any manifests attached since (the profile's source).
    ingestion: Mapping[str, Any] = msgspec.field(default_factory=dict)
    retracted: bool = False
    superseded_by: str | None = None
    attestations: int = 0
    reruns: dict[int, RerunFacts] = msgspec.field(default_factory=dict)
    samples: dict[int, list[float]] = msgspec.field(default_factory=dict)
    # Each job requested for the run: the code it asks an agent to measure (solution and
    # workload digests) when that is the run's own (``domain.rerun_binding``), else None.
    jobs: dict[str, tuple[str, str] | None] = msgspec.field(default_factory=dict)
    # The code each counted rerun measured, by the rerun's position (a verifier checks the
    # bundle carries it).
    measured: dict[int, tuple[str, str]] = msgspec.field(default_factory=dict)
    # A key id's registered device classes (the views read them from the ledger's keys, the
    # offline verifier from the bundle's key events): a result counts only on one of its
    # key's measuring classes. None (a run's history, event by event) trusts admission.
    devices_of: Callable[[str], frozenset[DeviceClass]] | None = None

    @classmethod
    def ingested(cls, position: int, run_digest: str, predicate: Mapping[str, Any]) -> RunFold:
        profile, state = ingestion_fold(position, run_digest, predicate)
        return cls(profile=profile, state=state, ingestion=predicate)

    def apply(self, event: str, position: int, signer: str, predicate: Mapping[str, Any]) -> None:
        """Fold one later event (``Run.Attested``, ``Run.RerunRecorded``...) into the run."""
        if event == EventName.RUN_RERUN_RECORDED:
            code = self.jobs.get(str(predicate.get("jobId")))
            devices = None if self.devices_of is None else self.devices_of(signer)
            facts = rerun_facts(
                position, signer, predicate, bound=code is not None, signer_devices=devices
            )
            if facts.accepted and code is not None:
                self.measured[position] = code
            self.reruns[position] = facts
            self.samples[position] = rerun_samples(predicate)
            self.state = self.state.apply(facts)
        elif event == EventName.RUN_RERUN_REQUESTED:
            # Judged against the manifests as they stand at the request, as admission did,
            # by digests only (the pinned solution, the named workload): the workload's bytes
            # are checked by admission and, offline, by the verifier (check_job_code).
            code = (str(predicate["artifactDigest"]), str(predicate["workloadDigest"]))
            problem = job_code_problem(self.ingestion["manifests"], *code)
            self.jobs[str(predicate["jobId"])] = code if problem is None else None
        elif event == EventName.RUN_MANIFESTS_ATTACHED:
            # Only what the profile reads (the comparison key above all) changes: evidence
            # was judged on what was ingested, and an attachment never moves it.
            current = self.ingestion["manifests"]
            merged = attach_manifests(current, predicate["manifests"]).documents
            self.ingestion = {**self.ingestion, "manifests": merged}
            self.profile = ingestion_profile(self.profile.run_digest, self.ingestion)
        elif event == EventName.RUN_ATTESTED:
            self.attestations += 1
            self.state = self.state.apply(AttestationFacts(position, str(predicate.get("type"))))
        elif event == EventName.RUN_RETRACTED:
            self.retracted = True
            self.state = self.state.apply(LifecycleFacts(position, "retract"))
        elif event == EventName.RUN_SUPERSEDED:
            self.superseded_by = str(predicate.get("supersededBy") or "unspecified")
            self.state = self.state.apply(LifecycleFacts(position, "supersede"))

    @property
    def evidence(self) -> EvidenceResult:
        return self.state.result

    def verified(self) -> tuple[float | None, tuple[float, float] | None]:
        return verified_standing(self.profile.run_digest, self.state, self.reruns, self.samples)

    def rank_entry(self) -> RankEntry:
        median, interval = self.verified()
        return RankEntry(
            run=self.profile.run_digest,
            comparison_key=self.profile.comparison_key or "",
            status=self.profile.status,
            claimed=self.profile.claimed,
            level=self.evidence.level,
            retracted=self.retracted,
            superseded=self.superseded_by is not None,
            rerun_median_ns=median,
            rerun_ci95_ns=interval,
        )
