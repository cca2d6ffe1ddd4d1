"""/v1/runs: list, record, history; and the signed writes about a run."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, Response, get, post
from litestar.params import JSONBody, PathParameter, QueryParameter, RawBody

from api.server.controllers.common import DsseEnvelope, Service, write
from api.server.openapi_problems import refuses
from api.service.errors import AmbiguousReferenceError, BadQueryError, NotFoundError
from api.service.history import DEFAULT_PAGE as HISTORY_PAGE
from api.service.history import MAX_PAGE as HISTORY_MAX
from api.service.models.history import RunHistory
from api.service.models.log import Receipt
from api.service.models.runs import RunList, RunRecord
from api.service.paging import MAX_PAGE
from domain.documents import MAX_SAFE_INTEGER
from domain.evidence import EvidenceLevel
from domain.statements import PredicateType

DigestPath = Annotated[
    str,
    PathParameter(
        description=(
            "A run: its digest (sha256:<64 hex>), a unique prefix of at least 4 hex digits, "
            "its name or its source's external id (38823, sol-execbench#38823)."
        ),
        max_length=300,
    ),
]
FullDigestPath = Annotated[
    str,
    PathParameter(
        description="The run's full digest, sha256:<64 hex>.",
        pattern=r"^sha256:[0-9a-f]{64}$",
    ),
]


LEVEL_NAMES = ", ".join(e.name.lower() for e in EvidenceLevel)
# A run named by reference: none may match, or (a short prefix) several.
RUN_REFERENCE = (NotFoundError, AmbiguousReferenceError)


class RunController(Controller):
    path = "/v1/runs"
    tags = ("runs",)

    @get(
        "/",
        sync_to_thread=True,
        summary="List runs (cursor pagination, newest last)",
        opt=refuses(NotFoundError, BadQueryError),  # a cursor not issued here, a level
    )
    def list_runs(
        self,
        service: Service,
        comparison_key: Annotated[
            str | None, QueryParameter(name="comparisonKey", max_length=71)
        ] = None,
        source: Annotated[str | None, QueryParameter(max_length=100)] = None,
        level: Annotated[
            str | None,
            QueryParameter(
                description="Evidence level: " + ", ".join(e.name.lower() for e in EvidenceLevel)
            ),
        ] = None,
        gpu: Annotated[
            str | None, QueryParameter(description="GPU product, e.g. NVIDIA B200.", max_length=200)
        ] = None,
        benchmark: Annotated[str | None, QueryParameter(max_length=300)] = None,
        cursor: Annotated[str | None, QueryParameter(max_length=100)] = None,
        limit: Annotated[int, QueryParameter(ge=1, le=MAX_PAGE)] = 50,
    ) -> RunList:
        return service.runs.list_page(
            comparison_key=comparison_key,
            source=source,
            level=parse_level(level),
            gpu=gpu,
            benchmark=benchmark,
            cursor=cursor,
            limit=limit,
        )

    @get(
        "/{digest:str}",
        sync_to_thread=True,
        summary="One run record (every section of its page)",
        opt=refuses(*RUN_REFERENCE),
    )
    def record(self, service: Service, digest: DigestPath) -> RunRecord:
        return service.runs.record(digest)

    @get(
        "/{digest:str}/history",
        sync_to_thread=True,
        summary="A run's events, re-verified, a page at a time (oldest first)",
        opt=refuses(*RUN_REFERENCE),
    )
    def history(
        self,
        service: Service,
        digest: DigestPath,
        start: Annotated[
            int,
            QueryParameter(
                ge=1, le=MAX_SAFE_INTEGER, description="The version to start at (1: first)."
            ),
        ] = 1,
        limit: Annotated[int, QueryParameter(ge=1, le=HISTORY_MAX)] = HISTORY_PAGE,
    ) -> RunHistory:
        return service.history.run(digest, start, limit)

    @post("/", summary="Ingest a run (ingester-signed ingestion statement)")
    async def ingest(
        self,
        request: Request[Any, Any, Any],
        service: Service,
        data: JSONBody[DsseEnvelope],
        body: RawBody,
    ) -> Response[Receipt]:
        return await write(request, service, body, {PredicateType.INGESTION})

    @post("/{digest:str}/attestations", summary="Attest to a run")
    async def attest(
        self,
        request: Request[Any, Any, Any],
        service: Service,
        digest: FullDigestPath,
        data: JSONBody[DsseEnvelope],
        body: RawBody,
    ) -> Response[Receipt]:
        return await write(request, service, body, {PredicateType.ATTESTATION}, digest)

    @post("/{digest:str}/lifecycle", summary="Retract or supersede (admin)")
    async def lifecycle(
        self,
        request: Request[Any, Any, Any],
        service: Service,
        digest: FullDigestPath,
        data: JSONBody[DsseEnvelope],
        body: RawBody,
    ) -> Response[Receipt]:
        return await write(request, service, body, {PredicateType.LIFECYCLE}, digest)

    @post("/{digest:str}/manifests", summary="Attach a manifest the run names (ingester)")
    async def attach(
        self,
        request: Request[Any, Any, Any],
        service: Service,
        digest: FullDigestPath,
        data: JSONBody[DsseEnvelope],
        body: RawBody,
    ) -> Response[Receipt]:
        return await write(request, service, body, {PredicateType.ATTACHMENT}, digest)

    @post("/{digest:str}/rerun-requests", summary="Request a rerun (admin)")
    async def rerun_request(
        self,
        request: Request[Any, Any, Any],
        service: Service,
        digest: FullDigestPath,
        data: JSONBody[DsseEnvelope],
        body: RawBody,
    ) -> Response[Receipt]:
        return await write(request, service, body, {PredicateType.RERUN_REQUEST}, digest)

    @post("/{digest:str}/reruns", summary="Post a rerun result (agent)")
    async def rerun_result(
        self,
        request: Request[Any, Any, Any],
        service: Service,
        digest: FullDigestPath,
        data: JSONBody[DsseEnvelope],
        body: RawBody,
    ) -> Response[Receipt]:
        return await write(request, service, body, {PredicateType.RERUN}, digest)


def parse_level(level: str | None) -> EvidenceLevel | None:
    if level is None:
        return None
    try:
        return EvidenceLevel[level.upper()]
    except KeyError:
        names = ", ".join(e.name.lower() for e in EvidenceLevel)
        raise BadQueryError(f"unknown evidence level {level!r}; one of {names}") from None
