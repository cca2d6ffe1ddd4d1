"""The refusals the service's own rules make, and those of the layers below that its callers
name (a face lists them in its API document, says them in its messages): one import for the
faces, which do not reach into the store themselves."""

from __future__ import annotations

from api.service.query_errors import BadQueryError
from ledger.errors import AmbiguousReferenceError, NotFoundError, SubjectMismatchError
from ledger.group_commit import WriterClosedError
from ledger.store.artifacts import ArtifactError, ArtifactNotFound
from ledger.store.transparency_log import NoLogKeyError

__all__ = [
    "AmbiguousReferenceError",
    "ArtifactError",
    "ArtifactNotFound",
    "BadQueryError",
    "NoLogKeyError",
    "NotFoundError",
    "WriterClosedError",
    "WrongEndpointError",
]


class WrongEndpointError(SubjectMismatchError):
    """A signed statement posted to an endpoint for another kind of statement or subject."""

    code = "wrong-endpoint"
