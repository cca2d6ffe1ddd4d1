"""A deadline for receiving a request body, so a stalled upload cannot hold a request forever.

uvicorn bounds neither how long a client may take to send a body nor how long it may stall
between chunks: a client that sends a few bytes and then nothing keeps a request, its
connection and whatever the handler holds, open indefinitely (slow-loris). This ASGI
middleware gives every request ``timeout`` seconds from its first body read to its last
chunk. A request that misses the deadline is answered 408 problem+json with
``Connection: close`` (the rest of its body is never read, so the connection cannot be
reused) and the application sees the client as gone, so nothing it half-read is appended.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import msgspec
import structlog
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, ReceiveMessage, Scope, Send

from api.server.problems import PROBLEM_BASE, PROBLEM_JSON
from api.service.models.problem import Problem

_log = structlog.get_logger("kernelindex.api")


def timeout_problem(scope: Scope, timeout: float) -> bytes:
    """The 408 body, shaped like every other problem the API answers."""
    body = Problem(
        type=PROBLEM_BASE + "request-timeout",
        title="The request body was not received in time",
        status=408,
        detail=f"the request body must arrive within {timeout:g} s; send it again",
        instance=scope.get("path", ""),
        code="request-timeout",
        request_id=scope.get("state", {}).get("request_id"),
    )
    # json.dumps, as this reply has always been written (spaced separators).
    return json.dumps(msgspec.to_builtins(body)).encode()


class BodyDeadlineMiddleware:
    """Answer 408 when a request's body is not received within ``timeout`` seconds."""

    def __init__(self, app: ASGIApp, timeout: float) -> None:
        self.app = app
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP or self.timeout <= 0:
            await self.app(scope, receive, send)
            return
        deadline: float | None = None
        body_done = False
        answered = False
        started = False

        async def send_unless_answered(message: Message) -> None:
            nonlocal started
            # After our 408, whatever the application answers to the "disconnect" is dropped.
            if not answered:
                started = True
                await send(message)

        async def timed_receive() -> ReceiveMessage:
            nonlocal deadline, body_done, answered
            if answered:
                return {"type": "http.disconnect"}
            if body_done or started:
                # The body is in (or the answer is under way): later reads only wait for a
                # disconnect, which needs no deadline.
                return await receive()
            now = time.monotonic()
            deadline = deadline if deadline is not None else now + self.timeout
            try:
                # A timeout on this task, not wait_for's task per read: the body is usually
                # in uvicorn's buffer already, and a task per read cost a loop iteration.
                async with asyncio.timeout(max(deadline - now, 0.0)):
                    message = await receive()
            except TimeoutError:
                answered = True
                await self._answer_408(scope, send)
                return {"type": "http.disconnect"}
            if message["type"] == "http.request" and not message.get("more_body", False):
                body_done = True
            return message

        await self.app(scope, timed_receive, send_unless_answered)

    async def _answer_408(self, scope: Scope, send: Send) -> None:
        body = timeout_problem(scope, self.timeout)
        _log.warning("request_body_timeout", path=scope.get("path"), timeout_s=self.timeout)
        headers: list[tuple[bytes, bytes]] = [
            (b"content-type", PROBLEM_JSON.encode()),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        start: dict[str, Any] = {"type": "http.response.start", "status": 408, "headers": headers}
        await send(start)  # type: ignore[arg-type]
        await send({"type": "http.response.body", "body": body, "more_body": False})
