"""The record summary of one run, read from its verified events.

Evidence levels and ranks come from the projections; this is what the events themselves say.
"""

from __future__ import annotations

from typing import Any

from domain.statements import PredicateType
from ledger.application import Ledger
from ledger.errors import NotFoundError
from ledger.event_verification import EventVerification
from ledger.history import run_history


def run_summary(
    ledger: Ledger, run_digest: str, history: list[EventVerification] | None = None
) -> dict[str, Any]:
    """``history``: the run's already re-verified events, if the caller has them."""
    run = ledger.run(run_digest)
    if run is None:
        raise NotFoundError(f"no run with digest {run_digest}")
    if history is None:
        history = run_history(ledger, run_digest)
    ingestion = next(
        (h for h in history if h.predicate_type == PredicateType.INGESTION and h.predicate), None
    )
    predicate = ingestion.predicate if ingestion and ingestion.predicate else {}
    manifests = predicate.get("manifests") or {}
    run_manifest = manifests.get("run") or {}
    spec = run_manifest.get("spec") or {}
    timing = spec.get("timing") or {}
    statistic = timing.get("primaryStatistic")
    protocol = manifests.get("protocol") or {}
    environment = manifests.get("environment") or {}
    hardware = (environment.get("spec") or {}).get("hardware") or {}
    attestations = [
        {
            "type": h.predicate.get("type"),
            "signer": h.signer,
            "receivedAt": h.received_at,
            "verified": h.ok,
        }
        for h in history
        if h.predicate_type == PredicateType.ATTESTATION and h.predicate
    ]
    return {
        "digest": run.run_digest,
        "name": run.run_name,
        "title": (run_manifest.get("metadata") or {}).get("title"),
        "source": predicate.get("source"),
        "externalId": predicate.get("externalId"),
        "status": spec.get("status"),
        "observedAt": spec.get("observedAt"),
        "primary": {
            "statistic": statistic,
            "latencyNs": (timing.get("latencyNs") or {}).get(statistic) if statistic else None,
        },
        "sourceNative": spec.get("sourceNative"),
        "protocol": {
            "digest": spec.get("protocolDigest"),
            "title": (protocol.get("metadata") or {}).get("title"),
        },
        "environment": {
            "digest": spec.get("environmentDigest"),
            "title": (environment.get("metadata") or {}).get("title"),
            "product": hardware.get("product"),
            "architecture": hardware.get("architecture"),
        },
        "implementationDigest": spec.get("implementationDigest"),
        "workloadDigest": spec.get("workloadDigest"),
        "ingestedAt": run.ingested_at,
        "retracted": run.retracted,
        "supersededBy": run.superseded_by,
        "attestations": attestations,
        "events": len(history),
        "allEventsVerified": all(h.ok for h in history),
    }
