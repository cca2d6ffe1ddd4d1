"""The witness over HTTP: a plain ASGI app (no web framework, so the ledger package stays free
of one) and :func:`serve`, which ``kernelindex witness serve`` calls with the ASGI server to
run it on.

Routes, under an optional path prefix (tlog-witness's submission and monitoring prefixes):

- ``POST /add-checkpoint``: :meth:`Witness.add_checkpoint`'s reply, status and body as is;
- ``GET /<sha256(origin) hex>/checkpoint``: the latest cosigned checkpoint, or 404.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.signing.keys import SigningKey
from ledger.witness.witness import FollowedLog, Reply, Witness, parse_follow

__all__ = [
    "DEFAULT_PORT",
    "MAX_BODY_BYTES",
    "ASGIApp",
    "Runner",
    "WitnessApp",
    "WitnessServeConfig",
    "build_witness",
    "serve",
]

DEFAULT_PORT = 7380
MAX_BODY_BYTES = 1 << 20
"""Largest request body read: a checkpoint with 100 post-quantum signatures fits."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Runner = Callable[[ASGIApp, str, int], None]
"""Runs an ASGI app on a host and port until stopped (the CLI passes uvicorn's)."""

_log = logging.getLogger(__name__)
_MONITOR = re.compile(r"/([0-9a-f]{64})/checkpoint")
_TEXT = "text/plain; charset=utf-8"


class _TooLarge(Exception):
    pass


class WitnessApp:
    """The ASGI app of one :class:`Witness`."""

    def __init__(self, witness: Witness, prefix: str = "", max_body: int = MAX_BODY_BYTES) -> None:
        self.witness = witness
        self.prefix = prefix.rstrip("/")
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        reply = await self._route(scope, receive)
        headers = [
            (b"content-type", reply.content_type.encode("ascii")),
            (b"content-length", str(len(reply.body)).encode("ascii")),
        ]
        if reply.status == 405:
            allowed = b"POST" if scope["path"].endswith("/add-checkpoint") else b"GET"
            headers.append((b"allow", allowed))
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": reply.body})

    async def _route(self, scope: Scope, receive: Receive) -> Reply:
        path: str = scope["path"]
        method: str = scope["method"]
        if not path.startswith(self.prefix + "/"):
            return Reply(404, _TEXT, b"not found\n")
        path = path[len(self.prefix) :]
        if path == "/add-checkpoint":
            if method != "POST":
                return Reply(405, _TEXT, b"add-checkpoint takes POST\n")
            try:
                body = await self._body(receive)
            except _TooLarge:
                return Reply(413, _TEXT, f"body over {self.max_body} bytes\n".encode())
            # SQLite and Ed25519 block: keep the event loop free for other requests.
            reply = await asyncio.to_thread(self.witness.add_checkpoint, body)
            if reply.status == 422:
                _log.warning("witness %s kept evidence: %s", self.witness.name, reply.body)
            return reply
        match = _MONITOR.fullmatch(path)
        if match is not None:
            if method != "GET":
                return Reply(405, _TEXT, b"the checkpoint takes GET\n")
            note = await asyncio.to_thread(self.witness.latest, match.group(1))
            if note is None:
                return Reply(404, _TEXT, b"no checkpoint cosigned for this origin\n")
            return Reply(200, _TEXT, note.encode("utf-8"))
        return Reply(404, _TEXT, b"not found\n")

    async def _body(self, receive: Receive) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b""
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


@dataclass(frozen=True, slots=True)
class WitnessServeConfig:
    """What ``kernelindex witness serve`` is given.

    ``follow`` holds ``ORIGIN=VKEY`` strings (or bare vkeys, whose key name is the origin);
    one origin given twice follows it with both keys (a key rotation).
    """

    name: str
    key_file: Path
    follow: tuple[str, ...]
    state_dir: Path
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    prefix: str = ""


def build_witness(config: WitnessServeConfig) -> Witness:
    """The witness a config describes: its key loaded, its logs parsed, its state opened.
    Raises ``ValueError`` (or the key loader's ``KeyFileError``) saying what is wrong."""
    if not config.follow:
        raise ValueError("a witness follows at least one log (--follow ORIGIN=VKEY)")
    logs: list[FollowedLog] = [parse_follow(text) for text in config.follow]
    key = SigningKey.load(config.key_file)
    return Witness(config.name, key.private_key(), logs, config.state_dir)


def serve(config: WitnessServeConfig, run: Runner) -> None:
    """Build the witness and run its app with ``run`` until stopped."""
    witness = build_witness(config)
    _log.info(
        "witness %s (%s) follows %s; state in %s",
        witness.name,
        witness.key.key_string(),
        ", ".join(sorted(witness.logs)),
        witness.state_path,
    )
    run(WitnessApp(witness, config.prefix), config.host, config.port)
