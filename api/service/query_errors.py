"""The refusal of a query parameter the service does not know, apart from
``api.service.errors`` (which names the refusals of the layers below, and loads them): a
read through the driver (issue 33) refuses a bad query without loading the store."""

from __future__ import annotations

from domain.errors import DomainError


class BadQueryError(DomainError):
    """A query parameter names no value we know."""

    code = "malformed-request"
