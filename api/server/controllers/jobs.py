"""/v1/jobs: rerun jobs for agents — list the open ones for a device, read one, claim it.

A claim and a result are signed statements about the run (agent role); the ledger accepts a
result only from the claimant, before the job expires, with the job's nonce, measured on
the hardware the job requires, on a device class the agent key's registration names (403
``device-not-bound`` otherwise). A job is offered only when it measures the run's own code
(``domain.rerun_binding``): the solution and workload the run's manifests name.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from litestar import Controller, Request, Response, get, post
from litestar.params import JSONBody, PathParameter, QueryParameter, RawBody

from api.server.controllers.common import (
    DsseEnvelope,
    Service,
    admit,
    deep_payload_is_malformed,
    receipt_body,
    receipt_reply,
)
from api.server.openapi_problems import refuses
from api.service.errors import NotFoundError, WrongEndpointError
from api.service.models.jobs import ClaimReceipt, Job
from domain.statements import PredicateType


class JobController(Controller):
    path = "/v1/jobs"
    tags = ("jobs",)

    @get("/", sync_to_thread=True, summary="Open rerun jobs (optionally for one device)")
    def list_jobs(
        self,
        service: Service,
        product: Annotated[str | None, QueryParameter(max_length=200)] = None,
        architecture: Annotated[str | None, QueryParameter(max_length=50)] = None,
        agent: Annotated[
            str | None, QueryParameter(description="Your key id: include jobs you hold.")
        ] = None,
    ) -> list[Job]:
        return service.jobs.open(product, architecture, agent)

    @get("/{job_id:str}", sync_to_thread=True, summary="One rerun job", opt=refuses(NotFoundError))
    def job(self, service: Service, job_id: Annotated[str, PathParameter(max_length=36)]) -> Job:
        return service.jobs.get(job_id)

    @post("/{job_id:str}/claims", summary="Claim a job (agent-signed)")
    async def claim(
        self,
        request: Request[Any, Any, Any],
        service: Service,
        job_id: Annotated[str, PathParameter(max_length=36)],
        data: JSONBody[DsseEnvelope],
        body: RawBody,
    ) -> Response[ClaimReceipt]:
        job = await asyncio.to_thread(service.jobs.get, job_id)
        claimed = await deep_payload_is_malformed(asyncio.to_thread(service.job_claimed_in, body))
        if claimed != job_id:
            raise WrongEndpointError(f"the claim is for job {claimed}, not {job_id}")
        receipt = await admit(request, service, body, {PredicateType.RERUN_CLAIM}, job.run_digest)
        claimed_job = await asyncio.to_thread(service.jobs.get, job_id)
        return receipt_reply(receipt, ClaimReceipt.of(receipt_body(receipt), claimed_job))
