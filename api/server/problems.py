"""RFC 9457 problem details: every failure answers application/problem+json with a stable type.

``type`` is ``https://kernelindex.dev/problems/<code>`` where ``<code>`` is the same stable code
the CLI prints (``error[<code>]``), so a client can branch on it. Nothing a client sends can
produce a 500: unexpected server faults are logged with the request id and answered without
internals.
"""

from __future__ import annotations

from typing import Any

import structlog
from litestar import Request, Response
from litestar.exceptions import HTTPException, NotFoundException, ValidationException
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR
from litestar.types import ExceptionHandlersMap
from msgspec import UNSET

from api.service.models.problem import Problem
from domain.errors import DomainError
from ledger.errors import store_error

PROBLEM_BASE = "https://kernelindex.dev/problems/"
PROBLEM_JSON = "application/problem+json"

# HTTP status per stable code; codes not listed use the error's own ``status`` or 422.
STATUS_BY_CODE: dict[str, int] = {
    "malformed-document": 400,
    "malformed-envelope": 400,
    "malformed-request": 400,
    "ambiguous-reference": 400,
    "bad-signature": 403,
    "unknown-key": 403,
    "revoked-key": 403,
    "expired-key": 403,
    "wrong-role": 403,
    "not-found": 404,
    "method-not-allowed": 405,
    "request-timeout": 408,
    "already-exists": 409,
    "conflict": 409,
    "too-large": 413,
    "unsupported-media-type": 415,
    "rate-limited": 429,
    "internal": 500,
    "unavailable": 503,
    "store-unavailable": 503,
    "read-only-store": 503,
    "store-full": 507,
    "schema-not-current": 503,
}

TITLES: dict[str, str] = {
    "bad-signature": "The signature does not verify",
    "unknown-key": "The signing key is not registered",
    "revoked-key": "The signing key is revoked",
    "expired-key": "The signing key is not valid at this time",
    "wrong-role": "The signing key's role may not make this statement",
    "schema-violation": "The document violates its schema",
    "malformed-document": "The body is not well-formed JSON",
    "malformed-envelope": "The body is not a well-formed DSSE envelope",
    "malformed-request": "The request is malformed",
    "unprocessable-envelope": "The ledger could not process this envelope",
    "too-large": "The request is too large",
    "rate-limited": "Too many requests",
    "not-found": "Not found",
    "wrong-endpoint": "The statement does not belong to this endpoint",
    "internal": "Internal error",
    "store-unavailable": "The database failed the request",
    "read-only-store": "The database is read-only",
    "store-full": "The database is full",
    "request-timeout": "The request was not received in time",
    "schema-not-current": "The database schema is not this server's",
    "views-stalled": "The read models cannot fold the log past an event",
}

_log = structlog.get_logger("kernelindex.api")


def status_of(error: DomainError | type[DomainError]) -> int:
    """The HTTP status a domain error answers with: its code's, else its own, else 422.

    The exception handler answers with it and the OpenAPI document lists it, from this one
    rule (``api.server.openapi_problems``)."""
    return STATUS_BY_CODE.get(error.code) or getattr(error, "status", None) or 422


def problem(
    request: Request[Any, Any, Any],
    code: str,
    detail: str,
    status: int | None = None,
    headers: dict[str, str] | None = None,
    position: int | None = None,
) -> Response[Problem]:
    status = status or STATUS_BY_CODE.get(code, 422)
    body = Problem(
        type=PROBLEM_BASE + code,
        title=TITLES.get(code, code.replace("-", " ").capitalize()),
        status=status,
        detail=detail,
        instance=request.url.path,
        code=code,
        request_id=request.scope.get("state", {}).get("request_id"),
        position=UNSET if position is None else position,
    )
    return Response(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


def domain_error_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[Problem]:
    assert isinstance(exc, DomainError)
    status = status_of(exc)
    if status >= 500:
        _log.error("ledger_fault", code=exc.code, detail=exc.message)
    position = getattr(exc, "position", None)
    return problem(request, exc.code, exc.message, status, position=position)


def http_error_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[Problem]:
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    if isinstance(exc, ValidationException):
        detail = "; ".join(
            f"{e.get('key', '')}: {e.get('message', '')}".strip(": ")
            for e in (exc.extra if isinstance(exc.extra, list) else [])
            if isinstance(e, dict)
        )
        return problem(request, "malformed-request", detail or str(exc.detail), 400)
    if isinstance(exc, NotFoundException):
        return problem(request, "not-found", f"no resource at {request.url.path}", 404)
    code = {
        405: "method-not-allowed",
        413: "too-large",
        415: "unsupported-media-type",
        429: "rate-limited",
        503: "unavailable",
    }.get(status, "malformed-request" if status < 500 else "internal")
    headers = dict(exc.headers or {})
    return problem(request, code, str(exc.detail), status, headers=headers)


def internal_error_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[Problem]:
    refused = store_error(exc)
    if refused is not None:
        # A database failure (full, read-only, connection lost) is the store's, not a bug:
        # a stable code the client can act on; the driver's text stays in the log.
        cause = str(exc).splitlines()[0][:300] if str(exc) else ""
        _log.error("store_failure", code=refused.code, error=type(exc).__name__, cause=cause)
        return problem(request, refused.code, refused.message, refused.status)
    _log.exception("unhandled_error", error=type(exc).__name__)
    return problem(
        request,
        "internal",
        "the server failed; the request id identifies it in the server's log",
        HTTP_500_INTERNAL_SERVER_ERROR,
    )


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    DomainError: domain_error_handler,
    HTTPException: http_error_handler,
    Exception: internal_error_handler,
}
