"""Replies about rerun jobs, and the receipt of a claim (which carries the claimed job)."""

from __future__ import annotations

from msgspec import structs

from api.service.models import ApiModel
from api.service.models.log import Receipt


class JobRequirements(ApiModel, kw_only=True):
    product: str
    architecture: str


class Job(ApiModel, kw_only=True):
    job_id: str
    run_digest: str
    run_name: str
    nonce: str  # the secret a result must echo
    artifact_digest: str
    workload_digest: str
    requirements: JobRequirements  # the hardware a result must be measured on
    expires_at: str
    claimant: str | None
    lease_until: str | None
    has_result: bool


class ClaimReceipt(Receipt, kw_only=True):
    job: Job  # the job as the claim left it

    @classmethod
    def of(cls, receipt: Receipt, job: Job) -> ClaimReceipt:
        return cls(**structs.asdict(receipt), job=job)
