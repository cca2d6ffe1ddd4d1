"""/v1/keys: registered keys, their history; signed registration and revocation."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, Response, get, post
from litestar.params import JSONBody, PathParameter, QueryParameter, RawBody

from api.server.controllers.common import DsseEnvelope, Service, write
from api.server.openapi_problems import refuses
from api.service.errors import NotFoundError
from api.service.models.history import KeyHistory
from api.service.models.keys import KeyList, KeyRecord
from api.service.models.log import Receipt
from api.service.paging import MAX_PAGE
from domain.statements import PredicateType

KeyIdPath = Annotated[
    str, PathParameter(description="Key id, sha256:<64 hex> of the raw public key.", max_length=71)
]


class KeyController(Controller):
    path = "/v1/keys"
    tags = ("keys",)

    @get(
        "/",
        sync_to_thread=True,
        summary="Registered keys with roles and status, a page at a time",
        opt=refuses(NotFoundError),  # a cursor this API did not issue
    )
    def list_keys(
        self,
        service: Service,
        cursor: Annotated[str | None, QueryParameter(max_length=100)] = None,
        limit: Annotated[int, QueryParameter(ge=1, le=MAX_PAGE)] = 50,
    ) -> KeyList:
        return service.keys.list_page(cursor, limit)

    @get("/{key_id:str}", sync_to_thread=True, summary="One key", opt=refuses(NotFoundError))
    def key(self, service: Service, key_id: KeyIdPath) -> KeyRecord:
        return service.keys.get(key_id)

    @get(
        "/{key_id:str}/history",
        sync_to_thread=True,
        summary="A key's events, re-verified",
        opt=refuses(NotFoundError),
    )
    def history(self, service: Service, key_id: KeyIdPath) -> KeyHistory:
        return service.history.key(key_id)

    @post("/", summary="Register a key (admin- or self-signed)")
    async def register(
        self,
        request: Request[Any, Any, Any],
        service: Service,
        data: JSONBody[DsseEnvelope],
        body: RawBody,
    ) -> Response[Receipt]:
        return await write(request, service, body, {PredicateType.KEY})

    @post("/{key_id:str}/revocations", summary="Revoke a key")
    async def revoke(
        self,
        request: Request[Any, Any, Any],
        service: Service,
        key_id: KeyIdPath,
        data: JSONBody[DsseEnvelope],
        body: RawBody,
    ) -> Response[Receipt]:
        return await write(request, service, body, {PredicateType.KEY}, key_id)
