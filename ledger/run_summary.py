"""The record summary of one run, read from its verified events.

Evidence levels and ranks come from the projections; this is what the events themselves say.
"""

from __future__ import annotations

from typing import Any

from domain.comparison import readable_primary
from domain.event_names import EventName
from domain.statements import PredicateType
from ledger.application import Ledger
from ledger.errors import NotFoundError
from ledger.history import RunEvents, run_events


def _primary(run: dict[str, Any]) -> dict[str, Any]:
    """The measurement the run is ranked by (the views' own definition), in its unit;
    ``latencyNs`` too when it is a latency."""
    primary = readable_primary(run)
    return {
        "metric": primary.metric,
        "statistic": primary.statistic,
        "unit": primary.unit,
        "value": primary.value,
        "latencyNs": primary.value if primary.is_latency else None,
    }


def run_summary(ledger: Ledger, run_digest: str, events: RunEvents | None = None) -> dict[str, Any]:
    """``events``: the run's events as a record shows them, if the caller read them already.

    Reads the run's state events and its newest attestations, never all of them: a run's
    record costs the same with 2 attestations or 2,000."""
    if events is None:
        events = run_events(ledger, run_digest)
    ingestion = events.ingestion
    if ingestion is None:
        raise NotFoundError(f"no run with digest {run_digest}")
    shown = events.shown
    predicate = ingestion.predicate if ingestion.predicate else {}
    manifests = events.manifests
    run_manifest = manifests.get("run") or {}
    spec = run_manifest.get("spec") or {}
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
        for h in events.attestations
        if h.predicate_type == PredicateType.ATTESTATION and h.predicate
    ]
    retracted = any(h.ok and h.event == EventName.RUN_RETRACTED for h in events.state)
    superseded = next(
        (
            str((h.predicate or {}).get("supersededBy") or "unspecified")
            for h in events.state
            if h.ok and h.event == EventName.RUN_SUPERSEDED
        ),
        None,
    )
    return {
        "digest": run_digest,
        "name": run_manifest.get("metadata", {}).get("name"),
        "title": (run_manifest.get("metadata") or {}).get("title"),
        "source": predicate.get("source"),
        "externalId": predicate.get("externalId"),
        "status": spec.get("status"),
        "observedAt": spec.get("observedAt"),
        "primary": _primary(run_manifest),
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
        "ingestedAt": ingestion.received_at,
        "retracted": retracted,
        "supersededBy": superseded,
        "attestations": attestations,  # the newest ones
        "attestationCount": events.attestation_count,
        "events": events.total,
        "eventsShown": len(shown),
        "shownEventsVerified": all(h.ok for h in shown),
    }
