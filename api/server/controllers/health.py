"""/health: liveness and the log's size, for probes and operators."""

from __future__ import annotations

from litestar import Controller, get

from api.server.controllers.common import Service
from api.server.openapi_problems import refuses
from api.service.errors import WriterClosedError
from api.service.models.log import Health


class HealthController(Controller):
    path = "/health"
    tags = ("operations",)

    @get(
        "/",
        sync_to_thread=True,
        summary="The database answers, the log is readable and writes can be taken",
        opt=refuses(WriterClosedError),
    )
    def health(self, service: Service) -> Health:
        return service.health()
