"""The RFC 9457 problem details every refusal answers with (application/problem+json)."""

from __future__ import annotations

from typing import Annotated

from msgspec import UNSET, Meta, UnsetType

from api.service.models import ApiModel


class Problem(ApiModel, kw_only=True):
    """Why a request was refused; ``code`` is stable (the CLI prints it as error[<code>])."""

    type: Annotated[
        str, Meta(description="https://kernelindex.dev/problems/<code>: what went wrong")
    ]
    title: str
    status: Annotated[int, Meta(ge=400, le=599, description="The reply's HTTP status")]
    detail: Annotated[str, Meta(description="What was wrong and where, for a person")]
    # Left out only by the replies sent before the application sees a request (a client
    # too slow to send its headers).
    instance: Annotated[str, Meta(description="The request's path")] | UnsetType = UNSET
    code: Annotated[str, Meta(description="The stable code, the last segment of type")]
    request_id: (
        Annotated[str | None, Meta(description="The request id, as in X-Request-ID and logs")]
        | UnsetType
    ) = UNSET
    # Extension: the log position of what the request collided with (already-exists).
    position: (
        Annotated[int, Meta(description="Log position of the existing event (already-exists)")]
        | UnsetType
    ) = UNSET
