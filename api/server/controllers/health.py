"""/health: liveness and the log's size, for probes and operators."""

from __future__ import annotations

from typing import Any

from litestar import Controller, get

from api.server.service import LedgerService


class HealthController(Controller):
    path = "/health"
    tags = ["operations"]

    @get("/", sync_to_thread=True, summary="The database answers and the log is readable")
    def health(self, service: LedgerService) -> dict[str, Any]:
        return service.health()
