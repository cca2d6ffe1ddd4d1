"""The Litestar application: controllers, problem+json, limits, logs, OpenAPI at /schema."""

from __future__ import annotations

import os
from typing import Any

import anyio.to_thread
from litestar import Litestar, Request, Response
from litestar.datastructures import State
from litestar.di import Provide
from litestar.exceptions import ClientException
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin

from api.server import request_text
from api.server.body_deadline import BodyDeadlineMiddleware
from api.server.config import ServerConfig
from api.server.controllers.common import provide_config, provide_service
from api.server.controllers.health import HealthController
from api.server.controllers.jobs import JobController
from api.server.controllers.keys import KeyController
from api.server.controllers.log import LogController, MonitoringController
from api.server.controllers.registry import RegistryController
from api.server.controllers.runs import RunController
from api.server.controllers.views import ViewController
from api.server.head_requests import HeadAsGet
from api.server.observability import RequestContextMiddleware, configure_logging
from api.server.openapi_document import finish_document
from api.server.openapi_links import add_links
from api.server.openapi_problems import document_problems
from api.server.pages.controller import PageController, template_config
from api.server.pages.feeds import FeedController
from api.server.pages.registry import RegistryPages
from api.server.problems import EXCEPTION_HANDLERS, problem
from api.server.rate_limits import (
    KEY_REGISTRATION,
    TokenBuckets,
    retry_after_header,
    self_registered_key,
)
from api.server.read_cache import (
    ComputeSlots,
    CostedReads,
    PositionReads,
    ReadCache,
    costed_routes,
)
from api.service.ledger_service import LedgerService
from domain.manifests.registry import build_validators
from ledger.application import Ledger
from ledger.group_commit import Writer
from ledger.home import LedgerHome
from ledger.long_lived import settle_heap
from ledger.writer_process import RemoteWriter

API_VERSION = "1.0.0"


# Media types a write body may be sent as (none at all is read as JSON too).
_JSON_TYPES = ("application/json", "")


class _Request(Request[Any, Any, Any]):
    """Litestar's request, refusing a body nested too deep to decode as a client error.

    msgspec raises RecursionError for JSON nested deeper than the interpreter's stack (e.g.
    100k '['): that is the client's document, not a server fault, so it answers 400.
    """

    async def json(self) -> Any:
        try:
            return await super().json()
        except RecursionError:
            raise ClientException("the JSON body is nested too deeply") from None


async def _admit(request: Request[Any, Any, Any]) -> Response[Any] | None:
    """Before any handler (the address was charged already, ``read_cache.CostedReads``): the
    body's media type, and a key's self-registration under its address's minting limit.
    Async though it mostly never waits: Litestar runs a sync hook on a worker thread, a hop
    per request. First of all, the path and query as text (``api.server.request_text``): the
    refusal goes through the route's own handlers (problem+json, or a page for pages)."""
    refused = request_text.refusal(request.scope)
    if refused is not None:
        raise ClientException(refused)
    if request.method == "POST":
        if not _plain_json(request.scope) and not _json_media_type(request):
            media_type = request.content_type[0].lower()
            return problem(
                request,
                "unsupported-media-type",
                f"write bodies are DSSE envelopes sent as application/json, not {media_type}",
            )
        if request.scope.get("path_template") == KEY_REGISTRATION:
            return await _within_minting_limit(request)
    return None


def _plain_json(scope: Any) -> bool:
    """Whether the request names its body ``application/json`` in one plain header: what
    every client of the API sends, taken as JSON without Litestar's parse of the header
    (whose answer, for that header, is the same media type)."""
    found = [value for name, value in scope["headers"] if name == b"content-type"]
    return found == [b"application/json"]


def _json_media_type(request: Request[Any, Any, Any]) -> bool:
    """Whether the body's media type, as Litestar parses the header, is read as JSON."""
    media_type = request.content_type[0].lower()
    return media_type in _JSON_TYPES or media_type.endswith("+json")


async def _within_minting_limit(request: Request[Any, Any, Any]) -> Response[Any] | None:
    """A self-signed key registration costs its address a token of the minting limit, sent
    whether or not it is then admitted (replays and refusals too: the address's own doing).
    The body is read once; the handler reads the same bytes again."""
    limiter: TokenBuckets = request.app.state.registration_limiter
    if limiter.rate <= 0:
        return None
    body = await request.body()
    minted = await anyio.to_thread.run_sync(self_registered_key, body)
    if minted is None:
        return None
    address = request.client.host if request.client else "unknown"
    wait = limiter.take(address)
    if wait is None:
        return None
    return problem(
        request,
        "rate-limited",
        f"too many keys registered from {address} by themselves; retry in {wait:.1f} s",
        headers=retry_after_header(wait),
    )


