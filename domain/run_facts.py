"""From signed statements to the facts the evidence and ranking policies read.

Pure: takes decoded predicates (as the ledger stored them) and returns policy inputs. The
projections, the exporter's claims and the offline verifier all use these, so a claim is
recomputed from events with exactly the code that made it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from domain.comparison import ComparisonKeyError, comparison_key, primary_measurement
from domain.errors import DomainError
from domain.evidence import IngestionFacts, RerunFacts, ingestion_facts_from_manifests


@dataclass(frozen=True)
class RunProfile:
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


def _group_key(manifests: Mapping[str, Any]) -> str | None:
    """The comparison key, or None when the workload manifest was not supplied."""
    workload = manifests.get("workload")
    if not isinstance(workload, Mapping):
        return None
    try:
        # The ledger validated every manifest at admission.
        return comparison_key(manifests["run"], workload, trusted=True)
    except (ComparisonKeyError, DomainError):
        return None


def ingestion_profile(run_digest: str, predicate: Mapping[str, Any]) -> RunProfile:
    manifests = predicate["manifests"]
    run = manifests["run"]
    spec = run.get("spec", {})
    native = spec.get("sourceNative") or {}
    hardware = (manifests.get("environment") or {}).get("spec", {}).get("hardware", {})
    primary = primary_measurement(run)
    return RunProfile(
        run_digest=run_digest,
        name=str(run.get("metadata", {}).get("name")),
        title=run.get("metadata", {}).get("title"),
        source=str(predicate.get("source")),
        external_id=predicate.get("externalId"),
        benchmark=native.get("benchmark"),
        status=str(spec.get("status")),
        comparison_key=_group_key(manifests),
        metric=primary.metric,
        statistic=primary.statistic,
        unit=primary.unit,
        claimed=float(primary.value) if primary.value is not None else None,
        product=hardware.get("product"),
        architecture=hardware.get("architecture"),
        observed_at=spec.get("observedAt"),
    )


def ingestion_facts(position: int, predicate: Mapping[str, Any]) -> IngestionFacts:
    manifests = predicate["manifests"]
    implementation = manifests.get("implementation")
    # "Pinned source": the implementation's source artifact is named by digest.
    pinned = isinstance(implementation, Mapping) and bool(
        (implementation.get("spec", {}).get("source") or {}).get("contentDigest")
    )
    return ingestion_facts_from_manifests(
        position, manifests["run"], manifests.get("environment") or {}, has_pinned_source=pinned
    )


def rerun_facts(position: int, signer: str, predicate: Mapping[str, Any]) -> RerunFacts:
    """A rerun the ledger admitted (agent-signed, for an open job): accepted by construction."""
    summary = predicate["summary"]
    environment = predicate["environment"]
    ci95 = summary.get("ci95Ns")
    return RerunFacts(
        position=position,
        agent_key_id=signer,
        gpu_uuid_hash=str(environment["gpuUuidHash"]),
        product=str(environment["product"]),
        architecture=str(environment["architecture"]),
        all_cases_correct=bool(summary["allCorrect"]),
        median_ns=summary.get("medianNs") or None,
        ci95_ns=(float(ci95[0]), float(ci95[1])) if ci95 else None,
        accepted=True,
        mean_ns=summary.get("meanNs") or None,
    )


def rerun_samples(predicate: Mapping[str, Any]) -> list[float]:
    return [float(v) for v in (predicate.get("summary", {}).get("samplesNs") or [])]
