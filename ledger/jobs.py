"""Rerun jobs as agents see them: which are open for a device, and what one asks for.

A job is open while it has no result, has not expired and is not held by another agent's
running lease. What a job asks for (solution artifact, workload, hardware, nonce) is read
from its admin-signed request; whether it is open, from the run's current state.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from domain.rerun_binding import job_code_problem
from domain.timestamps import parse_time, utc_now
from ledger.aggregates import Run, RunState
from ledger.application import Ledger
from ledger.errors import NotFoundError
from ledger.store.stored_events import statement_of


@dataclass(frozen=True)
class JobView:
    job_id: str
    run_digest: str
    run_name: str
    nonce: str
    artifact_digest: str
    workload_digest: str
    product: str
    architecture: str
    expires_at: str
    claimant: str | None
    lease_until: str | None
    has_result: bool

    def is_open_to(self, agent: str | None, now: datetime) -> bool:
        if self.has_result or now > parse_time(self.expires_at):
            return False
        leased = self.lease_until is not None and now < parse_time(self.lease_until)
        return not leased or self.claimant == agent

    def to_json(self) -> dict[str, Any]:
        return {
            "jobId": self.job_id,
            "runDigest": self.run_digest,
            "runName": self.run_name,
            "nonce": self.nonce,
            "artifactDigest": self.artifact_digest,
            "workloadDigest": self.workload_digest,
            "requirements": {"product": self.product, "architecture": self.architecture},
            "expiresAt": self.expires_at,
            "claimant": self.claimant,
            "leaseUntil": self.lease_until,
            "hasResult": self.has_result,
        }


def _requests(ledger: Ledger) -> list[dict[str, Any]]:
    return [statement_of(state)["predicate"] for state in ledger.stored_states(Run.RerunRequested)]


class _Runs:
    """Each run's jobs, read once per answer (a run's state events, never its attestations:
    a run flooded with notes polls as fast as any)."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._read: dict[str, RunState | None] = {}

    def _unbound(self, run: RunState, predicate: dict[str, Any]) -> bool:
        """A job admitted before jobs were bound to their run's code (domain.rerun_binding)
        that does not measure it: its result could not count, so no agent is offered it."""
        problem = job_code_problem(
            run.manifests(), str(predicate["artifactDigest"]), str(predicate["workloadDigest"])
        )
        return problem is not None

    def view(self, predicate: dict[str, Any]) -> JobView | None:
        digest = str(predicate["runDigest"])
        if digest not in self._read:
            self._read[digest] = self._ledger.run_state(digest)
        run = self._read[digest]
        if run is None:
            return None
        job = run.jobs.get(str(predicate["jobId"]))
        if job is None or self._unbound(run, predicate):
            return None
        return JobView(
            job_id=str(predicate["jobId"]),
            run_digest=run.run_digest,
            run_name=run.run_name,
            nonce=job.nonce,
            artifact_digest=str(predicate["artifactDigest"]),
            workload_digest=str(predicate["workloadDigest"]),
            product=job.product,
            architecture=job.architecture,
            expires_at=job.expires_at,
            claimant=job.claimant,
            lease_until=job.lease_until,
            has_result=job.result_version is not None,
        )


def open_jobs(
    ledger: Ledger,
    *,
    product: str | None = None,
    architecture: str | None = None,
    agent: str | None = None,
    now: datetime | None = None,
) -> list[JobView]:
    """Jobs an agent on this device may claim now (its own leased ones included)."""
    moment = now or utc_now()
    runs = _Runs(ledger)
    found: list[JobView] = []
    for predicate in _requests(ledger):
        requirements = predicate.get("requirements") or {}
        if product is not None and requirements.get("product") != product:
            continue
        if architecture is not None and requirements.get("architecture") != architecture:
            continue
        view = runs.view(predicate)
        if view is not None and view.is_open_to(agent, moment):
            found.append(view)
    return found


def job(ledger: Ledger, job_id: str) -> JobView:
    runs = _Runs(ledger)
    for predicate in _requests(ledger):
        if predicate.get("jobId") == job_id:
            view = runs.view(predicate)
            if view is not None:
                return view
    raise NotFoundError(f"no rerun job {job_id}")