def create_app(
    ledger: Ledger,
    config: ServerConfig | None = None,
    writer: Writer | None = None,
    home: LedgerHome | None = None,
) -> Litestar:
    """The API and pages over ``ledger``; writes go to ``writer`` (the ledger's writer
    process), else to a writer thread of this process, whose commits are offered to the
    ledger's witnesses (the policy of ``home`` if given, else of the ledger's trust root)."""
    settings = config or ServerConfig()
    configure_logging(settings.json_logs)
    build_validators()  # deferred to first use elsewhere; handlers validate from many threads
    # A server's reads never write: its views are folded by a thread of their own.
    service = LedgerService(
        ledger,
        writer,
        public_url=settings.public_url,
        background=True,
        home=home,
        witnessing=True,
    )
    state = State(
        {
            "service": service,
            "config": settings,
            "key_limiter": TokenBuckets(settings.key_rate, settings.key_burst),
            "address_limiter": TokenBuckets(settings.address_rate, settings.address_burst),
            # A per-address limit too: off with the address limit.
            "registration_limiter": TokenBuckets(
                settings.registration_rate if settings.address_rate > 0 else 0,
                settings.registration_burst,
            ),
            "compute_slots": ComputeSlots(settings.compute_slots, settings.compute_wait),
            "read_cache": ReadCache(settings.read_cache_bytes),
            "position_reads": PositionReads(service.views.position),
        }
    )
    app = Litestar(
        route_handlers=[
            RunController,
            ViewController,
            KeyController,
            LogController,
            MonitoringController,
            HealthController,
            JobController,
            RegistryController,
            PageController,
            RegistryPages,
            FeedController,
        ],
        dependencies={
            "service": Provide(provide_service, sync_to_thread=False),
            "config": Provide(provide_config, sync_to_thread=False),
        },
        state=state,
        middleware=[CostedReads],
        before_request=_admit,
        request_class=_Request,
        exception_handlers=EXCEPTION_HANDLERS,
        on_startup=[service.start],
        on_shutdown=[service.close],
        request_max_body_size=settings.max_body_bytes,
        # Our logging (configure_logging above) is the server's only one: Litestar's default
        # config replaced the root handler, so library records (SQLAlchemy's pool discarding
        # a connection the database ended) came out as plain text with a traceback in a JSON
        # log. Unhandled errors are logged by our own exception handlers.
        logging_config=None,
        template_config=template_config(),
        openapi_config=OpenAPIConfig(
            title="KernelIndex Ledger",
            version=API_VERSION,
            description=(
                "Signed, append-only, offline-verifiable GPU-kernel benchmark results. Writes "
                "are DSSE envelopes authenticated by their signature alone; errors are RFC "
                "9457 problem+json with a stable type per failure."
            ),
            path="/schema",
            render_plugins=[JsonRenderPlugin()],
        ),
    )
    # Outermost, around the router itself: unrouted requests (404, 405) get a request id
    # and an access line too, which route middleware would never see.
    # Inside it, the body deadline: a stalled upload answers 408 with that request id.
    # Innermost of the wrappers, HEAD as GET less the body (api.server.head_requests).
    app.asgi_handler = RequestContextMiddleware(
        BodyDeadlineMiddleware(HeadAsGet(app.asgi_handler), settings.body_timeout)
    )
    # Each costed route with the query parameters its handler reads (its answers' keys).
    app.state.costed_routes = costed_routes(app)
    document_problems(app)  # before the document is generated, once, and cached
    finish_document(app.openapi_schema)  # what /schema serves
    add_links(app.openapi_schema)
    return app


def create_app_from_env() -> Litestar:
    """ASGI factory for uvicorn workers: ``uvicorn --factory api.server.app:create_app_from_env``.

    Reads the ledger home and database from KERNELINDEX_HOME / KERNELINDEX_DB, and the
    writer process from KERNELINDEX_WRITER_ADDRESS / KERNELINDEX_WRITER_KEY when there is one.
    It is a worker process's start: it freezes the process's heap once the app is made
    (``ledger.long_lived``), so call it in-process only where that is wanted.
    """
    home = LedgerHome.at(None, os.environ.get("KERNELINDEX_DB"))
    config = ServerConfig(
        public_url=os.environ.get("KERNELINDEX_PUBLIC_URL"),
        json_logs=os.environ.get("KERNELINDEX_LOG_FORMAT", "json") != "console",
    )
    # A server with a writer process (``kernelindex serve``) gives its workers its address:
    # they hand it every write, and open the ledger only to read (and fold the views).
    writer = RemoteWriter.from_env()
    app = create_app(home.open(read_only=writer is not None), config, writer, home)
    settle_worker_heap()
    return app


def settle_worker_heap() -> None:
    """A worker process ready to serve: its heap settled as every long-running process of
    the ledger settles it (``ledger.long_lived.settle_heap``: start-up frozen, young
    collections every 10,000 allocations, 45,000 fewer instructions per served append)."""
    settle_heap()
