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
# The event loop runs a timer whose time is within its clock's resolution (BaseEventLoop's
# _run_once): a read is due when its deadline is, by that rule.
_RESOLUTION = time.get_clock_info("monotonic").resolution


class _Read:
    """A body read under way: the task awaiting it and when its request's body is due."""

    __slots__ = ("cancelling", "deadline", "expired", "task")

    def __init__(self, task: asyncio.Task[Any], deadline: float) -> None:
        self.task = task
        self.deadline = deadline
        self.cancelling = task.cancelling()
        self.expired = False


class _Deadlines:
    """The body reads under way on one event loop, and one timer for all of them.

    ``asyncio.timeout`` per read scheduled a timer and cancelled it (~32 k instructions a
    read, the body usually in uvicorn's buffer already). Here a read is put in a set and
    taken out; the one timer wakes at the earliest deadline it was set for, cancels the reads
    then due (as ``asyncio.timeout`` cancels its task) and is set again for the earliest left.
    Every request's deadline is its first read plus the same timeout, so a read rarely has a
    deadline before the timer's (a later chunk of an older request): then it is set earlier."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.reads: set[_Read] = set()
        self.timer: asyncio.TimerHandle | None = None

    def add(self, read: _Read) -> None:
        self.reads.add(read)
        timer = self.timer
        if timer is None or read.deadline < timer.when():
            if timer is not None:
                timer.cancel()
            self.timer = self.loop.call_at(read.deadline, self._due)

    def _due(self) -> None:
        self.timer = None
        now = self.loop.time() + _RESOLUTION
        earliest: float | None = None
        for read in self.reads:
            if read.deadline < now:
                if not read.expired:
                    read.expired = True
                    read.task.cancel()
            elif earliest is None or read.deadline < earliest:
                earliest = read.deadline
        if earliest is not None:
            self.timer = self.loop.call_at(earliest, self._due)


async def _read_by(read: _Read, receive: Receive, deadlines: _Deadlines) -> ReceiveMessage | None:
    """``receive()`` with its task cancelled at the read's deadline, as asyncio.timeout would
    (not wait_for's task per read: the body is usually in uvicorn's buffer already): the
    message, or None where the deadline cancelled the read and nothing else did as well."""
    deadlines.add(read)
    try:
        message = await receive()
    except BaseException as exc:
        # As asyncio.timeout's exit: a deadline that fired takes its cancel back whatever the
        # read ended with; it is ours (a 408) only if it was a cancel and no other came too.
        ours = read.expired and read.task.uncancel() <= read.cancelling
        if ours and isinstance(exc, asyncio.CancelledError):
            return None
        raise
    else:
        if read.expired:  # the deadline's cancel was swallowed below: take it back
            read.task.uncancel()
        return message
    finally:
        deadlines.reads.discard(read)


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
        # The last event loop's reads (an app served on another loop, as tests do, gets its
        # own; a read keeps the one it was put in).
        self._deadlines: _Deadlines | None = None

    def _deadlines_of(self, loop: asyncio.AbstractEventLoop) -> _Deadlines:
        deadlines = self._deadlines
        if deadlines is None or deadlines.loop is not loop:
            deadlines = self._deadlines = _Deadlines(loop)
        return deadlines

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
            loop = asyncio.get_running_loop()
            if deadline is None:
                deadline = loop.time() + self.timeout
            task = asyncio.current_task()
            if task is None:
                raise RuntimeError("a request body is read inside a task")
            message = await _read_by(_Read(task, deadline), receive, self._deadlines_of(loop))
            if message is None:
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
