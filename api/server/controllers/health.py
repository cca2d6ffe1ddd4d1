"""/health: liveness and the log's size, for probes and operators."""

from __future__ import annotations

from typing import Any

from litestar import Controller, get

from api.server.controllers.common import Service


class HealthController(Controller):
    path = "/health"
    tags = ("operations",)

    @get("/", sync_to_thread=True, summary="The database answers and the log is readable")
    def health(self, service: Service) -> dict[str, Any]:
        return service.health()
