"""A run's record, every section of its page, composed once from what was read once.

What the run's own events say (read once: its state events and newest attestations, each
verification cached) and what the views say of it (its row, standings and group's #1, read
in one snapshot) become one typed ``RunRecord``: the API sends it, the pages render it, the
CLI prints it. The sections follow the seed run page: primary measurement, rank and view,
compare with #1, source-native metrics, identity and digests, correctness, workload,
measurements, protocol, environment, artifacts, replications and notes, the canonical
manifests and a citation.

Manifests were validated at admission (``check_manifest_set``), which also checked that each
one digests to the reference the run makes: so the digests shown are the run's references,
and nothing here validates a manifest again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from api.display import format_measurement
from api.service.models.runs import (
    ArtifactShown,
    AttestationShown,
    AttestationSummary,
    Citation,
    Correctness,
    EnvironmentRef,
    Evidence,
    Identity,
    ImplementationSection,
    ManifestRef,
    Measurements,
    PrimaryMeasurement,
    RerunShown,
    RunRecord,
    Standing,
    TensorShown,
    WorkloadRow,
    WorkloadSection,
)
from api.service.models.views import RunComparison, SweepPlace
from api.service.run_facts import (
    identity_facts,
    own_latency_ns,
    provenance,
    reported_measurements,
    take_part,
)
from api.service.sweeps import standing_label
from domain.canonical import canonical_json
from domain.comparison import readable_primary
from domain.event_names import EventName
from domain.statements import PredicateType
from ledger.errors import NotFoundError
from ledger.event_verification import EventVerification
from ledger.history_reads import RunEvents, describe
from projections.rows import RunRow
from projections.rows import Standing as StandingRow

REPLICATION_TYPES = {"reproduced", "could_not_reproduce", "regression_observed"}
MAX_CASES_SHOWN = 200
# The manifests a run references, in the order its identity lists their digests.
REFERENCED = ("protocol", "environment", "implementation", "workload")


@dataclass(frozen=True)
class RunInViews:
    """What the views say of a run: its row, its standings, and its group's #1 compared
    with it (None when the run is its group's #1, or has no group)."""

    row: RunRow
    standings: dict[str, StandingRow]
    compare_with_first: RunComparison | None
    sweep: SweepPlace | None = None  # its group's place in a workload sweep


def compose(
    digest: str,
    events: RunEvents,
    views: RunInViews | None,
    stored: set[str],
    public_url: str,
    snapshot_published: str | None = None,
) -> RunRecord:
    """The record of run ``digest`` from its events, what the views say of it (None: it has
    no row yet), which of the artifacts it names the ledger stores, and the publication time
    its source's stored record states (``run_facts.provenance``)."""
    ingestion = events.ingestion
    if ingestion is None:
        raise NotFoundError(f"no run with digest {digest}")
    predicate = ingestion.predicate or {}
    manifests: dict[str, Any] = events.manifests
    run = _mapping(manifests.get("run"))
    metadata = _mapping(run.get("metadata"))
    spec = _mapping(run.get("spec"))
    protocol = _mapping(manifests.get("protocol"))
    environment = _mapping(manifests.get("environment"))
    hardware = _mapping(_mapping(environment.get("spec")).get("hardware"))
    workload = manifests.get("workload")
    implementation = manifests.get("implementation")
    shown = events.shown
    sections = _Sections.of(shown)
    primary = _primary(run)
    row = views.row if views is not None else None
    dates = provenance(predicate, spec, ingestion.received_at, snapshot_published)
    return RunRecord(
        digest=digest,
        name=metadata.get("name"),
        title=metadata.get("title"),
        source=predicate.get("source"),
        external_id=predicate.get("externalId"),
        status=spec.get("status"),
        observed_at=spec.get("observedAt"),
        primary=primary,
        source_native=spec.get("sourceNative"),
        protocol=ManifestRef(
            digest=spec.get("protocolDigest"), title=_mapping(protocol.get("metadata")).get("title")
        ),
        environment=EnvironmentRef(
            digest=spec.get("environmentDigest"),
            title=_mapping(environment.get("metadata")).get("title"),
            product=hardware.get("product"),
            architecture=hardware.get("architecture"),
        ),
        implementation_digest=spec.get("implementationDigest"),
        workload_digest=spec.get("workloadDigest"),
        ingested_at=ingestion.received_at,
        provenance=dates,
        retracted=any(h.ok and h.event == EventName.RUN_RETRACTED for h in events.state),
        superseded_by=_superseded_by(events),
        attestations=[
            AttestationSummary(
                type=h.predicate.get("type"),
                signer=h.signer,
                received_at=h.received_at,
                verified=h.ok,
            )
            for h in events.attestations
            if h.predicate_type == PredicateType.ATTESTATION and h.predicate
        ],
        attestation_count=events.attestation_count,
        events=events.total,
        events_shown=len(shown),
        shown_events_verified=all(h.ok for h in shown),
        **_projected(views),
        identity=Identity(
            name=metadata.get("name"),
            title=metadata.get("title"),
            run_digest=digest,
            manifest_digests=_digests(digest, manifests, spec),
            comparison_key=row.comparison_key if row is not None else None,
            **identity_facts(run, implementation),
        ),
        source_native_metrics=_mapping(spec.get("sourceNative")).get("metrics"),
        correctness=Correctness(
            status=spec.get("status"),
            protocol=_mapping(protocol.get("spec")).get("correctness"),
            run=spec.get("correctness"),
        ),
        workload=None
        if workload is None
        else workload_section(spec.get("workloadDigest"), workload),
        measurements=Measurements(
            timing=spec.get("timing"),
            reported=reported_measurements(spec),
            reruns=sections.reruns,
        ),
        protocol_manifest=protocol or None,
        environment_manifest=manifests.get("environment"),
        implementation=None
        if implementation is None
        else ImplementationSection(
            digest=spec.get("implementationDigest"), manifest=implementation
        ),
        artifacts=_artifacts(predicate, implementation, stored),
        replications=sections.replications,
        notes=sections.notes,
        reports=sections.reports,
        canonical_manifest=canonical_json(run).decode("utf-8"),
        manifests=manifests,
        citation=citation(
            _Cited(
                digest,
                metadata.get("title") or metadata.get("name"),
                primary,
                dates.source_name or dates.source,
                dates.published_at or ingestion.received_at,
            ),
            public_url,
        ),
        take_part=take_part(
            digest, own_latency_ns(primary, _mapping(spec.get("timing"))), public_url
        ),
    )


def _projected(views: RunInViews | None) -> dict[str, Any]:
    """What the views add (absent while the run has no row): evidence, group, standings
    and the comparison with #1."""
    if views is None:
        return {}
    row = views.row
    found: dict[str, Any] = {
        "evidence": Evidence(
            level=row.evidence_level,
            reasons=row.evidence_reasons,
            caused_by=row.evidence_caused_by,
            policy_version=row.policy_version,
        ),
        "comparison_key": row.comparison_key,
        "standings": {
            view: Standing(
                rank=s.rank,
                of=s.of,
                value=s.value,
                tied_with=s.tied_with,
                label=standing_label(s, views.sweep),
            )
            for view, s in views.standings.items()
        },
    }
    if views.sweep is not None:
        found["sweep"] = views.sweep
    if views.compare_with_first is not None:
        found["compare_with_first"] = views.compare_with_first
    return found


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _primary(run: dict[str, Any]) -> PrimaryMeasurement:
    """The measurement the run is ranked by (the views' own definition), in its unit;
    ``latencyNs`` too when it is a latency."""
    primary = readable_primary(run)
    return PrimaryMeasurement(
        metric=primary.metric,
        statistic=primary.statistic,
        unit=primary.unit,
        value=primary.value,
        latency_ns=primary.value if primary.is_latency else None,
    )


def _superseded_by(events: RunEvents) -> str | None:
    return next(
        (
            str((h.predicate or {}).get("supersededBy") or "unspecified")
            for h in events.state
            if h.ok and h.event == EventName.RUN_SUPERSEDED
        ),
        None,
    )


def _digests(digest: str, manifests: dict[str, Any], spec: dict[str, Any]) -> dict[str, str]:
    """Role → digest of each manifest the run holds: its own digest and the references it
    makes (admission checked each member digests to its reference)."""
    found = {"run": digest} if manifests.get("run") is not None else {}
    for role in REFERENCED:
        reference = spec.get(f"{role}Digest")
        if manifests.get(role) is not None and isinstance(reference, str):
            found[role] = reference
    return found


def _artifacts(
    predicate: dict[str, Any], implementation: Any, stored: set[str]
) -> list[ArtifactShown]:
    """The content-addressed artifacts the run names, and whether the ledger stores each."""
    source = _mapping(_mapping(_mapping(implementation).get("spec")).get("source"))
    references = {
        "sourceSnapshot": predicate.get("snapshotDigest"),
        "implementationSource": source.get("contentDigest"),
    }
    return [
        ArtifactShown(role=role, digest=d, stored=d in stored)
        for role, d in references.items()
        if isinstance(d, str)
    ]


def artifact_digests(events: RunEvents) -> list[str]:
    """The digests ``_artifacts`` shows, read before the record is composed (one query asks
    the store for all of them)."""
    ingestion = events.ingestion
    predicate = (ingestion.predicate if ingestion is not None else None) or {}
    return [a.digest for a in _artifacts(predicate, events.manifests.get("implementation"), set())]


@dataclass
class _Sections:
    """The shown events a record lists: attestations by kind, and controlled reruns."""

    replications: list[AttestationShown]
    notes: list[AttestationShown]
    reports: list[AttestationShown]
    reruns: list[RerunShown]

    @classmethod
    def of(cls, shown: list[EventVerification]) -> _Sections:
        sections = cls([], [], [], [])
        for h in shown:
            p = h.predicate or {}
            if h.predicate_type == PredicateType.ATTESTATION:
                item = AttestationShown(
                    position=h.position,
                    signer=h.signer,
                    role=h.role,
                    received_at=h.received_at,
                    verified=h.ok,
                    type=p.get("type"),
                    body=p.get("body"),
                    observed_ns=p.get("observedNs"),
                    environment_summary=p.get("environmentSummary"),
                    evidence_url=p.get("evidenceUrl"),
                    reason=p.get("reason"),
                )
                if p.get("type") == "issue_report":
                    sections.reports.append(item)
                elif p.get("type") in REPLICATION_TYPES:
                    sections.replications.append(item)
                else:
                    sections.notes.append(item)
            elif h.predicate_type == PredicateType.RERUN:
                summary = _mapping(p.get("summary"))
                sections.reruns.append(
                    RerunShown(
                        position=h.position,
                        signer=h.signer,
                        role=h.role,
                        received_at=h.received_at,
                        verified=h.ok,
                        job_id=p.get("jobId"),
                        summary={k: v for k, v in summary.items() if k != "samplesNs"},
                        environment=p.get("environment"),
                        says=describe(h),
                    )
                )
        return sections


def workload_section(digest: str | None, workload: dict[str, Any]) -> WorkloadSection:
    """What a person reads of a workload: a suite's cases or a single case, each case's axes
    as a row of one table (axes in order of first appearance), the comparator, tensors."""
    spec = _mapping(workload.get("spec"))
    suite = workload.get("kind") == "WorkloadSuite"
    cases = [c for c in spec.get("cases") or [] if isinstance(c, dict)] if suite else [spec]
    axes: list[str] = []
    for case in cases:
        for name in case.get("axes") or {}:
            if name not in axes:
                axes.append(name)
    aggregation = _mapping(spec.get("aggregation"))
    measured = " ".join(str(aggregation[k]) for k in ("statistic", "metric") if aggregation.get(k))
    description = (
        f"suite of {len(cases)} case{'s' if len(cases) != 1 else ''}"
        + (f" · {measured}" if measured else "")
        if suite
        else "a single case"
    )
    tensors = _mapping(spec.get("tensors"))
    metadata = _mapping(workload.get("metadata"))
    values = [[(c.get("axes") or {}).get(a) for a in axes] for c in cases]
    return WorkloadSection(
        digest=digest,
        name=metadata.get("name"),
        title=metadata.get("title"),
        kind=workload.get("kind"),
        description=description,
        cases=len(cases),
        axes=axes,
        rows=[
            WorkloadRow(id=c.get("externalId"), axes=v)
            for c, v in zip(cases[:MAX_CASES_SHOWN], values, strict=False)
        ],
        constants={
            a: values[0][i]
            for i, a in enumerate(axes)
            if values[0][i] is not None and all(_same(v[i], values[0][i]) for v in values)
        }
        if values
        else {},
        comparator=_mapping(spec.get("correctness")).get("comparator"),
        tensors=[
            TensorShown(name=n, dtype=t.get("dtype"), shape=t.get("shape"))
            for n, t in sorted(tensors.items())
            if isinstance(t, dict)
        ],
        manifest=workload,
    )


def _same(a: Any, b: Any) -> bool:
    """JSON equality (``1 == 1.0``, but ``true`` is not ``1``)."""
    return bool(a == b) and isinstance(a, bool) == isinstance(b, bool)


@dataclass(frozen=True)
class _Cited:
    digest: str
    title: str | None
    primary: PrimaryMeasurement
    source: str | None
    published_at: str | None  # the source's publication, else the ledger's admission


def citation(run: _Cited, public_url: str) -> Citation:
    """A citation of the run. Its permalink is absolute only under the configured public
    URL: a request's Host header is the client's to choose, so it is never reflected
    (``kernelindex serve`` sets the public URL to its own address unless told one)."""
    digest = run.digest
    permalink = f"{public_url.rstrip('/')}/runs/{digest}"
    accessed = datetime.now(UTC).date().isoformat()
    title = run.title
    value = format_measurement(
        {
            "metric": run.primary.metric,
            "statistic": run.primary.statistic,
            "unit": run.primary.unit,
            "value": run.primary.value,
        }
    )
    source = run.source or "unknown source"
    published = str(run.published_at or "")[:4] or accessed[:4]
    key = f"kernelindex-{digest[7:19]}"
    # BibTeX: braces keep the title's case; its own braces and backslashes are dropped.
    safe = "".join(c for c in f"{title}" if c not in "{}\\")
    return Citation(
        permalink=permalink,
        digest=digest,
        accessed=accessed,
        value=value,
        source=source,
        text=(
            f"{title} ({value}; source {source}). KernelIndex Ledger, run {digest}. "
            f"{permalink} (accessed {accessed})."
        ),
        bibtex=(
            f"@misc{{{key},\n"
            f"  title = {{{{{safe}}}}},\n"
            f"  howpublished = {{KernelIndex Ledger, source {source}}},\n"
            f"  year = {{{published}}},\n"
            f"  note = {{{value}; run digest {digest}; accessed {accessed}}},\n"
            f"  url = {{{permalink}}}\n"
            "}"
        ),
    )
