"""Server-rendered pages: index, search, run record, leaderboard (with an SVG chart), history.

Plain HTML from Jinja templates, no build step; one small script (``static/search.js``)
suggests as a query is typed, and the search form works without it. Each page reads what its /v1
JSON twin reads (through the same LedgerService) and links to it. Errors on these routes are
small HTML pages with the right status; the JSON API keeps problem+json.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, urlencode

import structlog
from litestar import Controller, MediaType, Request, Response, get
from litestar.di import NamedDependency, Provide
from litestar.params import Parameter, PathParameter, QueryParameter
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.response import Template
from litestar.template.config import TemplateConfig
from markupsafe import Markup
from msgspec import structs

from api.server.controllers.common import Service, operation_name
from api.server.controllers.views import search_filters
from api.server.pages.chart import Bar, bar_chart
from api.server.pages.errors import PAGE_EXCEPTION_HANDLERS, error_page
from api.server.pages.feeds import run_badge_svg
from api.server.pages.format import FILTERS, badge_rules, path_segment
from api.server.pages.source import (
    MAX_INLINE_BYTES,
    MAX_INLINE_LINES,
    SourceFile,
    artifact_view,
    is_text_media_type,
    language_class,
    language_of,
    size_text,
    source_preview,
)
from api.service.boards import Order
from api.service.errors import ArtifactError, ArtifactNotFound, BadQueryError
from api.service.ledger_service import LedgerService
from api.service.models.runs import RunRecord
from api.service.models.search import FACETS as SEARCH_FACETS
from api.service.models.search import MAX_PER_PAGE as SEARCH_MAX_PER_PAGE
from api.service.models.search import PER_PAGE as SEARCH_PER_PAGE
from api.service.models.search import SORTS as SEARCH_SORTS
from api.service.models.search import SearchFilters
from api.service.models.views import Leaderboard
from api.service.run_reads import StoredFacts
from domain.documents import MAX_SAFE_INTEGER
from domain.quantities import format_value
from domain.ranking import View

HERE = Path(__file__).parent
# The badge colours come from the one table the chart uses too (the pages' CSP forbids
# inline styles, so they are rules here, not attributes).
STYLESHEET = (
    (HERE / "static" / "style.css").read_text("utf-8")
    + badge_rules()
    # The source view's rules (line numbers, code blocks) live beside it in their own file.
    + (HERE / "static" / "source.css").read_text("utf-8")
)
# Suggestions as a query is typed (progressive: the search form works without it).
SEARCH_SCRIPT = (HERE / "static" / "search.js").read_text("utf-8")
RECENT_RUNS = 15

_log = structlog.get_logger("kernelindex.pages")

DigestPath = Annotated[str, Parameter(max_length=71)]
KeyPath = Annotated[str, Parameter(max_length=71)]  # a key or a unique prefix
# Artifacts are content-addressed: a page names one by its whole digest, never a prefix.
ARTIFACT_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
ViewQuery = Annotated[View, QueryParameter()]
PAGE_BOARD = 50  # entries (and chart bars) per leaderboard page
INDEX_GROUPS = 20  # the biggest comparison groups on the index page
INDEX_OPERATIONS = 30


@dataclass(frozen=True)
class ArtifactFile:
    """A stored artifact as a page lists it: its facts, and whether (and as what) it reads
    as text."""

    name: str | None
    media_type: str | None
    size: int
    text: bool
    language: str | None


def artifact_files(stored: dict[str, StoredFacts]) -> dict[str, ArtifactFile]:
    """The facts the service read of stored artifacts, with what the page shows of them: a
    "View source" link only for text (the artifact page reads, and re-hashes, the content)."""
    return {
        digest: ArtifactFile(
            name=f.name,
            media_type=f.media_type,
            size=f.size,
            text=is_text_media_type(f.media_type),
            language=language_of(f.media_type, f.name),
        )
        for digest, f in stored.items()
    }


def implementation_preview(
    service: LedgerService, record: RunRecord, files: dict[str, ArtifactFile]
) -> dict[str, Any] | None:
    """The head of the run's implementation source for the run page, or None when it is not
    stored here or not text. A damaged source says so in place of the preview: the rest of
    the run record is still worth reading, so the page does not fail with it."""
    digest = next(
        (a.digest for a in record.artifacts if a.role == "implementationSource" and a.stored),
        None,
    )
    if digest is None or digest not in files or not files[digest].text:
        return None
    manifest = (record.implementation.manifest if record.implementation else None) or {}
    entry = ((manifest.get("spec") or {}).get("callable") or {}).get("path")
    try:
        stored = service.log.artifact(digest)
    except ArtifactError as exc:
        _log.warning("artifact_refused", digest=digest, detail=exc.message)
        return {"error": exc.message}
    shown: SourceFile | None = source_preview(stored, entry if isinstance(entry, str) else None)
    if shown is None:  # labelled text, yet not UTF-8: the table's link says what it is
        return None
    # A bundle's file is read on its own page when it was stored on its own too (importers
    # keep each file of a solution), else on the bundle's page, which lists its files.
    target = (
        shown.digest if shown.digest == digest or service.log.has_artifact(shown.digest) else digest
    )
    return {
        "file": shown,
        "href": f"/artifacts/{path_segment(target)}",
        "in_bundle": shown.digest != digest,
    }


# ---------------------------------------------------------------------------- helpers


def board_chart(board: Leaderboard, view: View) -> Markup | None:
    entries = board.entries
    if not entries:
        return None
    unit = entries[0].unit if view is View.SOURCE_NATIVE else "ns"
    statistic = entries[0].statistic if view is View.SOURCE_NATIVE else "rerun median"
    metric = entries[0].metric if view is View.SOURCE_NATIVE else "latency"
    lower = "shorter is faster" if metric == "latency" else "shorter is better"
    bars = [
        Bar(
            # Each user's best: the user names the bar; else the run does.
            label=f"#{e.rank} {e.author if board.per_user and e.author else e.name}",
            value=float(e.value),
            value_text=format_value(e.value, unit),
            level=e.evidence_level,
        )
        for e in entries
    ]
    summary = "; ".join(f"{b.label}: {b.value_text}" for b in bars)
    svg = bar_chart(
        bars,
        title=f"{(statistic or '').capitalize()} {metric} per run, {view} view ({lower})",
        description=f"{len(bars)} runs in rank order from rank {entries[0].rank}. {summary}.",
        chart_id="latency-chart",
    )
    # bar_chart escapes every text it writes, so its markup is safe to insert as is.
    return Markup(svg)  # noqa: S704


def _board_href(key: str, shown: dict[str, Any], **changed: Any) -> str:
    """A leaderboard page's address: its view, order and per-user choice (``shown``),
    ``changed`` applied; a choice at its default (rank order, every run, the first entry)
    is left out."""
    chosen = {**shown, **changed}
    defaults = {"order": str(Order.RANK), "perUser": "false", "start": "1"}
    texts = {
        name: str(value).lower() if isinstance(value, bool) else str(value)
        for name, value in chosen.items()
    }
    return f"/leaderboards/{path_segment(key)}?" + "&".join(
        f"{name}={quote(text)}" for name, text in texts.items() if defaults.get(name) != text
    )


def _page(name: str, **context: Any) -> Template:
    return Template(template_name=name, context=context, media_type=MediaType.HTML)


def search_href(asked: dict[str, str | None]) -> Callable[..., str]:
    """A maker of ``/search`` links: the parameters asked with some changed (None: left
    out). A link to another filter or sort starts again at page 1."""

    def href(**changes: str | int | None) -> str:
        merged: dict[str, str | int | None] = {**asked, **changes}
        if "page" not in changes:
            merged["page"] = None
        if merged.get("sort") == "relevance":
            merged["sort"] = None
        kept = {k: v for k, v in merged.items() if v}
        return "/search?" + urlencode(kept) if kept else "/search"

    return href


# ------------------------------------------------------------------------- the pages


class PageController(Controller):
    path = "/"
    include_in_schema = False
    exception_handlers = PAGE_EXCEPTION_HANDLERS

    @get("/", sync_to_thread=True, name="page-index")
    def index(self, service: Service) -> Template:
        # A summary, not every group: the biggest, and the way to the rest.
        front = service.boards.front_page(INDEX_GROUPS, INDEX_OPERATIONS, RECENT_RUNS)
        # The ways in besides words: every GPU, source and dtype, with their groups.
        every = service.search.groups(per_page=1)
        return _page(
            "index.html",
            sources=front.sources,
            groups=front.groups,
            group_count=front.group_count,
            searchable=every.total,
            operations=front.operations,
            recent=front.recent,
            facets={f.name: f.values for f in every.facets},
            log_size=service.log.checkpoint().size,
            json_href="/v1/groups",
        )

    @get("/operations", sync_to_thread=True, name="page-operations")
    def operations(self, service: Service) -> Template:
        return _page(
            "operations.html", operations=service.boards.operations(), json_href="/v1/operations"
        )

    @get("/operations/{name:path}", sync_to_thread=True, name="page-operation")
    def operation(self, service: Service, name: Annotated[Path, PathParameter()]) -> Template:
        operation = operation_name(name)
        found = service.boards.operation(operation)
        first = found.groups[0]
        bars = [
            Bar(
                label=" · ".join(str(x) for x in (g.gpu, g.apart_short) if x),
                value=float(g.top.value),
                value_text=format_value(g.top.value, g.unit),
            )
            for g in found.groups
            # One axis: only the groups measured as the first is (metric, statistic, unit).
            if g.top.value is not None
            and (g.metric, g.statistic, g.unit) == (first.metric, first.statistic, first.unit)
        ]
        chart = (
            Markup(  # noqa: S704 - bar_chart escapes every text it writes
                bar_chart(
                    bars,
                    title=f"Each group's #1, {operation} ({first.metric})",
                    description=f"{len(bars)} groups. "
                    + "; ".join(f"{b.label}: {b.value_text}" for b in bars),
                    chart_id="operation-chart",
                )
            )
            if len(bars) > 1
            else None
        )
        return _page(
            "operation.html",
            found=found,
            chart=chart,
            json_href=f"/v1/operations/{quote(operation, safe='/')}",
        )

    @get("/compare", sync_to_thread=True, name="page-compare")
    def compare(
        self, service: Service, runs: Annotated[str, QueryParameter(max_length=2500)] = ""
    ) -> Template:
        references = [r.strip() for r in runs.split(",") if r.strip()]
        result = service.compare.many(references) if references else None
        query = quote(",".join(references))
        return _page(
            "compare.html",
            result=result,
            runs=",".join(references),
            json_href=f"/v1/comparisons?runs={query}" if references else None,
            exports={
                "Markdown": f"/v1/comparisons?runs={query}&format=md",
                "CSV": f"/v1/comparisons?runs={query}&format=csv",
                "JSON": f"/v1/comparisons?runs={query}",
            },
        )

    @get(
        "/search",
        sync_to_thread=True,
        name="page-search",
        dependencies={"filters": Provide(search_filters, sync_to_thread=False)},
    )
    def search(
        self,
        service: Service,
        filters: NamedDependency[SearchFilters],
        q: Annotated[str, QueryParameter(max_length=300)] = "",
        sort: Annotated[str, QueryParameter(max_length=20)] = "relevance",
        page: Annotated[int, QueryParameter(ge=1, le=MAX_SAFE_INTEGER)] = 1,
        per_page: Annotated[
            int, QueryParameter(name="perPage", ge=1, le=SEARCH_MAX_PER_PAGE)
        ] = SEARCH_PER_PAGE,
    ) -> Template:
        asked: dict[str, str | None] = {"q": q.strip(), **structs.asdict(filters), "sort": sort}
        if per_page != SEARCH_PER_PAGE:
            asked["perPage"] = str(per_page)
        searched = any(asked[name] for name in ("q", *SEARCH_FACETS))
        # Nothing asked yet: the ways in (every GPU, source, dtype) are the facets of all.
        found = service.search.groups(q, filters, sort=sort, page=page, per_page=per_page)
        href = search_href(asked)
        return _page(
            "search.html",
            found=found,
            searched=searched,
            chosen=[(n, v) for n, v in structs.asdict(found.filters).items() if v],
            query=q,
            href=href,
            sorts=SEARCH_SORTS,
            json_href="/v1/search" + href(page=page, perPage=per_page).removeprefix("/search"),
        )

    @get("/static/search.js", sync_to_thread=False, name="page-search-script")
    def search_script(self) -> Response[str]:
        return Response(
            SEARCH_SCRIPT,
            media_type="text/javascript",
            headers={"Cache-Control": "public, max-age=3600"},
        )

    @get("/log", sync_to_thread=True, name="page-log")
    def log(self, service: Service) -> Template:
        return _page(
            "log.html", checkpoint=service.log.checkpoint(), json_href="/v1/log/checkpoint"
        )

    @get("/runs/{digest:str}", sync_to_thread=True, name="page-run")
    def run(
        self, request: Request[Any, Any, Any], service: Service, digest: DigestPath
    ) -> Template:
        page = service.runs.page(digest)
        record = page.record
        segment = path_segment(record.digest)
        files = artifact_files(page.artifacts)
        native = record.standings.get(str(View.SOURCE_NATIVE)) if record.standings else None
        return _page(
            "run.html",
            run=record,
            artifact_facts=files,
            source_preview=implementation_preview(service, record, files),
            json_href=f"/v1/runs/{segment}",
            history_href=f"/runs/{segment}/history",
            # Drawn here and escaped by run_badge, like the chart: safe to insert as markup.
            badge_svg=Markup(  # noqa: S704
                run_badge_svg(
                    record.evidence.level if record.evidence else None,
                    (native.rank, native.of) if native is not None else None,
                )
            ),
            checkpoint=page.checkpoint,
            # Where the copyable commands post: the configured public URL only (never the
            # client's Host header).
            server_url=(request.app.state.config.public_url or "").rstrip("/") or None,
        )

    @get("/runs/{digest:str}/history", sync_to_thread=True, name="page-history")
    def history(
        self,
        service: Service,
        digest: DigestPath,
        start: Annotated[int, QueryParameter(ge=1, le=MAX_SAFE_INTEGER)] = 1,
    ) -> Template:
        history = service.history.run(digest, start)
        segment = path_segment(history.run)
        following = history.next
        return _page(
            "history.html",
            history=history,
            run=service.runs.names(history.run),
            json_href=f"/v1/runs/{segment}/history?start={history.start}",
            run_href=f"/runs/{segment}",
            next_href=f"/runs/{segment}/history?start={following}" if following else None,
            first_href=f"/runs/{segment}/history" if history.start > 1 else None,
        )

    @get("/leaderboards/{key:str}", sync_to_thread=True, name="page-leaderboard")
    def leaderboard(
        self,
        service: Service,
        key: KeyPath,
        view: ViewQuery = View.SOURCE_NATIVE,
        start: Annotated[int, QueryParameter(ge=1, le=MAX_SAFE_INTEGER)] = 1,
        order: Annotated[Order, QueryParameter()] = Order.RANK,
        per_user: Annotated[bool, QueryParameter(name="perUser")] = False,
    ) -> Template:
        board, group = service.boards.board_page(
            key, view, start, PAGE_BOARD, order=order, per_user=per_user
        )
        key = board.comparison_key
        shown = f"view={view}" + (f"&order={order}" if order is not Order.RANK else "")
        shown += "&perUser=true" if per_user else ""
        return _page(
            "leaderboard.html",
            board=board,
            group=group,
            view=str(view),
            views=[str(v) for v in View],
            order=str(order),
            per_user=per_user,
            # The page's own address with one choice changed (the others kept).
            href=lambda **changed: _board_href(
                key, {"view": view, "order": order, "perUser": per_user}, **changed
            ),
            chart=board_chart(board, view),
            json_href=f"/v1/leaderboards/{key}?{shown}&start={start}&limit={PAGE_BOARD}",
            page_size=PAGE_BOARD,
        )

    @get("/artifacts/{digest:str}", sync_to_thread=True, name="page-artifact")
    def artifact(
        self, request: Request[Any, Any, Any], service: Service, digest: DigestPath
    ) -> Template:
        digest = digest.strip().lower()
        if not ARTIFACT_DIGEST.fullmatch(digest):
            raise BadQueryError(
                f"{digest!r} is not an artifact digest: an artifact is named by its whole "
                "digest, sha256: and 64 hex digits"
            )
        try:
            stored = service.log.artifact(digest)  # re-hashed: damaged content is refused
        except ArtifactNotFound:
            raise
        except ArtifactError as exc:
            # Not the client's fault and not a crash: the stored bytes no longer match their
            # name. Say so plainly (the API answers the same code), and leave it in the log.
            _log.warning("artifact_refused", digest=digest, detail=exc.message)
            return error_page(
                request,
                exc.status,
                exc.code,
                f"{exc.message}. The ledger does not show or serve content that fails its "
                "digest; the signed events still name the digest, so an intact copy can be "
                "checked against it.",
                title="The stored artifact is damaged",
            )
        view = artifact_view(stored)
        return _page(
            "artifact.html",
            artifact=stored,
            size=len(stored.content),
            view=view,
            download_href=f"/v1/artifacts/{path_segment(stored.digest)}",
            max_lines=MAX_INLINE_LINES,
            max_bytes=MAX_INLINE_BYTES,
            # A solution bundle's files that were also stored on their own get a page each.
            stored_files=service.runs.stored_facts([f.digest for f in view.files]),
        )

    @get("/static/style.css", sync_to_thread=False, name="page-style", media_type="text/css")
    def stylesheet(self) -> Response[str]:
        return Response(
            STYLESHEET, media_type="text/css", headers={"Cache-Control": "public, max-age=3600"}
        )


def template_config() -> TemplateConfig[JinjaTemplateEngine]:
    def register(engine: JinjaTemplateEngine) -> None:
        engine.engine.filters.update(FILTERS)
        engine.engine.filters.update(size=size_text, language_class=language_class)
        # Block tags leave no blank lines behind, so the served HTML stays readable.
        engine.engine.trim_blocks = True
        engine.engine.lstrip_blocks = True

    return TemplateConfig(
        directory=HERE / "templates", engine=JinjaTemplateEngine, engine_callback=register
    )
