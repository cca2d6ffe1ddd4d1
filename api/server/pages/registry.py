"""The registry's pages: GPUs, implementations (by author), projects and the #1 records
timeline.

Each reads what its /v1 twin answers (``api.server.controllers.registry``), through the same
service call, and links to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from litestar import Controller, MediaType, get
from litestar.params import PathParameter, QueryParameter
from litestar.response import Template

from api.server.controllers.common import Service
from api.server.controllers.registry import Before, Cursor, path_name
from api.server.pages.errors import PAGE_EXCEPTION_HANDLERS
from api.service.models.registry import RegistryPage
from api.service.registry import LIST_PAGE, RECORDS_PAGE, RUNS_PAGE
from domain.documents import MAX_SAFE_INTEGER

TIMELINE_PAGE = 50  # records per page of /records


def _page(name: str, **context: Any) -> Template:
    return Template(template_name=name, context=context, media_type=MediaType.HTML)


def _href(path: str, **query: object) -> str:
    kept = {k: str(v) for k, v in query.items() if v is not None}
    return path + (f"?{urlencode(kept)}" if kept else "")


def _facet_page(template: str, base: str, api: str, found: RegistryPage, **query: Any) -> Template:
    """A GPU's or an author's page, with the links to its next runs and records."""
    older = found.records.next
    return _page(
        template,
        found=found,
        base=base,
        more_runs=_href(base, cursor=found.runs_next) if found.runs_next else None,
        older_records=_href(base, before=older) if older is not None else None,
        json_href=_href(api, **query),
    )


class RegistryPages(Controller):
    path = "/"
    include_in_schema = False
    exception_handlers = PAGE_EXCEPTION_HANDLERS

    @get("/gpus", sync_to_thread=True, name="page-gpus")
    def gpus(self, service: Service) -> Template:
        return _page("gpus.html", gpus=service.registry.gpus(), json_href="/v1/gpus")

    @get("/gpus/{name:str}", sync_to_thread=True, name="page-gpu")
    def gpu(
        self,
        service: Service,
        name: Annotated[str, PathParameter(max_length=200)],
        cursor: Cursor = None,
        before: Before = None,
    ) -> Template:
        found = service.registry.gpu(name, cursor, RUNS_PAGE, before, RECORDS_PAGE)
        base = f"/gpus/{quote(name, safe='')}"
        return _facet_page("gpu.html", base, f"/v1{base}", found, cursor=cursor, before=before)

    @get("/implementations", sync_to_thread=True, name="page-implementations")
    def implementations(
        self,
        service: Service,
        start: Annotated[int, QueryParameter(ge=1, le=MAX_SAFE_INTEGER)] = 1,
    ) -> Template:
        found = service.registry.implementations(start, LIST_PAGE)
        return _page(
            "implementations.html",
            found=found,
            next_href=_href("/implementations", start=found.next) if found.next else None,
            json_href=_href("/v1/implementations", start=start, limit=LIST_PAGE),
        )

    @get("/implementations/{name:path}", sync_to_thread=True, name="page-implementation")
    def implementation(
        self,
        service: Service,
        name: Annotated[Path, PathParameter()],
        cursor: Cursor = None,
        before: Before = None,
    ) -> Template:
        author = path_name(name)
        found = service.registry.implementation(author, cursor, RUNS_PAGE, before, RECORDS_PAGE)
        base = f"/implementations/{quote(author, safe='/')}"
        return _facet_page(
            "implementation.html", base, f"/v1{base}", found, cursor=cursor, before=before
        )

    @get("/projects", sync_to_thread=True, name="page-projects")
    def projects(
        self,
        service: Service,
        start: Annotated[int, QueryParameter(ge=1, le=MAX_SAFE_INTEGER)] = 1,
    ) -> Template:
        found = service.registry.projects(start, LIST_PAGE)
        return _page(
            "projects.html",
            found=found,
            next_href=_href("/projects", start=found.next) if found.next else None,
            json_href=_href("/v1/projects", start=start, limit=LIST_PAGE),
        )

    @get("/projects/{name:path}", sync_to_thread=True, name="page-project")
    def project(
        self,
        service: Service,
        name: Annotated[Path, PathParameter()],
        cursor: Cursor = None,
        before: Before = None,
    ) -> Template:
        project = path_name(name)
        found = service.registry.project(project, cursor, RUNS_PAGE, before, RECORDS_PAGE)
        base = f"/projects/{quote(project, safe='/')}"
        return _facet_page("project.html", base, f"/v1{base}", found, cursor=cursor, before=before)

    @get("/records", sync_to_thread=True, name="page-records")
    def records(
        self,
        service: Service,
        group: Annotated[str | None, QueryParameter(max_length=71)] = None,
        before: Before = None,
    ) -> Template:
        found = service.records.timeline(group, before, TIMELINE_PAGE)
        key = found.comparison_key
        return _page(
            "records.html",
            found=found,
            older=_href("/records", group=key, before=found.next) if found.next else None,
            feed_href=_href("/feeds/records.atom", group=key),
            json_href=_href("/v1/records", group=key, before=before, limit=TIMELINE_PAGE),
        )
