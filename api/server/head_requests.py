"""HEAD on every GET route: the GET's status and headers, without its body (RFC 9110 §9.3.2).

Litestar routes a method only to handlers that declare it, and a handler declaring HEAD may
not return a body; so a page or a ``/v1`` GET answered HEAD with 405. This ASGI wrapper, the
outermost layer of the app, runs a HEAD request as its GET (the same handler, limits and
cache) and sends what the GET would, less the body: ``content-length`` still says the GET's
length. A path with no GET still answers HEAD with the GET's 405, naming what it allows.
"""

from __future__ import annotations

from typing import Any, cast

from litestar.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGet:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = cast("dict[str, Any]", scope)  # read, never copied: most requests are no HEAD
        if raw["type"] != "http" or raw.get("method") != "HEAD":
            await self.app(scope, receive, send)
            return
        as_get: Any = {**raw, "method": "GET"}  # a copy: the caller's scope stays HEAD

        async def without_body(message: Message) -> None:
            if message["type"] == "http.response.body":
                # One empty, final body message, whatever the GET streamed.
                if message.get("more_body", False):
                    return
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            await send(message)

        await self.app(as_get, receive, without_body)
