"""A run's (or key's) full history: every stored event, re-verified, with what it says."""

from __future__ import annotations

import functools
from uuid import UUID

from domain.statements import PredicateType
from ledger.aggregates import principal_id, run_id
from ledger.application import Ledger
from ledger.event_verification import EventVerification, verify_stored_event


def run_history(ledger: Ledger, run_digest: str) -> list[EventVerification]:
    return aggregate_history(ledger, run_id(run_digest))


def key_history(ledger: Ledger, key_id: str) -> list[EventVerification]:
    return aggregate_history(ledger, principal_id(key_id))


def aggregate_history(ledger: Ledger, aggregate_id: UUID) -> list[EventVerification]:
    """Every stored event of one aggregate, re-verified against each signer's key as the log
    holds it (registration and revocation positions: the state at each event follows)."""
    keys = functools.cache(ledger.key_state)  # one read per signer, not per event
    return [
        verify_stored_event(
            position=record.position,
            version=record.version,
            event=record.event_name,
            aggregate_id=aggregate_id,
            state=record.state,
            keys=keys,
            trust_root=ledger.trust_root,
        )
        for record in ledger.stored_records(aggregate_id)
    ]


def describe(entry: EventVerification) -> str:
    """One line saying what the event states, for people."""
    p = entry.predicate or {}
    kind = entry.predicate_type
    if kind == PredicateType.INGESTION:
        run = (p.get("manifests") or {}).get("run") or {}
        spec = run.get("spec") or {}
        timing = spec.get("timing") or {}
        stat = timing.get("primaryStatistic")
        value = (timing.get("latencyNs") or {}).get(stat) if stat else None
        claim = f", {stat} latency {value} ns" if value is not None else ""
        ext = f" #{p['externalId']}" if p.get("externalId") else ""
        return f"ingested from {p.get('source')}{ext}: status {spec.get('status')}{claim}"
    if kind == PredicateType.ATTESTATION:
        body = str(p.get("body", ""))
        short = body if len(body) <= 100 else body[:97] + "..."
        return f"{p.get('type')}: {short}"
    if kind == PredicateType.LIFECYCLE:
        return f"{p.get('action')}: {p.get('reason')}"
    if kind == PredicateType.RERUN_REQUEST:
        req = p.get("requirements") or {}
        return (
            f"rerun requested: job {p.get('jobId')} on {req.get('product')} "
            f"({req.get('architecture')}), expires {p.get('expiresAt')}"
        )
    if kind == PredicateType.RERUN_CLAIM:
        device = p.get("device") or {}
        return (
            f"claimed job {p.get('jobId')} for {p.get('leaseSeconds')} s on "
            f"{device.get('product')} ({device.get('architecture')}, {device.get('backend')})"
        )
    if kind == PredicateType.RERUN:
        summary = p.get("summary") or {}
        env = p.get("environment") or {}
        verdict = "all cases correct" if summary.get("allCorrect") else "FAILED correctness"
        if p.get("outcome") == "failed":
            verdict = f"job FAILED: {p.get('failure')}"
        median = summary.get("medianNs")
        timing = f", median {median:.0f} ns" if isinstance(median, int | float) else ""
        return (
            f"rerun result for job {p.get('jobId')}: {verdict}{timing} on {env.get('product')} "
            f"({env.get('architecture')}, {env.get('backend')})"
        )
    if kind == PredicateType.KEY:
        roles = ",".join(p.get("roles") or [])
        label = f" ({p['label']})" if p.get("label") else ""
        if p.get("action") == "register":
            return f"register key {str(p.get('keyId'))[:19]}…{label} as {roles}"
        return f"revoke key {str(p.get('keyId'))[:19]}…: {p.get('reason') or 'no reason given'}"
    return "unreadable event"
