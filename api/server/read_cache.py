"""Expensive reads answered once per views position, and every request charged its cost.

The log is append-only and the views fold it in order; their position (the last event
folded) says which events they hold. So the answer of a read computed from the views and
the log up to that position (the Atom feed, search, operations, groups, leaderboards,
exports, and their pages) is fixed by its request and that position: a second identical
request at the same position gets the bytes the first one computed. A request learns the
position from the catch-up it makes anyway before such a read (``LedgerService.fresh``: with
nothing new to fold, one small read transaction).

Each process keeps its own cache; the position comes from the shared database, so with
``serve --workers N`` each worker computes an answer at most once per position and never
serves one older than what it has seen. An answer is stored under the position read *before*
it was computed, so it holds at least what that position holds (never less): a client that
wrote, then reads, sees its write. Only 200 answers are kept, within a byte budget (least
recently used first out); entries of older positions go as soon as a newer one is stored.

The same middleware charges each request to its client address: ``CHEAP`` tokens, or the
route's ``ROUTE_COSTS`` when its answer has to be computed (``api.server.rate_limits``); a
computed answer is charged to the process's budget for them too, whoever asks, so that a
few addresses cannot share out the server's CPU between them either.
Concurrent requests for an answer being computed wait for it instead of computing it again.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from litestar.enums import ScopeType
from litestar.exceptions import HTTPException

from api.server.rate_limits import CHEAP, TokenBuckets, retry_after_header, route_cost

if TYPE_CHECKING:
    from litestar.types import ASGIApp, Message, Receive, Scope, Send


@dataclass(frozen=True)
class CachedReply:
    position: int  # the views position read before the answer was computed
    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes


class ReadCache:
    """Replies by request key, each valid for any request that saw its position or an
    earlier one; at most ``max_bytes`` of bodies, one reply at most a quarter of it."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max(0, max_bytes)
        self.max_entry = self.max_bytes // 4
        self._entries: OrderedDict[bytes, CachedReply] = OrderedDict()
        self._bytes = 0
        self._newest = -1
        self._lock = threading.Lock()
        # Requests being computed now, by key: later identical ones wait for the reply.
        self._flights: dict[bytes, asyncio.Event] = {}
        self.computed = 0  # replies computed rather than served from here (misses)

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    @property
    def size(self) -> int:
        return self._bytes

    def get(self, key: bytes, position: int) -> CachedReply | None:
        with self._lock:
            reply = self._entries.get(key)
            if reply is None or reply.position < position:
                return None
            self._entries.move_to_end(key)
            return reply

    def put(self, key: bytes, reply: CachedReply) -> None:
        if len(reply.body) > self.max_entry:
            return
        with self._lock:
            if reply.position > self._newest:
                # Nobody asks at an older position again: drop what was computed there.
                self._newest = reply.position
                for old in [k for k, r in self._entries.items() if r.position < reply.position]:
                    self._drop(old)
            current = self._entries.get(key)
            if current is not None and current.position > reply.position:
                return
            if current is not None:
                self._drop(key)
            self._entries[key] = reply
            self._bytes += len(reply.body)
            while self._bytes > self.max_bytes:
                self._drop(next(iter(self._entries)))

    def _drop(self, key: bytes) -> None:
        self._bytes -= len(self._entries.pop(key).body)

    def flight(self, key: bytes) -> asyncio.Event | None:
        return self._flights.get(key)

    def take_off(self, key: bytes) -> asyncio.Event | None:
        """Mark ``key`` as being computed; None if it already is."""
        if key in self._flights:
            return None
        event = self._flights[key] = asyncio.Event()
        return event

    def land(self, key: bytes, event: asyncio.Event) -> None:
        if self._flights.get(key) is event:
            del self._flights[key]
        event.set()


