"""Errors raised by the pure domain layer.

Every error carries a stable ``code`` (used as the problem+json ``type`` suffix by the API and
as the reason in CLI output) and a human message that says what was wrong and where.
"""

from __future__ import annotations


class DomainError(ValueError):
    """Base for every rejection of bad input by the domain layer."""

    code = "invalid-input"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ParseError(DomainError):
    """The bytes are not a well-formed JSON or YAML 1.2 document we accept."""

    code = "malformed-document"


class TooLargeError(ParseError):
    """The document exceeds the size, nesting or alias budget."""

    code = "too-large"


class ManifestError(DomainError):
    """A manifest violates its kind's schema (unknown field, bad enum, bad pattern...)."""

    code = "schema-violation"


class CanonicalizationError(DomainError):
    """A value cannot be put into canonical form (ambiguous duration, unsafe integer...)."""

    code = "non-canonical"


class DigestMismatchError(DomainError):
    """A digest stated or referenced by a document does not match the content."""

    code = "digest-mismatch"
