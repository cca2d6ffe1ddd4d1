"""Rerun jobs as agents read them: the open ones for a device, and one job."""

from __future__ import annotations

from api.service.freshness import Views
from api.service.models import to_response
from api.service.models.jobs import Job
from ledger.jobs import job as find_job
from ledger.jobs import open_jobs


class Jobs:
    def __init__(self, views: Views) -> None:
        self.ledger = views.ledger

    def open(
        self,
        product: str | None = None,
        architecture: str | None = None,
        agent: str | None = None,
    ) -> list[Job]:
        found = open_jobs(self.ledger, product=product, architecture=architecture, agent=agent)
        return to_response([j.to_json() for j in found], list[Job])

    def get(self, job_id: str) -> Job:
        return to_response(find_job(self.ledger, job_id).to_json(), Job)