class PositionReads:
    """The views' position for requests, one catch-up (``fresh``) for all that wait on it.

    A request's position must come from a catch-up that started after the request arrived
    (else a write acknowledged before it could be missing). So a request arriving while one
    runs waits for the next, which starts as soon as that one ends and answers every request
    that arrived meanwhile: under load, one catch-up per round instead of one per request
    (they queued on the service's lock one by one anyway). Event-loop only."""

    def __init__(self, fresh: Callable[[], int | None]) -> None:
        self._fresh = fresh
        self._loop: asyncio.AbstractEventLoop | None = None
        self._next: asyncio.Future[int | None] | None = None
        self._runner: asyncio.Task[None] | None = None

    async def position(self) -> int | None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new event loop (a test client's): start over
            self._loop, self._next, self._runner = loop, None, None
        if self._next is None:
            self._next = loop.create_future()
        waiting = self._next
        if self._runner is None or self._runner.done():
            self._runner = loop.create_task(self._run())
        return await asyncio.shield(waiting)

    async def _run(self) -> None:
        while self._next is not None:
            answering, self._next = self._next, None
            try:
                answering.set_result(await anyio.to_thread.run_sync(self._fresh))
            except BaseException as exc:
                answering.set_exception(exc)
                if not isinstance(exc, Exception):  # cancelled: those still waiting too
                    if self._next is not None:
                        self._next.set_exception(exc)
                        self._next = None
                    raise


def request_key(scope: Scope) -> bytes:
    path = scope.get("raw_path") or scope["path"].encode()
    return bytes(path) + b"?" + bytes(scope.get("query_string", b""))


class _Capture:
    """Forwards a reply to the client and keeps a copy, up to ``limit`` bytes of body."""

    def __init__(self, send: Send, limit: int) -> None:
        self.send = send
        self.limit = limit
        self.status = 0
        self.headers: tuple[tuple[bytes, bytes], ...] = ()
        self.parts: list[bytes] = []
        self.kept = 0
        self.whole = True

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
            self.headers = tuple((bytes(k), bytes(v)) for k, v in message.get("headers", []))
        elif message["type"] == "http.response.body" and self.whole:
            body = bytes(message.get("body", b""))
            self.kept += len(body)
            if self.kept > self.limit:
                self.whole, self.parts = False, []
            else:
                self.parts.append(body)
        await self.send(message)

    def reply(self, position: int) -> CachedReply | None:
        if self.status != 200 or not self.whole:
            return None
        return CachedReply(position, self.status, self.headers, b"".join(self.parts))


async def _replay(reply: CachedReply, send: Send) -> None:
    await send(
        {"type": "http.response.start", "status": reply.status, "headers": list(reply.headers)}
    )
    await send({"type": "http.response.body", "body": reply.body, "more_body": False})


COMPUTED = "computed"  # the one key of the server-wide budget


def _charge(limiter: TokenBuckets, address: str, cost: int) -> None:
    wait = limiter.take(address, cost=cost)
    if wait is not None:
        raise HTTPException(
            status_code=429,
            detail=f"too many requests from {address}; retry in {wait:.1f} s",
            headers=retry_after_header(wait),
        )


class CostedReads:
    """ASGI middleware around every route: the address's charge, and the read cache."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        state: Any = scope["litestar_app"].state
        client = scope.get("client")
        address = str(client[0]) if client else "unknown"
        limiter: TokenBuckets = state.address_limiter
        _charge(limiter, address, CHEAP)
        cost = route_cost(str(scope.get("method", "")), scope.get("path_template"))
        if cost is None:
            await self.app(scope, receive, send)
            return
        cache: ReadCache = state.read_cache
        key = request_key(scope)
        # The views' position after folding what is new (None: they could not be folded,
        # so no answer is keyed by it).
        reads: PositionReads = state.position_reads
        position = await reads.position() if cache.enabled else None
        if position is not None:
            reply = cache.get(key, position)
            flight = cache.flight(key) if reply is None else None
            if flight is not None:
                await flight.wait()
                reply = cache.get(key, position)
            if reply is not None:
                await _replay(reply, send)
                return
        # The rest of its cost (at most a full bucket: every route stays reachable), then
        # the same cost of the process's budget for computed answers, whoever asks.
        _charge(limiter, address, max(0, min(cost, limiter.burst) - CHEAP))
        computed: TokenBuckets = state.computed_limiter
        wait = computed.take(COMPUTED, cost=cost)
        if wait is not None:
            raise HTTPException(
                status_code=429,
                detail=f"too many new answers to compute here; retry in {wait:.1f} s",
                headers=retry_after_header(wait),
            )
        cache.computed += 1
        event = cache.take_off(key) if position is not None else None
        try:
            capture = _Capture(send, cache.max_entry)
            await self.app(scope, receive, capture)
            reply = capture.reply(position) if position is not None else None
            if reply is not None:
                cache.put(key, reply)
        finally:
            if event is not None:
                cache.land(key, event)
