"""Request ids and structured logs.

Every request gets an id (the client's ``X-Request-ID`` when it is a sane token, else a fresh
one), echoed in the response header and in problem+json bodies, and bound to every log line
written while the request is served; one access line per request records method, path,
status and duration.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
import uuid
from typing import Any

import structlog
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

REQUEST_ID_HEADER = b"x-request-id"
# On every response: nothing is sniffed into another type, no page runs a script but this
# site's own files (no inline script, no eval: the search suggestions' /static/search.js),
# fetches from anywhere else or loads anything but its own stylesheet, none can be framed,
# and nothing leaks in a Referer. Forms submit only to this site (search is a plain GET).
SECURITY_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; "
        b"img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    (b"referrer-policy", b"no-referrer"),
)
_SANE_ID = re.compile(r"^[A-Za-z0-9._\-]{8,64}$")

_access: Any = structlog.get_logger("kernelindex.access")
_STDLIB_HANDLER = "kernelindex-stdlib"


class _AccessRoad:
    """The access line written by the configured processors themselves, without structlog's
    bound-logger wrapper (its method proxy and ``_process_event``: ~5 µs a request). It runs
    the very list ``_access`` was bound with, so an edit of that list in place (as
    ``structlog.testing.capture_logs`` makes) reaches both alike."""

    __slots__ = ("chain", "out")

    def __init__(self, chain: list[Any], out: Any) -> None:
        self.chain = chain  # the very list structlog was configured with (and _access uses)
        self.out = out  # a PrintLogger from the same factory: same file, same lock

    def write(self, event_dict: dict[str, Any]) -> None:
        """``_access.info(**event_dict)``: the same event dict through the same processors,
        and the rendered line printed as the logger prints it."""
        line: Any = event_dict
        try:
            for processor in self.chain:
                line = processor(self.out, "info", line)
        except structlog.DropEvent:
            return
        self.out.msg(line)


_access_road: _AccessRoad | None = None
_ENCODERS: dict[Any, json.JSONEncoder] = {}


def _json_dumps(obj: Any, **options: Any) -> str:
    """``json.dumps(obj, **options)``: with options given, json.dumps makes a JSONEncoder per
    call (~3 µs a line); the renderer passes only ``default``, so its encoder is made once
    (an encoder keeps no state between calls)."""
    if options.keys() != {"default"}:
        return json.dumps(obj, **options)
    default = options["default"]
    encoder = _ENCODERS.get(default)
    if encoder is None:
        encoder = _ENCODERS[default] = json.JSONEncoder(default=default)
    return encoder.encode(obj)


def configure_logging(json_logs: bool = True, level: int = logging.INFO) -> None:
    renderer: Any = (
        structlog.processors.JSONRenderer(serializer=_json_dumps)
        if json_logs
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    chain: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
        renderer,
    ]
    factory = structlog.PrintLoggerFactory(file=sys.stderr)
    structlog.configure(
        processors=chain,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=factory,
        cache_logger_on_first_use=False,
    )
    # The access logger bound once per configuration, not looked up through structlog's
    # lazy proxy at every request (the same processors, so the same lines): a proxy builds
    # a new bound logger per call.
    global _access, _access_road  # noqa: PLW0603
    _access = structlog.get_logger("kernelindex.access").bind()
    # A level above INFO filters the access line out: the wrapper's road (a no-op) then.
    _access_road = _AccessRoad(chain, factory()) if level <= logging.INFO else None
    _route_stdlib_logging(json_logs, renderer)


def _route_stdlib_logging(json_logs: bool, renderer: Any) -> None:
    """The libraries' own warnings (SQLAlchemy's pool discarding a connection the database
    ended, say) as lines of the same log: one JSON object each, their exception as data.
    Without this, Python's last-resort handler printed a multi-line traceback into a JSON
    log for a failure the library had already handled."""
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[
            structlog.stdlib.add_logger_name,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
        ],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.dict_tracebacks
            if json_logs
            else structlog.processors.format_exc_info,
            renderer,
        ],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    handler.set_name(_STDLIB_HANDLER)
    root = logging.getLogger()
    root.handlers = [h for h in root.handlers if h.get_name() != _STDLIB_HANDLER]
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.WARNING:
        root.setLevel(logging.WARNING)


def _request_id(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name == REQUEST_ID_HEADER:
            text = value.decode("latin-1")
            if _SANE_ID.match(text):
                return text
    return uuid.uuid4().hex


class RequestContextMiddleware:
    """ASGI middleware: request id, log context, access log line."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        request_id = _request_id(scope)
        scope.setdefault("state", {})["request_id"] = request_id
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                headers.append((REQUEST_ID_HEADER, request_id.encode()))
                headers.extend(SECURITY_HEADERS)
                message["headers"] = headers
            await send(message)

        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(request_id=request_id)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            client = scope.get("client")
            access_line(
                method=scope.get("method"),
                path=scope.get("path"),
                status=status,
                duration_ms=round((time.perf_counter() - started) * 1000, 3),
                client=client[0] if client else None,
            )
            structlog.contextvars.clear_contextvars()


def access_line(**fields: Any) -> None:
    """One access line: ``_access.info("request", **fields)``, through the configured
    processors directly where configure_logging made the road."""
    road = _access_road
    if road is None:
        _access.info("request", **fields)
        return
    # The event dict _process_event builds: the bound context (none), the fields, the event.
    fields["event"] = "request"
    road.write(fields)
