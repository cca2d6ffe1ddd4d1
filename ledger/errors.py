"""Why the ledger refused a write. Each refusal appends nothing.

``code`` is stable: the CLI prints it and the HTTP API uses it as the problem+json type.
``status`` is the HTTP status the API answers with.
"""

from __future__ import annotations

from domain.errors import DomainError


class AdmissionError(DomainError):
    code = "rejected"
    status = 422


class UnknownKeyError(AdmissionError):
    code = "unknown-key"
    status = 403


class RevokedKeyError(AdmissionError):
    code = "revoked-key"
    status = 403


class ExpiredKeyError(AdmissionError):
    code = "expired-key"
    status = 403


class WrongRoleError(AdmissionError):
    code = "wrong-role"
    status = 403


class ClockSkewError(AdmissionError):
    code = "bad-timestamp"
    status = 422


class SubjectMismatchError(AdmissionError):
    code = "subject-mismatch"
    status = 422


class UnknownRunError(AdmissionError):
    code = "unknown-run"
    status = 404


class RerunJobError(AdmissionError):
    """A rerun result that does not answer an open job exactly (nonce, expiry, hardware)."""

    code = "rerun-rejected"
    status = 422


class AlreadyExistsError(AdmissionError):
    """The run or key exists already, from a different envelope."""

    code = "already-exists"
    status = 409

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message)
        self.position = position


class ConflictError(AdmissionError):
    """Optimistic concurrency retries were exhausted; the client may try again."""

    code = "conflict"
    status = 409


class NotFoundError(DomainError):
    code = "not-found"
    status = 404


class AmbiguousReferenceError(DomainError):
    code = "ambiguous-reference"
    status = 400


class CorruptRecordError(DomainError):
    """A stored event no longer decodes: the store was damaged or tampered with."""

    code = "corrupt-record"
    status = 500
