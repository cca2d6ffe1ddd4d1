"""Replies about runs: the runs list and a run's record (every section of its page)."""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from api.service.models import ApiModel, Document, Number
from api.service.models.views import RunComparison, SweepPlace


class RunSummary(ApiModel, kw_only=True):
    """A run as the runs list shows it (its projected row)."""

    digest: str
    name: str
    title: str | None
    source: str
    external_id: str | None
    benchmark: str | None
    status: str
    comparison_key: str | None
    metric: str
    claimed: Number | None
    unit: str | None
    gpu: str | None
    evidence_level: str
    retracted: bool
    superseded_by: str | None
    attestations: int
    ingested_at: str
    position: int


class RunList(ApiModel, kw_only=True):
    items: list[RunSummary]
    next: str | None  # the cursor of the next page; None: this is the last


class PrimaryMeasurement(ApiModel, kw_only=True):
    """The figure the run is ranked by, in its unit (metric "none": the run states none)."""

    metric: str
    statistic: str | None
    unit: str | None
    value: Number | None
    latency_ns: Number | None  # the value again when it is a latency in ns


class ManifestRef(ApiModel, kw_only=True):
    digest: str | None
    title: str | None


class EnvironmentRef(ApiModel, kw_only=True):
    digest: str | None
    title: str | None
    product: str | None
    architecture: str | None


class AttestationSummary(ApiModel, kw_only=True):
    type: str | None
    signer: str | None
    received_at: str | None
    verified: bool


class Evidence(ApiModel, kw_only=True):
    level: str
    reasons: list[str]
    caused_by: int  # the log position of the event that set the level
    policy_version: str


class Standing(ApiModel, kw_only=True):
    rank: int
    of: int
    value: Number
    tied_with: list[str]
    label: str


class Identity(ApiModel, kw_only=True):
    name: str | None
    title: str | None
    run_digest: str
    manifest_digests: dict[str, str]  # role -> digest
    comparison_key: str | None
    # Who the run is by: from its implementation manifest, else as the run's own source
    # record states it (``stated_by`` says which; None: neither says).
    implementation: str | None = None
    project: str | None = None
    revision: str | None = None
    stated_by: str | None = None  # "its implementation manifest" | "the run's source record"
    # Without the manifest: the fields of it the run's source record states, by the path a
    # comparison names them (``implementation.metadata.name``).
    source_record_fields: dict[str, str] = msgspec.field(default_factory=dict)


class Provenance(ApiModel, kw_only=True):
    """Three times, three facts: when the source published the result (where it says),
    when this ledger admitted it (its ingestion's receipt), when it was measured."""

    source: str | None  # the source's slug
    source_name: str | None  # what the source calls itself ("GPU MODE KernelBot")
    published_at: str | None  # when the source published the run (None: it does not say)
    # Where that time is read: "the signed ingestion", or (a run ingested before ingestions
    # carried it) "the source's record the ingestion names by digest".
    published_stated_by: str | None
    admitted_at: str | None  # when this ledger admitted the run
    observed_at: str | None  # when the run was measured, as its manifest says


class TakePart(ApiModel, kw_only=True):
    """The signed commands a run's page offers, with the run's own values filled in."""

    observed_ns: int | None  # what a reproduction attests by default: the run's own latency
    observed: str | None  # the same, as people read it ("49.5 µs")
    attest: str
    report: str
    rerun: str


class Correctness(ApiModel, kw_only=True):
    status: str | None
    protocol: Document | None  # the protocol manifest's correctness section
    run: Document | None  # the run manifest's


class WorkloadRow(ApiModel, kw_only=True):
    id: str | None
    axes: list[Any]  # one value per axis of WorkloadSection.axes (None: not set)


class TensorShown(ApiModel, kw_only=True):
    name: str
    dtype: str | None
    shape: list[int] | None


class WorkloadSection(ApiModel, kw_only=True):
    digest: str | None
    name: str | None
    title: str | None
    kind: str | None
    description: str
    cases: int
    axes: list[str]
    rows: list[WorkloadRow]  # the first 200 cases
    # The axes with one value on every case (axis -> that value), in axis order: a page
    # states them once instead of a column each.
    constants: dict[str, Any]
    comparator: str | None
    tensors: list[TensorShown]
    manifest: Document


class RerunShown(ApiModel, kw_only=True):
    position: int
    signer: str | None
    role: str | None
    received_at: str | None
    verified: bool
    job_id: str | None
    summary: Document  # the result's summary, less its samples
    environment: Document | None
    says: str


class ReportedMeasurement(ApiModel, kw_only=True):
    """One of the measurements the source published (``spec.measurements``)."""

    metric: str | None
    statistic: str | None
    value: Number | None
    unit: str | None
    sample_count: int | None


class Measurements(ApiModel, kw_only=True):
    timing: Document | None
    reported: list[ReportedMeasurement]  # e.g. a KernelBot case's standard deviation
    reruns: list[RerunShown]


class ImplementationSection(ApiModel, kw_only=True):
    digest: str | None
    manifest: Document


class ArtifactShown(ApiModel, kw_only=True):
    role: str
    digest: str
    stored: bool  # whether the ledger holds the content (GET /v1/artifacts/{digest})


class AttestationShown(ApiModel, kw_only=True):
    position: int
    signer: str | None
    role: str | None
    received_at: str | None
    verified: bool
    type: str | None
    body: str | None
    observed_ns: int | None
    environment_summary: str | None
    evidence_url: str | None
    reason: str | None


class Citation(ApiModel, kw_only=True):
    permalink: str
    digest: str
    accessed: str
    value: str
    source: str
    text: str
    bibtex: str


class RunRecord(ApiModel, kw_only=True):
    """Everything a run's page shows: what its events say, its evidence and standings."""

    digest: str
    name: str | None
    title: str | None
    source: str | None
    external_id: str | None
    status: str | None
    observed_at: str | None
    primary: PrimaryMeasurement
    source_native: Document | None
    protocol: ManifestRef
    environment: EnvironmentRef
    implementation_digest: str | None
    workload_digest: str | None
    ingested_at: str | None
    provenance: Provenance
    retracted: bool
    superseded_by: str | None
    attestations: list[AttestationSummary]  # the newest ones
    attestation_count: int
    events: int
    events_shown: int
    shown_events_verified: bool
    # Projected: absent while the run has no row in the views yet.
    evidence: Evidence | UnsetType = UNSET
    comparison_key: str | UnsetType | None = UNSET
    standings: dict[str, Standing] | UnsetType = UNSET  # view -> standing
    # Its group's place in the operation's workload sweep (UNSET: in none).
    sweep: SweepPlace | UnsetType = UNSET
    # Absent when the run is its group's #1, or has no group.
    compare_with_first: RunComparison | UnsetType = UNSET
    identity: Identity
    source_native_metrics: Document | None
    correctness: Correctness
    workload: WorkloadSection | None
    measurements: Measurements
    protocol_manifest: Document | None
    environment_manifest: Document | None
    implementation: ImplementationSection | None
    artifacts: list[ArtifactShown]
    replications: list[AttestationShown]
    notes: list[AttestationShown]
    reports: list[AttestationShown]
    canonical_manifest: str  # the run manifest's canonical JSON (RFC 8785)
    manifests: dict[str, Document]  # role -> manifest
    citation: Citation
    take_part: TakePart
