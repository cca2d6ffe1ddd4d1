"""What the controllers share: the injected service, the envelope body schema, write replies."""

from __future__ import annotations

from base64 import b64encode
from collections.abc import Awaitable, Iterable
from pathlib import Path
from typing import Any, TypeVar, cast

import msgspec
from litestar import Request, Response
from litestar.background_tasks import BackgroundTask, BackgroundTasks
from litestar.datastructures import Cookie, State
from litestar.di import NamedDependency
from litestar.enums import MediaType
from litestar.response.base import ASGIResponse
from litestar.serialization import get_serializer
from litestar.types import Receive, Scope, Send, TypeEncodersMap

from api.server.config import ServerConfig
from api.server.rate_limits import TokenBuckets, rate_limited
from api.service.errors import NotFoundError
from api.service.ledger_service import LedgerService
from api.service.models.log import InclusionProof, Receipt
from domain.statements import PredicateType
from ledger.logged_event import LoggedEvent
from ledger.signing.dsse import EnvelopeError

T = TypeVar("T")
R = TypeVar("R")

# Handlers name the service they need; the app provides it from its state.
Service = NamedDependency[LedgerService]


class Signature(msgspec.Struct, forbid_unknown_fields=True):
    keyid: str
    sig: str


class DsseEnvelope(msgspec.Struct, forbid_unknown_fields=True):
    """A DSSE envelope over an in-toto Statement v1 (payloadType application/vnd.in-toto+json).

    The body is checked strictly as sent (duplicate keys, canonical base64) before anything
    else; its signature is the only authentication a write needs.
    """

    payloadType: str
    payload: str
    signatures: list[Signature]


def provide_service(state: State) -> LedgerService:
    service: LedgerService = state.service
    return service


def provide_config(state: State) -> ServerConfig:
    config: ServerConfig = state.config
    return config


async def admit(
    request: Request[Any, Any, Any],
    service: LedgerService,
    body: bytes,
    accepts: set[PredicateType],
    subject: str | None = None,
) -> LoggedEvent:
    """Admit a posted envelope under its signer's write rate limit."""
    limiter: TokenBuckets = request.app.state.key_limiter

    def within_rate(named: str) -> None:
        # The key id an envelope names is unverified: check its bucket before the write is
        # queued, but charge it only for an envelope that key really signed (an accepted
        # write), so nobody can drain it for them.
        wait = limiter.take(named, spend=False)
        if wait is not None:
            raise rate_limited(f"writes signed by {named}", wait)

    receipt = await deep_payload_is_malformed(
        service.append_async(body, accepts, subject, before_queue=within_rate)
    )
    signer = service.signer_of_receipt(receipt)
    if signer is not None:
        limiter.take(signer)
    return receipt


def receipt_body(receipt: LoggedEvent) -> Receipt:
    """The reply for ``receipt``: built from its typed fields, the model's own, not through
    its JSON document and a validating convert (``to_response(receipt.to_json(), Receipt)``,
    which gives the same reply: tests/server/test_receipt_reply.py)."""
    proof = receipt.inclusion
    return Receipt(
        position=receipt.position,
        aggregate_id=str(receipt.aggregate_id),
        version=receipt.version,
        event=receipt.event,
        subject_digest=receipt.subject_digest,
        envelope_digest=receipt.envelope_digest,
        received_at=receipt.received_at,
        duplicate=receipt.duplicate,
        signer=receipt.signer,
        log=None
        if proof is None
        else InclusionProof(
            leaf_index=proof.leaf_index,
            tree_size=proof.tree_size,
            root_hash=b64encode(proof.root).decode(),
            hashes=[b64encode(h).decode() for h in proof.hashes],
        ),
    )


