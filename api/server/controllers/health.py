"""/health: liveness and the log's size, for probes and operators."""

from __future__ import annotations

from litestar import Controller, get

from api.server.controllers.common import Service
from api.server.openapi_problems import refuses
from api.server.responses.log import Health
from ledger.group_commit import WriterClosedError
from ledger.writer_process import RemoteWriter


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
        # A server that hands its writes to the ledger's writer process (SQLite) cannot take
        # one while it does not reach that process: not healthy, whatever the reads say.
        writer = service.writer
        if isinstance(writer, RemoteWriter) and not writer.connected:
            raise WriterClosedError(
                "the ledger's writer process is not reachable: writes are refused until it "
                "runs again (the server starts it again, or exits saying why)"
            )
        return service.health()
