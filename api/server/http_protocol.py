"""uvicorn's HTTP/1.1 protocol with a deadline for a request's headers.

uvicorn (h11) times out idle keep-alive connections only after a response; a client that
connects and then sends its request line and headers a byte at a time, or not at all, holds
the connection forever and the application never sees it (so no ASGI middleware can help).
This protocol gives each request ``header_timeout`` seconds from its first byte (or from the
connection, for the first request) to its last header line, then answers 408 and closes.
The body has its own deadline in the application (``api.server.body_deadline``).

Use it with ``uvicorn.run(app, http=HeaderDeadlineProtocol)`` or, for worker processes,
``http="api.server.http_protocol:HeaderDeadlineProtocol"``.
"""

from __future__ import annotations

import asyncio
import json

import msgspec
from uvicorn.protocols.http.h11_impl import H11Protocol

from api.server.problems import PROBLEM_BASE, PROBLEM_JSON
from api.service.models.problem import Problem

HEADER_TIMEOUT = 30.0


def _408(timeout: float) -> bytes:
    problem = Problem(
        type=PROBLEM_BASE + "request-timeout",
        title="The request headers were not received in time",
        status=408,
        detail=f"the request line and headers must arrive within {timeout:g} s",
        code="request-timeout",
    )
    # No instance or request id: the application never saw this request.
    body = json.dumps(msgspec.to_builtins(problem)).encode()
    head = (
        "HTTP/1.1 408 Request Timeout\r\n"
        f"content-type: {PROBLEM_JSON}\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class HeaderDeadlineProtocol(H11Protocol):
    """H11Protocol that closes a connection whose request headers are not in on time.

    The deadline is a time kept per connection; one timer wakes when the earliest deadline
    could be due and, if the deadline it finds is later (a keep-alive request's own), waits
    again for that one. A timer per request (scheduled, then cancelled once its headers
    arrived) put two heap operations on the event loop per request, under 32 clients over a
    heap of a few hundred mostly cancelled handles."""

    header_timeout: float = HEADER_TIMEOUT
    # When the headers now awaited are due (None: none awaited), and the timer that checks.
    _header_due: float | None = None
    _header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._between_requests():
            self._arm()  # the next request's first bytes: its headers are now on the clock
        super().data_received(data)
        if not self._between_requests():
            self._header_due = None  # the headers are in; the application owns the request

    def connection_lost(self, exc: Exception | None) -> None:
        self._header_due = None
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None
        super().connection_lost(exc)

    def _between_requests(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm(self) -> None:
        if self._header_due is not None or self.header_timeout <= 0:
            return  # on the clock already (from the request's first bytes)
        self._header_due = self.loop.time() + self.header_timeout
        if self._header_deadline is None:
            # A timer still pending from an earlier request wakes no later than this one's
            # deadline (it was set earlier with the same timeout) and waits on from there.
            self._header_deadline = self.loop.call_at(self._header_due, self._check)

    def _check(self) -> None:
        self._header_deadline = None
        due = self._header_due
        if due is None:
            return  # the headers came in: no deadline until the next request's first bytes
        if self.loop.time() < due:
            self._header_deadline = self.loop.call_at(due, self._check)
            return
        self._expired()

    def _expired(self) -> None:
        self._header_due = None
        if self.transport.is_closing() or not self._between_requests():
            return
        self.logger.warning("request headers not received within %gs; closing", self.header_timeout)
        self.transport.write(_408(self.header_timeout))
        self.transport.close()
