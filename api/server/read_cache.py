"""Expensive reads answered once per views position, and every request charged its cost.

The log is append-only and the views fold it in order; their position (the last event
folded) says which events they hold. So the answer of a read computed from the views and
the log up to that position (the Atom feed, search, operations, groups, leaderboards,
exports, and their pages) is fixed by its request and that position: a second identical
request at the same position gets the bytes the first one computed. A request learns the
position from the freshness check it makes anyway before such a read
(``api.service.freshness``), asked once for all the requests that wait on it, and the
request's reads ask no more. A request is its path and the query
parameters its route's handler reads, sorted by name: parameters it ignores, or another
order, make no new answer to compute.

Each process keeps its own cache; the position comes from the shared database, so with
``serve --workers N`` each worker computes an answer at most once per position and never
serves one older than what it has seen. An answer is stored under the position read *before*
it was computed, so it holds at least what that position holds (never less): a client that
wrote, then reads, sees its write. At most ``MAX_ENTRIES`` answers are kept, within a byte
budget counting their keys, headers and bodies (least recently used first out); entries of
older positions go as soon as a newer one is stored.

The same middleware charges each request to its client address: ``CHEAP`` tokens, or the
route's ``ROUTE_COSTS`` when its answer has to be computed (``api.server.rate_limits``). What
the process computes at once, whoever asks, is bounded by ``ComputeSlots``: the rest wait
(503 with Retry-After after ``compute_wait``), so no address is refused for what others asked.
Concurrent requests for an answer being computed wait for it (up to ``compute_wait``, then
compute it themselves) instead of computing it again. An answer is kept, and those waiting
for it released, as soon as its body is complete, before it is sent on: a client that does
not read its reply holds no one else.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_plus

import anyio.to_thread
from litestar.enums import ScopeType
from litestar.exceptions import HTTPException
from litestar.routes import HTTPRoute

from api.server.rate_limits import (
    CHEAP,
    ROUTE_COSTS,
    TokenBuckets,
    rate_limited,
    retry_after_header,
)
from api.service.freshness import known_position, one_request

if TYPE_CHECKING:
    from litestar import Litestar
    from litestar.types import ASGIApp, Message, Receive, Scope, Send

MAX_ENTRIES = 200  # answers kept per process, whatever their size


@dataclass(frozen=True)
class CachedReply:
    position: int  # the views position read before the answer was computed
    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes


def _footprint(key: bytes, reply: CachedReply) -> int:
    """The bytes an entry holds: its key, headers and body."""
    return len(key) + sum(len(k) + len(v) for k, v in reply.headers) + len(reply.body)


class ReadCache:
    """Replies by request key, each valid for any request that saw its position or an
    earlier one; at most ``max_entries`` of them and ``max_bytes`` of keys, headers and
    bodies, one entry at most a quarter of it."""

    def __init__(self, max_bytes: int, max_entries: int = MAX_ENTRIES) -> None:
        self.max_bytes = max(0, max_bytes)
        self.max_entries = max_entries
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
        size = _footprint(key, reply)
        if size > self.max_entry:
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
            self._bytes += size
            while self._bytes > self.max_bytes or len(self._entries) > self.max_entries:
                self._drop(next(iter(self._entries)))

    def _drop(self, key: bytes) -> None:
        self._bytes -= _footprint(key, self._entries.pop(key))

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
    """The views' position for requests, one freshness check (``fresh``) for all that wait
    on it.

    A request's position must come from a check that started after the request arrived
    (else a write acknowledged before it could be missing). So a request arriving while one
    runs waits for the next, which starts as soon as that one ends and answers every request
    that arrived meanwhile: under load, one check per round instead of one per request.
    Event-loop only."""

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


class ComputeSlots:
    """At most ``slots`` expensive answers computed at once in this process, whoever asks;
    a request waits up to ``wait`` seconds for a slot. Event-loop only (one semaphore per
    loop: a test client runs its own)."""

    def __init__(self, slots: int, wait: float) -> None:
        self.slots = slots
        self.wait = wait
        self._loop: asyncio.AbstractEventLoop | None = None
        self._semaphore: asyncio.Semaphore | None = None

    async def acquire(self) -> bool:
        """Take a slot; False if none came free within the wait."""
        if self.slots <= 0:
            return True
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._semaphore is None:
            self._loop, self._semaphore = loop, asyncio.Semaphore(self.slots)
        try:
            await asyncio.wait_for(self._semaphore.acquire(), self.wait)
        except TimeoutError:
            return False
        return True

    def release(self) -> None:
        if self.slots > 0 and self._semaphore is not None:
            self._semaphore.release()


@dataclass(frozen=True)
class CostedRoute:
    cost: int
    query: frozenset[str]  # the query parameters its handler reads, by their names in a URL


def costed_routes(app: Litestar) -> dict[str, CostedRoute]:
    """The GET routes of ``ROUTE_COSTS``, by path template, with the query parameters their
    handlers read. A template that is no GET route of ``app`` is an error: a typo would leave
    its route neither cached nor charged."""
    routes: dict[str, CostedRoute] = {}
    for route in app.routes:
        if isinstance(route, HTTPRoute) and route.path_format in ROUTE_COSTS:
            handled = route.route_handler_map.get("GET")
            if handled is not None:
                names = frozenset(p.field_alias for p in handled[1].expected_query_params)
                routes[route.path_format] = CostedRoute(ROUTE_COSTS[route.path_format], names)
    unknown = sorted(set(ROUTE_COSTS) - set(routes))
    if unknown:
        raise ValueError(f"ROUTE_COSTS names no GET route of the app: {unknown}")
    return routes


def request_key(scope: Scope, names: frozenset[str]) -> bytes:
    """The path and the query parameters in ``names``, sorted by name (stable: a repeated
    parameter keeps its values' order), values as sent."""
    # The decoded path, which routing reads (a client's raw_path may hold its query too).
    path = str(scope["path"]).encode("utf-8", "surrogateescape")
    kept = []
    for pair in bytes(scope.get("query_string", b"")).split(b"&"):
        name = unquote_plus(pair.partition(b"=")[0].decode("latin-1"))
        if name in names:
            kept.append((name, pair))
    kept.sort(key=lambda item: item[0])
    return path + b"?" + b"&".join(pair for _, pair in kept)


class _Capture:
    """Keeps a reply up to ``limit`` bytes of body before sending it on: ``done`` is called
    once, with the whole reply (or None: not a 200, or over the limit), before the client
    is sent anything of it, so a client that does not read holds no one else."""

    def __init__(
        self, send: Send, limit: int, done: Callable[[CachedReply | None], None], position: int
    ) -> None:
        self.send = send
        self.limit = limit
        self.done = done
        self.position = position
        self.held: list[Message] = []
        self.kept = 0
        self.passing = False  # sending on as it comes: over the limit

    async def __call__(self, message: Message) -> None:
        if self.passing:
            await self.send(message)
            return
        self.held.append(message)
        if message["type"] == "http.response.body":
            self.kept += len(message.get("body", b""))
            if self.kept > self.limit:
                self.done(None)
                await self._send_held()
            elif not message.get("more_body", False):
                self.done(self._reply())
                await self._send_held()

    async def _send_held(self) -> None:
        self.passing = True
        held, self.held = self.held, []
        for message in held:
            await self.send(message)

    def _reply(self) -> CachedReply | None:
        start: Any = self.held[0]
        if start["type"] != "http.response.start" or int(start["status"]) != 200:
            return None
        headers = tuple((bytes(k), bytes(v)) for k, v in start.get("headers", []))
        parts: list[Any] = self.held[1:]
        body = b"".join(bytes(m.get("body", b"")) for m in parts)
        return CachedReply(self.position, 200, headers, body)


async def _replay(reply: CachedReply, send: Send) -> None:
    await send(
        {"type": "http.response.start", "status": reply.status, "headers": list(reply.headers)}
    )
    await send({"type": "http.response.body", "body": reply.body, "more_body": False})


def _charge(limiter: TokenBuckets, address: str, cost: int) -> None:
    wait = limiter.take(address, cost=cost)
    if wait is not None:
        raise rate_limited(f"requests from {address}", wait)


class CostedReads:
    """ASGI middleware around every route: the address's charge, and the read cache."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        with one_request():  # the request's reads check the views' freshness once
            await self._costed(scope, receive, send)

    async def _costed(self, scope: Scope, receive: Receive, send: Send) -> None:
        state: Any = scope["litestar_app"].state
        client = scope.get("client")
        address = str(client[0]) if client else "unknown"
        limiter: TokenBuckets = state.address_limiter
        _charge(limiter, address, CHEAP)
        routes: dict[str, CostedRoute] = state.costed_routes
        template = scope.get("path_template")
        route = routes.get(template) if scope.get("method") == "GET" and template else None
        if route is None:
            await self.app(scope, receive, send)
            return
        cache: ReadCache = state.read_cache
        slots: ComputeSlots = state.compute_slots
        key = request_key(scope, route.query)
        # The views' position after folding what is new (None: they could not be folded,
        # so no answer is keyed by it).
        reads: PositionReads = state.position_reads
        position = await reads.position() if cache.enabled else None
        if position is not None:
            known_position(position)
            reply = cache.get(key, position)
            flight = cache.flight(key) if reply is None else None
            if flight is not None:
                # Past the wait the request computes the answer itself (its first may stall).
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(flight.wait(), slots.wait)
                reply = cache.get(key, position)
            if reply is not None:
                await _replay(reply, send)
                return
        # The rest of its cost (at most a full bucket: every route stays reachable).
        _charge(limiter, address, max(0, min(route.cost, limiter.burst) - CHEAP))
        event = cache.take_off(key) if position is not None else None
        acquired = finished = False

        def done(reply: CachedReply | None) -> None:
            # Once, whatever happens (a refusal, a failure, a client gone while it waited):
            # the slot back, and those waiting for this answer released.
            nonlocal finished
            if finished:
                return
            finished = True
            if acquired:
                slots.release()
            if reply is not None and position is not None:
                cache.put(key, reply)
            if event is not None:
                cache.land(key, event)

        try:
            acquired = await slots.acquire()
            if not acquired:
                raise HTTPException(
                    status_code=503,
                    detail="the server is busy computing other answers; retry shortly",
                    headers=retry_after_header(1),
                )
            cache.computed += 1
            await self.app(scope, receive, _Capture(send, cache.max_entry, done, position or 0))
        finally:
            done(None)
