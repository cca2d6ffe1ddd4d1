"""The pages' errors: small HTML pages with the right status and the request id (the JSON
API answers problem+json instead)."""

from __future__ import annotations

from typing import Any

import structlog
from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, NotFoundException, ValidationException
from litestar.response import Template
from litestar.types import ExceptionHandlersMap

from api.server.problems import STATUS_BY_CODE, TITLES
from domain.errors import DomainError

_log = structlog.get_logger("kernelindex.pages")


def error_page(
    request: Request[Any, Any, Any], status: int, code: str, detail: str, title: str | None = None
) -> Template:
    title = title or TITLES.get(code, code.replace("-", " ").capitalize())
    return Template(
        template_name="error.html",
        context={
            "status": status,
            "code": code,
            "title": title,
            "detail": detail,
            "request_id": request.scope.get("state", {}).get("request_id"),
        },
        status_code=status,
        media_type=MediaType.HTML,
    )


def domain_error_page(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    assert isinstance(exc, DomainError)
    status = STATUS_BY_CODE.get(exc.code) or getattr(exc, "status", None) or 422
    if status >= 500:
        _log.error("page_fault", code=exc.code, detail=exc.message)
    return error_page(request, status, exc.code, exc.message)


def http_error_page(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    assert isinstance(exc, HTTPException)
    if isinstance(exc, ValidationException):
        return error_page(request, 400, "malformed-request", _validation_detail(exc))
    if isinstance(exc, NotFoundException):
        return error_page(request, 404, "not-found", f"no page at {request.url.path}")
    status = exc.status_code
    code = {405: "method-not-allowed", 413: "too-large", 429: "rate-limited"}.get(
        status, "internal" if status >= 500 else "malformed-request"
    )
    response = error_page(request, status, code, str(exc.detail))
    response.headers.update(dict(exc.headers or {}))
    return response


def internal_error_page(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    _log.exception("unhandled_page_error", error=type(exc).__name__)
    return error_page(
        request, 500, "internal", "the server failed; the request id identifies it in its log"
    )


def _validation_detail(exc: ValidationException) -> str:
    found = [
        f"{e.get('key', '')}: {e.get('message', '')}".strip(": ")
        for e in (exc.extra if isinstance(exc.extra, list) else [])
        if isinstance(e, dict)
    ]
    return "; ".join(found) or str(exc.detail)


PAGE_EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    DomainError: domain_error_page,
    HTTPException: http_error_page,
    Exception: internal_error_page,
}
