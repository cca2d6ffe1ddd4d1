"""/v1/groups, /v1/leaderboards, /v1/search, /v1/compare: the projected read models."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from litestar import Controller, Response, get
from litestar.di import NamedDependency, Provide
from litestar.params import PathParameter, QueryParameter

from api.display import comparison_csv, comparison_markdown
from api.server.controllers.common import Service, operation_name
from api.server.controllers.runs import parse_level
from api.server.openapi_problems import refuses
from api.service.boards import BOARD_MAX, BOARD_PAGE, Order
from api.service.errors import AmbiguousReferenceError, BadQueryError, NotFoundError
from api.service.models import to_builtins
from api.service.models.search import MAX_PER_PAGE as SEARCH_MAX_PER_PAGE
from api.service.models.search import PER_PAGE as SEARCH_PER_PAGE
from api.service.models.search import SORTS as SEARCH_SORTS
from api.service.models.search import SearchFilters, SearchPage, Suggestions
from api.service.models.views import (
    Comparison,
    GroupSummary,
    Leaderboard,
    Operation,
    OperationSummary,
    RunComparison,
)
from domain.documents import MAX_SAFE_INTEGER
from domain.errors import DomainError
from domain.ranking import View

CSV = "text/csv; charset=utf-8"
MARKDOWN = "text/markdown; charset=utf-8"

KeyPath = Annotated[
    str,
    PathParameter(
        description="Comparison key, sha256:<64 hex>, or a unique prefix (4+ hex digits).",
        max_length=71,
    ),
]


# A value of a facet of search (``facets`` in its reply), e.g. gpu=B200, level=verified.
SearchFilter = Annotated[str | None, QueryParameter(max_length=200)]


def search_filters(
    gpu: SearchFilter = None,
    source: SearchFilter = None,
    dtype: SearchFilter = None,
    level: SearchFilter = None,
    license: SearchFilter = None,
    installable: SearchFilter = None,
) -> SearchFilters:
    """The facets a search narrows to, from its query parameters (the page's form too)."""
    return SearchFilters(
        gpu=gpu,
        source=source,
        dtype=dtype,
        level=level,
        license=license,
        installable=installable,
    )


class ViewController(Controller):
    path = "/v1"
    tags = ("leaderboards",)

    @get(
        "/groups",
        sync_to_thread=True,
        summary="Comparison groups",
        opt=refuses(NotFoundError, AmbiguousReferenceError),
    )
    def groups(
        self,
        service: Service,
        benchmark: Annotated[str | None, QueryParameter(max_length=300)] = None,
        gpu: Annotated[
            str | None,
            QueryParameter(
                max_length=200,
                description="A GPU as typed: its name or a part of it (B200, mi300x), or an "
                "alias (hopper); several candidates answer 400 naming them",
            ),
        ] = None,
    ) -> list[GroupSummary]:
        return service.boards.groups(benchmark, gpu)

    @get(
        "/leaderboards/{key:str}",
        sync_to_thread=True,
        summary="A comparison group's ranking",
        opt=refuses(NotFoundError, AmbiguousReferenceError, BadQueryError),
    )
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
        order: Annotated[
            Order,
            QueryParameter(
                description="rank (the ledger's ranking) or sol-score (SOL-ExecBench's score, "
                "best first; the rank stays the ledger's)"
            ),
        ] = Order.RANK,
        per_user: Annotated[
            bool, QueryParameter(name="perUser", description="each author's best run only")
        ] = False,
    ) -> Leaderboard:
        return service.boards.leaderboard(
            key, view, parse_level(min_level), start, limit, order, per_user
        )

    @get("/operations", sync_to_thread=True, summary="Operations, most runs first")
    def operations(self, service: Service) -> list[OperationSummary]:
        return service.boards.operations()

    # A path parameter: GPU MODE operations are named like amd-fp8-mm/10.
    @get(
        "/operations/{name:path}",
        sync_to_thread=True,
        summary="One operation's groups",
        opt=refuses(NotFoundError),
    )
    def operation(
        self,
        service: Service,
        name: Annotated[Path, PathParameter(description="The operation (benchmark) name.")],
    ) -> Operation:
        return service.boards.operation(operation_name(name))

    @get(
        "/search",
        sync_to_thread=True,
        dependencies={"filters": Provide(search_filters, sync_to_thread=False)},
        summary="Comparison groups every word and filter matches, a page at a time",
        opt=refuses(BadQueryError),
    )
    def search(
        self,
        service: Service,
        filters: NamedDependency[SearchFilters],
        q: Annotated[
            str,
            QueryParameter(
                max_length=300,
                description="Words: operation, GPU (B200), dtype, axes, source, stack, author...",
            ),
        ] = "",
        sort: Annotated[
            str, QueryParameter(max_length=20, description=f"One of {', '.join(SEARCH_SORTS)}")
        ] = "relevance",
        page: Annotated[int, QueryParameter(ge=1, le=MAX_SAFE_INTEGER)] = 1,
        per_page: Annotated[
            int, QueryParameter(name="perPage", ge=1, le=SEARCH_MAX_PER_PAGE)
        ] = SEARCH_PER_PAGE,
    ) -> SearchPage:
        return service.search.groups(q, filters, sort=sort, page=page, per_page=per_page)

    @get("/search/suggest", sync_to_thread=True, summary="What a query being typed may be after")
    def suggest(
        self, service: Service, q: Annotated[str, QueryParameter(max_length=100)] = ""
    ) -> Suggestions:
        return service.search.suggest(q)

    @get(
        "/comparisons",
        sync_to_thread=True,
        summary="2 to 8 runs side by side",
        # Unknown or ambiguous runs; fewer than 2, more than 8 or repeated (invalid-input).
        opt=refuses(NotFoundError, AmbiguousReferenceError, DomainError),
    )
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
    ) -> Response[Comparison | str]:
        result = service.compare.many([r for r in runs.split(",") if r.strip()])
        if format == "csv":
            return Response(comparison_csv(to_builtins(result)), media_type=CSV)
        if format == "md":
            return Response(comparison_markdown(to_builtins(result)), media_type=MARKDOWN)
        return Response(result)

    @get(
        "/compare",
        sync_to_thread=True,
        summary="Differences of two runs, a ÷ b",
        opt=refuses(NotFoundError, AmbiguousReferenceError),
    )
    def compare(
        self,
        service: Service,
        a: Annotated[str, QueryParameter(max_length=300)],
        b: Annotated[str, QueryParameter(max_length=300)],
    ) -> RunComparison:
        return service.compare.two(a, b)
