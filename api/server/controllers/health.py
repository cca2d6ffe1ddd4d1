"""/health: liveness and the log's size, for probes and operators."""

from __future__ import annotations

from litestar import Controller, get

from api.server.controllers.common import Service
from api.server.responses.log import Health


class HealthController(Controller):
    path = "/health"
    tags = ("operations",)

    @get("/", sync_to_thread=True, summary="The database answers and the log is readable")
    def health(self, service: Service) -> Health:
        return service.health()
