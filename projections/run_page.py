"""Everything a run's page shows, as one JSON document (the API's run record).

The sections follow the seed run page: primary measurement, rank and view, compare with #1,
source-native metrics, identity and digests, correctness, workload, measurements, protocol,
environment, artifacts, replications and notes, the canonical manifests and a citation.
Evidence and ranks come from the projections; everything else from the run's own events.
"""

from __future__ import annotations

from typing import Any

from domain.canonical import canonical_json
from domain.manifests.manifest_set import check_manifest_set
from domain.statements import PredicateType
from ledger.application import Ledger
from ledger.history import describe, run_events
from ledger.store.artifacts import ArtifactStore
from projections.run_record import run_record

REPLICATION_TYPES = {"reproduced", "could_not_reproduce", "regression_observed"}


def run_page(ledger: Ledger, digest: str) -> dict[str, Any]:
    # Read once, for the summary and the page: the run's state events and its newest
    # attestations (the rest are a paginated history away), each verification cached.
    events = run_events(ledger, digest)
    record = run_record(ledger, digest, events)
    ingestion = events.ingestion
    predicate = ingestion.predicate if ingestion is not None and ingestion.predicate else {}
    manifests: dict[str, Any] = events.manifests
    digests = check_manifest_set(manifests).digests if manifests else {}
    spec = (manifests.get("run") or {}).get("spec") or {}
    protocol = manifests.get("protocol") or {}
    workload = manifests.get("workload")
    implementation = manifests.get("implementation")

    replications: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    reports: list[dict[str, Any]] = []
    reruns: list[dict[str, Any]] = []
    for h in events.shown:
        p = h.predicate or {}
        base = {
            "position": h.position,
            "signer": h.signer,
            "role": h.role,
            "receivedAt": h.received_at,
            "verified": h.ok,
        }
        if h.predicate_type == PredicateType.ATTESTATION:
            item = base | {
                "type": p.get("type"),
                "body": p.get("body"),
                "observedNs": p.get("observedNs"),
                "environmentSummary": p.get("environmentSummary"),
                "evidenceUrl": p.get("evidenceUrl"),
                "reason": p.get("reason"),
            }
            if p.get("type") == "issue_report":
                reports.append(item)
            else:
                (replications if p.get("type") in REPLICATION_TYPES else notes).append(item)
        elif h.predicate_type == PredicateType.RERUN:
            reruns.append(
                base
                | {
                    "jobId": p.get("jobId"),
                    "summary": {
                        k: v for k, v in (p.get("summary") or {}).items() if k != "samplesNs"
                    },
                    "environment": p.get("environment"),
                    "says": describe(h),
                }
            )

    store = ArtifactStore(ledger.store)
    artifact_refs = {
        "sourceSnapshot": predicate.get("snapshotDigest"),
        "implementationSource": (
            ((implementation or {}).get("spec") or {}).get("source") or {}
        ).get("contentDigest"),
    }
    artifacts = [
        {"role": role, "digest": d, "stored": store.has(d)}
        for role, d in artifact_refs.items()
        if isinstance(d, str)
    ]

    return record | {
        "identity": {
            "name": record["name"],
            "title": record["title"],
            "runDigest": digest,
            "manifestDigests": digests,
            "comparisonKey": record.get("comparisonKey"),
        },
        "sourceNativeMetrics": (spec.get("sourceNative") or {}).get("metrics"),
        "correctness": {
            "status": spec.get("status"),
            "protocol": (protocol.get("spec") or {}).get("correctness"),
            "run": spec.get("correctness"),
        },
        "workload": None
        if workload is None
        else {"digest": digests.get("workload"), **workload_summary(workload)},
        "measurements": {"timing": spec.get("timing"), "reruns": reruns},
        "protocolManifest": protocol or None,
        "environmentManifest": manifests.get("environment"),
        "implementation": None
        if implementation is None
        else {"digest": digests.get("implementation"), "manifest": implementation},
        "artifacts": artifacts,
        "replications": replications,
        "notes": notes,
        "reports": reports,
        "canonicalManifest": canonical_json(manifests.get("run") or {}).decode("utf-8"),
        "manifests": manifests,
    }


MAX_CASES_SHOWN = 200


def workload_summary(workload: dict[str, Any]) -> dict[str, Any]:
    """What a person reads of a workload: a suite's cases or a single case, each case's axes
    as a row of one table (axes in order of first appearance), the comparator, tensors."""
    spec = workload.get("spec") or {}
    suite = workload.get("kind") == "WorkloadSuite"
    cases = [c for c in spec.get("cases") or [] if isinstance(c, dict)] if suite else [spec]
    axes: list[str] = []
    for case in cases:
        for name in case.get("axes") or {}:
            if name not in axes:
                axes.append(name)
    aggregation = spec.get("aggregation") or {}
    measured = " ".join(str(aggregation[k]) for k in ("statistic", "metric") if aggregation.get(k))
    description = (
        f"suite of {len(cases)} case{'s' if len(cases) != 1 else ''}"
        + (f" · {measured}" if measured else "")
        if suite
        else "a single case"
    )
    tensors: dict[str, Any] = spec["tensors"] if isinstance(spec.get("tensors"), dict) else {}
    return {
        "name": (workload.get("metadata") or {}).get("name"),
        "title": (workload.get("metadata") or {}).get("title"),
        "kind": workload.get("kind"),
        "description": description,
        "cases": len(cases),
        "axes": axes,
        "rows": [
            {"id": c.get("externalId"), "axes": [(c.get("axes") or {}).get(a) for a in axes]}
            for c in cases[:MAX_CASES_SHOWN]
        ],
        "comparator": (spec.get("correctness") or {}).get("comparator"),
        "tensors": [
            {"name": n, "dtype": t.get("dtype"), "shape": t.get("shape")}
            for n, t in sorted(tensors.items())
            if isinstance(t, dict)
        ],
        "manifest": workload,
    }
