"""The problem responses each operation can send, derived in one place for the OpenAPI document.

An operation's refusals follow from what it is, not from a list kept per endpoint:

- every request meets the per-address rate limit (429), a database that cannot answer (503)
  and, in the worst case, a server fault (500);
- a path or query can hold what no parameter may (a control character, bytes that are not
  UTF-8: ``api.server.request_text``), and a parameter can fail validation (400);
- a request body can be too big (413), of the wrong media type (415), not well formed (400)
  or too slow to arrive (408);
- a signed write can meet any refusal of admission (``SIGNED_WRITE_ERRORS``);
- a handler names the domain errors of its own reads with ``opt=refuses(...)`` (a run
  reference that resolves to nothing, a cursor this API never issued...).

Each domain error's status comes from ``problems.status_of``, the rule the exception handler
answers with, so the document and the replies cannot disagree. Every refusal is documented
as application/problem+json with the ``Problem`` schema.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from http import HTTPStatus
from typing import Any

from litestar import Litestar
from litestar.handlers import HTTPRouteHandler
from litestar.openapi.datastructures import ResponseSpec

from api.server.controllers.common import DsseEnvelope
from api.server.problems import PROBLEM_JSON, status_of
from api.service.errors import NoLogKeyError, WriterClosedError
from api.service.models.problem import Problem
from domain.comparison import ComparisonKeyError
from domain.errors import (
    CanonicalizationError,
    DigestMismatchError,
    DomainError,
    ManifestError,
    ParseError,
    TooLargeError,
)
from domain.evidence import EvidencePolicyError
from domain.statements import StatementError
from ledger.errors import (
    AdmissionError,
    NotFoundError,
    ReadOnlyStoreError,
    StoreError,
    StoreFullError,
)
from ledger.signing.dsse import EnvelopeError, SignatureError

REFUSES = "refuses"  # the handler option naming the domain errors of its reads

# (status, code) of the refusals that are not domain errors (Litestar's, the middleware's).
RATE_LIMITED = (429, "rate-limited")
INTERNAL = (500, "internal")
MALFORMED_REQUEST = (400, "malformed-request")
BODY_REFUSALS = (
    MALFORMED_REQUEST,
    (408, "request-timeout"),
    (413, "too-large"),
    (415, "unsupported-media-type"),
)

# The store failing a read; its subclasses (full, read-only) refuse writes only: a read is
# answered from the views as they stand (LedgerService.fresh).
EVERY_REQUEST_ERRORS: tuple[type[DomainError], ...] = (StoreError,)
# What admitting a signed envelope can refuse: its JSON, its envelope, its statement and
# manifests, its signature, every admission rule, a store that cannot take the write; each
# with its subclasses.
SIGNED_WRITE_ERRORS: tuple[type[DomainError], ...] = (
    ParseError,
    TooLargeError,
    EnvelopeError,
    StatementError,
    ManifestError,
    CanonicalizationError,
    DigestMismatchError,
    ComparisonKeyError,
    EvidencePolicyError,
    SignatureError,
    AdmissionError,
    NotFoundError,
    ReadOnlyStoreError,
    StoreFullError,
    WriterClosedError,
    NoLogKeyError,
)


def refuses(*errors: type[DomainError]) -> dict[str, Any]:
    """``opt`` for a route handler: the domain errors its reads can raise."""
    return {REFUSES: errors}


def _with_subclasses(errors: Iterable[type[DomainError]]) -> Iterator[type[DomainError]]:
    for error in errors:
        yield error
        yield from _with_subclasses(error.__subclasses__())


def _codes(errors: Iterable[type[DomainError]]) -> set[tuple[int, str]]:
    return {(status_of(e), e.code) for e in errors}


def _takes_body(handler: HTTPRouteHandler) -> bool:
    return "data" in handler.parsed_fn_signature.parameters


def _is_signed_write(handler: HTTPRouteHandler) -> bool:
    data = handler.parsed_fn_signature.parameters.get("data")
    return data is not None and data.is_subclass_of(DsseEnvelope)


def refusals(handler: HTTPRouteHandler) -> set[tuple[int, str]]:
    """(status, code) of every problem the handler's operation can answer."""
    # Every request's path and query is read as text first, parameters or none.
    found = {RATE_LIMITED, INTERNAL, MALFORMED_REQUEST, *_codes(EVERY_REQUEST_ERRORS)}
    if _takes_body(handler):
        found |= set(BODY_REFUSALS)
    if _is_signed_write(handler):
        found |= _codes(_with_subclasses(SIGNED_WRITE_ERRORS))
    found |= _codes(handler.opt.get(REFUSES, ()))
    return found


def problem_responses(handler: HTTPRouteHandler) -> dict[int, ResponseSpec]:
    """One problem+json response per status, naming the codes it carries."""
    by_status: dict[int, set[str]] = {}
    for status, code in refusals(handler):
        by_status.setdefault(status, set()).add(code)
    return {
        status: ResponseSpec(
            data_container=Problem,
            media_type=PROBLEM_JSON,
            generate_examples=False,
            description=f"{HTTPStatus(status).phrase}: {', '.join(sorted(codes))}",
        )
        for status, codes in sorted(by_status.items())
    }


def duplicate_write_response(handler: HTTPRouteHandler) -> dict[int, ResponseSpec]:
    """A signed write answers 201 with its receipt, or 200 with the original receipt when
    the very envelope was stored before; both bodies have the handler's reply model."""
    if not _is_signed_write(handler) or handler.status_code != HTTPStatus.CREATED.value:
        return {}
    reply = handler.parsed_fn_signature.return_type.inner_types[0].annotation
    return {
        HTTPStatus.OK.value: ResponseSpec(
            data_container=reply,
            generate_examples=False,
            description="Already recorded: the receipt of the envelope as first stored",
        )
    }


def document_problems(app: Litestar) -> None:
    """Give every documented operation its problem (and duplicate-write) responses; call it
    before the app first generates its OpenAPI document."""
    for route in app.routes:
        for handler in getattr(route, "route_handlers", ()):
            if isinstance(handler, HTTPRouteHandler) and handler.resolve_include_in_schema():
                handler.responses = {
                    **(handler.responses or {}),
                    **duplicate_write_response(handler),
                    **problem_responses(handler),
                }
