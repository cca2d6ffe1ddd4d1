"""/v1/gpus, /v1/implementations, /v1/projects, /v1/records: the registry's reads, as the
service answers them (``api.service.registry``, ``api.service.records``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from litestar import Controller, get
from litestar.params import PathParameter, QueryParameter

from api.server.controllers.common import Service
from api.server.openapi_problems import refuses
from api.service.errors import AmbiguousReferenceError, BadQueryError, NotFoundError
from api.service.models.registry import (
    ImplementationList,
    ProjectList,
    RecordTimeline,
    RegistryPage,
    RegistrySummary,
)
from api.service.paging import MAX_PAGE
from api.service.records import FEED_MAX
from api.service.registry import LIST_MAX, LIST_PAGE, RECORDS_PAGE, RUNS_PAGE
from domain.documents import MAX_SAFE_INTEGER

MAX_NAME = 300

Before = Annotated[
    int | None,
    QueryParameter(
        ge=1,
        le=MAX_SAFE_INTEGER,
        description="The next of the records page before: its records' older ones follow.",
    ),
]
Cursor = Annotated[str | None, QueryParameter(max_length=100)]
RunsLimit = Annotated[int, QueryParameter(ge=1, le=MAX_PAGE)]
RecordsLimit = Annotated[int, QueryParameter(ge=1, le=FEED_MAX)]


def path_name(path: Path) -> str:
    """A stored name from a ``{name:path}`` parameter (an author's name may hold "/")."""
    name = str(path).lstrip("/")
    if not name or len(name) > MAX_NAME:
        raise NotFoundError(f"give a name of at most {MAX_NAME} characters")
    return name


class RegistryController(Controller):
    path = "/v1"
    tags = ("registry",)

    @get("/gpus", sync_to_thread=True, summary="GPUs the runs name, most runs first")
    def gpus(self, service: Service) -> list[RegistrySummary]:
        return service.registry.gpus()

    @get(
        "/gpus/{name:str}",
        sync_to_thread=True,
        summary="One GPU's runs and #1 records (exact stored name, URL-encoded)",
        opt=refuses(NotFoundError),
    )
    def gpu(
        self,
        service: Service,
        name: Annotated[
            str, PathParameter(description="The GPU as runs name it: NVIDIA B200.", max_length=200)
        ],
        cursor: Cursor = None,
        limit: RunsLimit = RUNS_PAGE,
        before: Before = None,
        records: RecordsLimit = RECORDS_PAGE,
    ) -> RegistryPage:
        return service.registry.gpu(name, cursor, limit, before, records)

    @get(
        "/implementations",
        sync_to_thread=True,
        summary="Implementation authors, most runs first",
    )
    def implementations(
        self,
        service: Service,
        start: Annotated[int, QueryParameter(ge=1, le=MAX_SAFE_INTEGER)] = 1,
        limit: Annotated[int, QueryParameter(ge=1, le=LIST_MAX)] = LIST_PAGE,
    ) -> ImplementationList:
        return service.registry.implementations(start, limit)

    @get(
        "/implementations/{name:path}",
        sync_to_thread=True,
        summary="One implementation author's runs and #1 records (exact stored name)",
        opt=refuses(NotFoundError),
    )
    def implementation(
        self,
        service: Service,
        name: Annotated[Path, PathParameter(description="The author as the manifest names it.")],
        cursor: Cursor = None,
        limit: RunsLimit = RUNS_PAGE,
        before: Before = None,
        records: RecordsLimit = RECORDS_PAGE,
    ) -> RegistryPage:
        return service.registry.implementation(path_name(name), cursor, limit, before, records)

    @get(
        "/projects",
        sync_to_thread=True,
        summary="The KernelIndex catalog's projects that hold runs, most runs first",
    )
    def projects(
        self,
        service: Service,
        start: Annotated[int, QueryParameter(ge=1, le=MAX_SAFE_INTEGER)] = 1,
        limit: Annotated[int, QueryParameter(ge=1, le=LIST_MAX)] = LIST_PAGE,
    ) -> ProjectList:
        return service.registry.projects(start, limit)

    @get(
        "/projects/{name:path}",
        sync_to_thread=True,
        summary="One project's runs and #1 records (its name as the catalog gives it)",
        opt=refuses(NotFoundError),
    )
    def project(
        self,
        service: Service,
        name: Annotated[Path, PathParameter(description="The project as the catalog names it.")],
        cursor: Cursor = None,
        limit: RunsLimit = RUNS_PAGE,
        before: Before = None,
        records: RecordsLimit = RECORDS_PAGE,
    ) -> RegistryPage:
        return service.registry.project(path_name(name), cursor, limit, before, records)

    @get(
        "/records",
        sync_to_thread=True,
        summary="Every time a group's #1 changed, newest first, dated",
        description=(
            "Each record is dated by the date its source gave the run (dated: observed, the "
            "run's observedAt, as the KernelIndex catalog dates its record events) or, where "
            "the source gave none, by the ledger's admission of it (dated: admitted)."
        ),
        opt=refuses(NotFoundError, AmbiguousReferenceError, BadQueryError),
    )
    def records(
        self,
        service: Service,
        group: Annotated[
            str | None,
            QueryParameter(
                max_length=71, description="A comparison key or a unique prefix of one."
            ),
        ] = None,
        gpu: Annotated[str | None, QueryParameter(max_length=200)] = None,
        author: Annotated[str | None, QueryParameter(max_length=MAX_NAME)] = None,
        before: Before = None,
        limit: RecordsLimit = FEED_MAX,
    ) -> RecordTimeline:
        return service.records.timeline(group, before, limit, gpu=gpu, author=author)