def receipt_reply(receipt: LoggedEvent, reply: R) -> Response[R]:
    """201 with ``reply`` for a new event, 200 for a duplicate; Location names its history."""
    location = f"/v1/runs/{receipt.subject_digest}/history"
    if receipt.event.startswith("Principal."):
        location = f"/v1/keys/{receipt.subject_digest}"
    return ReceiptResponse(
        reply, status_code=200 if receipt.duplicate else 201, headers={"Location": location}
    )


class ReceiptResponse(Response[R]):
    """A write's reply, sent as the very messages Litestar's ``ASGIResponse`` sends for it
    without making one: its header machinery (a scope-headers object, dict merges, an
    encode) was ~10 µs of a served append's ~0.4 ms. Only the plain case is taken this way
    (a JSON body, one ``Location`` header, no cookies, background tasks or headers from
    the route); anything else goes Litestar's way. The same messages, byte for byte:
    tests/server/test_receipt_reply.py."""

    def to_asgi_response(  # noqa: PLR0913 - Litestar's signature
        self,
        app: Any,
        request: Request[Any, Any, Any],
        *,
        background: BackgroundTask | BackgroundTasks | None = None,
        cookies: Iterable[Cookie] | None = None,
        encoded_headers: Iterable[tuple[bytes, bytes]] | None = None,
        headers: dict[str, str] | None = None,
        is_head_response: bool = False,
        media_type: MediaType | str | None = None,
        status_code: int | None = None,
        type_encoders: TypeEncodersMap | None = None,
    ) -> ASGIResponse:
        location = self.headers.get("Location")
        plain = (
            app is None
            and background is None
            and self.background is None
            and not cookies
            and not self.cookies
            and encoded_headers is None
            and not headers
            and not is_head_response
            and self.media_type is None
            and media_type in (None, "", MediaType.JSON, MediaType.JSON.value)  # "": the default
            and self.status_code in (200, 201)
            and not self.response_type_encoders
            and len(self.headers) == 1
            and isinstance(location, str)
            and location.isascii()
        )
        if not plain:
            return super().to_asgi_response(
                app,
                request,
                background=background,
                cookies=cookies,
                encoded_headers=encoded_headers,
                headers=headers,
                is_head_response=is_head_response,
                media_type=media_type,
                status_code=status_code,
                type_encoders=type_encoders,
            )
        assert isinstance(location, str) and self.status_code is not None  # plain: both
        body = self.render(self.content, MediaType.JSON.value, get_serializer(type_encoders))
        # What ASGIResponse's headers encode to: the given header (its name lower-cased),
        # then its defaults for a JSON body.
        return cast(
            "ASGIResponse",
            _SentReply(
                self.status_code,
                [
                    (b"location", location.encode("latin-1")),
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode("latin-1")),
                ],
                body,
            ),
        )


class _SentReply:
    """``ASGIResponse.__call__``'s two messages for a reply with no background task."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status, "headers": self.headers})
        await send({"type": "http.response.body", "body": self.body, "more_body": False})


async def write(
    request: Request[Any, Any, Any],
    service: LedgerService,
    body: bytes,
    accepts: set[PredicateType],
    subject: str | None = None,
) -> Response[Receipt]:
    """Admit a posted envelope: 201 with the receipt, 200 with the original for a duplicate."""
    receipt = await admit(request, service, body, accepts, subject)
    return receipt_reply(receipt, receipt_body(receipt))


async def deep_payload_is_malformed(work: Awaitable[T]) -> T:
    """Await ``work``; a statement payload nested too deeply to decode is the client's fault.

    The envelope's payload is decoded with ``json.loads``, which raises RecursionError (not a
    DomainError) for a payload nested deeper than the stack allows: refuse it as 400.
    """
    try:
        return await work
    except RecursionError:
        raise EnvelopeError("the statement payload is nested too deeply") from None


def operation_name(path: Path) -> str:
    """An operation name from a ``{name:path}`` parameter (names may hold "/")."""
    name = str(path).lstrip("/")
    if not name or len(name) > 300:
        raise NotFoundError("give an operation name of at most 300 characters")
    return name
