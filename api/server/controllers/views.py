"""/v1/groups, /v1/leaderboards, /v1/compare: the projected read models."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from litestar import Controller, Response, get
from litestar.params import PathParameter, QueryParameter

from api.display import comparison_csv, comparison_markdown
from api.server.controllers.common import Service, operation_name
from api.server.controllers.runs import parse_level
from api.server.service import BOARD_MAX, BOARD_PAGE
from domain.documents import MAX_SAFE_INTEGER
from domain.ranking import View

KeyPath = Annotated[
    str,
    PathParameter(
        description="Comparison key, sha256:<64 hex>, or a unique prefix (4+ hex digits).",
        max_length=71,
    ),
]


class ViewController(Controller):
    path = "/v1"
    tags = ("leaderboards",)

    @get("/groups", sync_to_thread=True, summary="Comparison groups")
    def groups(
        self,
        service: Service,
        benchmark: Annotated[str | None, QueryParameter(max_length=300)] = None,
        gpu: Annotated[str | None, QueryParameter(max_length=200)] = None,
    ) -> list[dict[str, Any]]:
        return service.groups(benchmark, gpu)

    @get("/leaderboards/{key:str}", sync_to_thread=True, summary="A comparison group's ranking")
    def leaderboard(
        self,
        service: Service,
        key: KeyPath,
        view: Annotated[
            View, QueryParameter(description="source-native or verified")
        ] = View.SOURCE_NATIVE,
        min_level: Annotated[str | None, QueryParameter(name="minLevel")] = None,
        start: Annotated[int, QueryParameter(ge=1, le=MAX_SAFE_INTEGER)] = 1,
        limit: Annotated[int, QueryParameter(ge=1, le=BOARD_MAX)] = BOARD_PAGE,
    ) -> dict[str, Any]:
        return service.leaderboard(
            service.resolve_group(key), view, parse_level(min_level), start, limit
        )

    @get("/operations", sync_to_thread=True, summary="Operations, most runs first")
    def operations(self, service: Service) -> list[dict[str, Any]]:
        return service.operations()

    # A path parameter: GPU MODE operations are named like amd-fp8-mm/10.
    @get("/operations/{name:path}", sync_to_thread=True, summary="One operation's groups")
    def operation(
        self,
        service: Service,
        name: Annotated[Path, PathParameter(description="The operation (benchmark) name.")],
    ) -> dict[str, Any]:
        return service.operation(operation_name(name))

    @get("/search", sync_to_thread=True, summary="Comparison groups every word matches")
    def search(
        self,
        service: Service,
        q: Annotated[
            str,
            QueryParameter(
                max_length=300,
                description="Words: operation, GPU (B200), dtype, axes, source, stack, author...",
            ),
        ],
        limit: Annotated[int, QueryParameter(ge=1, le=500)] = 50,
    ) -> dict[str, Any]:
        return service.search(q, limit)

    @get("/comparisons", sync_to_thread=True, summary="2 to 8 runs side by side")
    def comparison(
        self,
        service: Service,
        runs: Annotated[
            str,
            QueryParameter(
                max_length=2500, description="2 to 8 run references, separated by commas"
            ),
        ],
        format: Annotated[
            str, QueryParameter(pattern="^(json|csv|md)$", description="json, csv or md")
        ] = "json",
    ) -> Response[Any]:
        result = service.compare_many([r for r in runs.split(",") if r.strip()])
        if format == "csv":
            return Response(comparison_csv(result), media_type="text/csv; charset=utf-8")
        if format == "md":
            return Response(comparison_markdown(result), media_type="text/markdown; charset=utf-8")
        return Response(result)

    @get("/compare", sync_to_thread=True, summary="Differences of two runs, a ÷ b")
    def compare(
        self,
        service: Service,
        a: Annotated[str, QueryParameter(max_length=300)],
        b: Annotated[str, QueryParameter(max_length=300)],
    ) -> dict[str, Any]:
        return service.compare(a, b)
