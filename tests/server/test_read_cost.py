"""Bounded cost per anonymous request: expensive reads are computed once per views position,
and the address limit charges a computed expensive answer more than a cheap read.

The feed's own cache test (computed once, a write makes a new answer) is in
test_records_feed.py; minting keys from one address is in tests/abuse.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.routes import HTTPRoute
from served_app import TEST_CONFIG, Served, serve

import api.server.pages.feeds as feeds_module
import api.service.boards as service_module
import api.service.search_pages as search_module  # where a search page is computed
from api.server.config import ServerConfig
from api.server.rate_limits import ROUTE_COSTS
from api.server.read_cache import CachedReply, PositionReads, ReadCache
from domain.statements import Role
from ledger.home import LedgerHome
from ledger.signing.authoring import attestation_envelope, key_registration_envelope
from ledger.signing.keys import SigningKey

SEED = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
SEED_NAME = "sol-submission-38823"
FEED = "/feeds/records.atom"


class Calls:
    """Counts the calls of a real function, and makes them."""

    def __init__(self, real: Callable[..., Any]) -> None:
        self.real = real
        self.count = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.count += 1
        return self.real(*args, **kwargs)


def attest(served: Served, body: str) -> None:
    """A note on the seed run by a new attester: new events, so a new position."""
    key = SigningKey.generate()
    registration = key_registration_envelope(key.public, [Role.ATTESTER], key, label="note")
    assert served.client.post("/v1/keys", json=registration).status_code == 201
    note = attestation_envelope(SEED, SEED_NAME, key, type_="note", body=body)
    assert served.client.post(f"/v1/runs/{SEED}/attestations", json=note).status_code == 201


def test_a_search_is_computed_once_per_position_for_the_api_and_its_page(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    search = Calls(search_module.find)
    monkeypatch.setattr(search_module, "find", search)
    c = served.client
    first = c.get("/v1/search", params={"q": "b200"})
    assert first.status_code == 200 and first.json()["items"]
    again = c.get("/v1/search", params={"q": "b200"})
    assert again.status_code == 200 and again.content == first.content
    assert search.count == 1
    # The page is another request: computed once too, then answered from the cache.
    page = c.get("/search", params={"q": "b200"})
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert c.get("/search", params={"q": "b200"}).text == page.text
    assert search.count == 2
    # Another query is another answer.
    assert c.get("/v1/search", params={"q": "fp8"}).status_code == 200
    assert search.count == 3
    # A write moves the views: the same request is computed again, at the new position.
    attest(served, "a new position")
    assert c.get("/v1/search", params={"q": "b200"}).status_code == 200
    assert search.count == 4
    assert c.get("/v1/search", params={"q": "b200"}).status_code == 200
    assert search.count == 4


def test_refusals_are_not_kept(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    operation = Calls(service_module.view_reads.operation_groups)
    monkeypatch.setattr(service_module.view_reads, "operation_groups", operation)
    for _ in range(2):
        assert served.client.get("/v1/operations/no-such-operation").status_code == 404
    assert operation.count == 2


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[Served]:
    """An address budget of the feed's cost and three more tokens, refilled only after
    minutes (the address limiter never touches the store: SQLite only)."""
    burst = ROUTE_COSTS[FEED] + 3
    config = ServerConfig(**(TEST_CONFIG.__dict__ | {"address_rate": 0.01, "address_burst": burst}))
    yield from serve(LedgerHome.at(tmp_path / "home"), config)


def test_the_address_limit_charges_a_computed_feed_more_than_a_run_read(
    limited: Served,
) -> None:
    c = limited.client
    feed = c.get(FEED)  # computed: the feed's cost
    assert feed.status_code == 200
    assert c.get(FEED).content == feed.content  # the same answer, from the cache: one token
    assert c.get(f"/v1/runs/{SEED}").status_code == 200
    assert c.get(f"/v1/runs/{SEED}").status_code == 200
    refused = c.get(f"/v1/runs/{SEED}")
    assert refused.status_code == 429
    assert refused.json()["code"] == "rate-limited"
    assert int(refused.headers["retry-after"]) >= 1
    assert c.get(FEED, params={"limit": 5}).status_code == 429
    page = c.get("/search", params={"q": "b200"})  # a page says so in HTML
    assert page.status_code == 429 and page.headers["content-type"].startswith("text/html")
    assert int(page.headers["retry-after"]) >= 1


def test_what_cheap_reads_leave_is_too_little_for_a_new_feed(limited: Served) -> None:
    c = limited.client
    started = time.monotonic()
    assert [c.get(f"/v1/runs/{SEED}").status_code for _ in range(20)] == [200] * 20
    refused = c.get(FEED)  # 983 tokens left: the feed costs 1,000
    elapsed = time.monotonic() - started
    assert refused.status_code == 429 and refused.json()["code"] == "rate-limited"
    # Until 17 more tokens at 0.01 a second: far longer than a cheap read ever waits here.
    # Less the second each that the reads took, which refilled 0.01 a second meanwhile (a
    # loaded machine took over one second for them: 1699).
    assert int(refused.headers["retry-after"]) >= 1700 - math.ceil(elapsed)
    assert c.get(f"/v1/runs/{SEED}").status_code == 200  # a cheap read still passes


def test_the_cache_holds_its_byte_budget_and_only_the_newest_position() -> None:
    cache = ReadCache(4000)  # an entry (key, headers, body) at most 1,000 bytes

    def reply(position: int, size: int) -> CachedReply:
        return CachedReply(position, 200, (), b"x" * size)

    cache.put(b"big", reply(1, 998))
    assert cache.get(b"big", 1) is None  # over a quarter of the budget: never kept
    for i in range(6):
        cache.put(b"%d" % i, reply(1, 999))
    assert cache.size == 4000
    assert cache.get(b"0", 1) is None and cache.get(b"1", 1) is None  # least recent out
    assert cache.get(b"5", 1) is not None
    # A reply at position 1 answers a request that saw position 1 or earlier, not later.
    assert cache.get(b"5", 0) is not None and cache.get(b"5", 2) is None
    cache.put(b"new", reply(2, 10))  # a newer position: what was kept at 1 goes
    assert cache.size == 13 and cache.get(b"5", 1) is None
    assert cache.get(b"new", 2) is not None


def test_the_cache_counts_keys_and_headers_and_caps_its_entries() -> None:
    cache = ReadCache(64 * 1024, max_entries=10)
    headers = ((b"content-type", b"application/json"),)
    for i in range(50):  # long keys, small bodies
        cache.put(b"/v1/search?q=%d" % i + b"x" * 1000, CachedReply(1, 200, headers, b"[]"))
    assert len(cache._entries) == 10
    assert cache.size == 10 * (1000 + len(b"/v1/search?q=00") + 28 + 2)
    assert cache.get(b"/v1/search?q=49" + b"x" * 1000, 1) is not None


def _by_header(inner: Any) -> Any:
    """The app, seeing each request's client address in its X-Test-Address header (the test
    client has one address)."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        for name, value in scope.get("headers", []):
            if name == b"x-test-address":
                scope = {**scope, "client": (value.decode(), 1)}
        await inner(scope, receive, send)

    return app


def test_one_address_within_its_limit_leaves_every_other_address_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Junk query parameters make no new answer to compute, and no address is refused for
    what other addresses asked (the defaults serve runs with)."""
    search = Calls(search_module.find)
    monkeypatch.setattr(search_module, "find", search)
    for served in serve(LedgerHome.at(tmp_path / "home"), ServerConfig(json_logs=False)):
        served.app.asgi_handler = _by_header(served.app.asgi_handler)
        c = served.client
        attacker = {"x-test-address": "10.0.0.66"}
        codes = [
            c.get("/v1/search", params={"q": "b200", "n": str(i)}, headers=attacker).status_code
            for i in range(9)
        ]
        assert codes == [200] * 9 and search.count == 1
        honest = {"x-test-address": "10.0.0.7"}
        for path, params in [
            ("/v1/search", {"q": "fp8"}),
            ("/", {}),
            (FEED, {}),
            ("/v1/groups", {}),
        ]:
            assert c.get(path, params=params, headers=honest).status_code == 200, path


def test_the_order_and_unknown_query_parameters_make_no_new_key(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    feed = Calls(feeds_module.records_feed)
    monkeypatch.setattr(feeds_module, "records_feed", feed)
    c = served.client
    first = c.get(f"{FEED}?limit=5&before=100000")
    assert first.status_code == 200
    assert c.get(f"{FEED}?before=100000&utm=x&limit=5").content == first.content
    assert feed.count == 1
    assert c.get(f"{FEED}?limit=6&before=100000").status_code == 200  # another answer
    assert feed.count == 2


def _scope(path: str, query: bytes, client: str) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": [(b"host", b"testserver")],
        "client": (client, 1),
        "server": ("testserver", 80),
    }


async def _no_body() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


class Reply:
    """What an ASGI client was sent."""

    def __init__(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = b""

    async def __call__(self, message: Any) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = {k.decode(): v.decode() for k, v in message.get("headers", [])}
        else:
            self.body += message.get("body", b"")


def test_a_reader_that_never_reads_its_reply_holds_no_one_else(served: Served) -> None:
    """The answer is kept, and those waiting for it released, before it is sent on."""
    attest(served, "a new position")
    app = served.app

    async def requests() -> int:
        stalled = asyncio.Event()

        async def never_drained(message: Any) -> None:
            if message["type"] == "http.response.body":
                await stalled.wait()

        slow = asyncio.create_task(app(_scope(FEED, b"", "10.0.0.66"), _no_body, never_drained))
        await asyncio.sleep(0.5)
        reply = Reply()
        await asyncio.wait_for(app(_scope(FEED, b"", "10.0.0.7"), _no_body, reply), 60)
        slow.cancel()
        return reply.status

    assert asyncio.run(requests()) == 200


def _blocked_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slots: int
) -> Iterator[tuple[Served, Any]]:
    """``slots`` expensive computations at once, a short wait for one; the first search
    blocks until the test lets it go."""
    release = threading.Event()
    started = threading.Event()
    real = search_module.find

    def search(*args: Any, **kwargs: Any) -> Any:
        if not started.is_set():
            started.set()
            release.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(search_module, "find", search)
    settings = {"compute_slots": slots, "compute_wait": 0.3}
    config = ServerConfig(**(TEST_CONFIG.__dict__ | settings))
    for served in serve(LedgerHome.at(tmp_path / "home"), config):
        yield served, (started, release)
        release.set()


@pytest.fixture
def one_slot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Served, Any]]:
    yield from _blocked_search(tmp_path, monkeypatch, 1)


@pytest.fixture
def two_slots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Served, Any]]:
    yield from _blocked_search(tmp_path, monkeypatch, 2)


def test_a_request_waiting_on_a_stalled_computation_computes_it_itself(
    two_slots: tuple[Served, Any],
) -> None:
    served, (started, release) = two_slots
    app = served.app

    async def requests() -> tuple[Reply, Reply]:
        first, second = Reply(), Reply()
        blocked = asyncio.create_task(app(_scope("/v1/search", b"q=b200", "a"), _no_body, first))
        await asyncio.to_thread(started.wait, 30)
        # The same request: past the wait it computes its own answer, the first still held.
        await asyncio.wait_for(app(_scope("/v1/search", b"q=b200", "b"), _no_body, second), 30)
        held = not blocked.done()
        release.set()
        await asyncio.wait_for(blocked, 30)
        assert held
        return first, second

    first, second = asyncio.run(requests())
    assert second.status == 200 and first.status == 200 and second.body == first.body


def test_a_server_busy_computing_answers_503_after_a_bounded_wait(
    one_slot: tuple[Served, Any],
) -> None:
    served, (started, release) = one_slot
    app = served.app

    async def requests() -> tuple[Reply, Reply, Reply]:
        first, other, cached = Reply(), Reply(), Reply()
        blocked = asyncio.create_task(app(_scope("/v1/search", b"q=b200", "a"), _no_body, first))
        await asyncio.to_thread(started.wait, 30)
        # Another answer to compute: no slot within the wait.
        await asyncio.wait_for(app(_scope("/v1/search", b"q=fp8", "b"), _no_body, other), 30)
        # The same answer as the blocked one: it waits for it, then may compute itself.
        waiting = asyncio.create_task(app(_scope("/v1/search", b"q=b200", "c"), _no_body, cached))
        release.set()
        await asyncio.wait_for(blocked, 30)
        await asyncio.wait_for(waiting, 30)
        return first, other, cached

    first, other, cached = asyncio.run(requests())
    assert first.status == 200 and cached.status == 200 and cached.body == first.body
    assert other.status == 503 and int(other.headers["retry-after"]) >= 1
    assert b"unavailable" in other.body


def test_every_costed_route_is_a_route_and_every_get_route_is_costed_or_cheap(
    served: Served,
) -> None:
    routes = {
        route.path_format
        for route in served.app.routes
        if isinstance(route, HTTPRoute) and "GET" in route.route_handler_map
    }
    assert set(ROUTE_COSTS) <= routes
    # Reads of one record, a bounded page or a few named runs, or static text: cheap. A new
    # GET route must be added to one side or the other.
    cheap = {
        "/health",
        "/schema",
        "/schema/openapi.json",
        "/schema/{path}",
        "/static/style.css",
        "/static/search.js",
        "/log",
        "/artifacts/{digest}",
        "/v1/artifacts/{digest}",
        "/compare",
        "/v1/compare",
        "/v1/comparisons",
        "/runs/{digest}",
        "/runs/{digest}/badge.svg",
        "/runs/{digest}/history",
        "/v1/runs",
        "/v1/runs/{digest}",
        "/v1/runs/{digest}/history",
        "/v1/jobs",
        "/v1/jobs/{job_id}",
        "/v1/keys",
        "/v1/keys/{key_id}",
        "/v1/keys/{key_id}/history",
        "/v1/log/checkpoint",
        "/checkpoint",  # the C2SP monitoring path: one stored note
        "/v1/log/entries",
        "/v1/log/proofs/consistency",
        "/v1/log/proofs/inclusion",
        "/v1/trust-root",
    }
    assert routes - set(ROUTE_COSTS) - cheap == set(), sorted(routes - set(ROUTE_COSTS))


def test_leaderboards_and_operations_are_computed_once_per_position(served: Served) -> None:
    c = served.client
    cache: ReadCache = served.app.state.read_cache
    key = c.get("/v1/groups").json()[0]["comparisonKey"]
    operation = c.get("/v1/operations").json()[0]["operation"]
    for path in [f"/v1/leaderboards/{key}", f"/leaderboards/{key}", f"/v1/operations/{operation}"]:
        before = cache.computed
        assert [c.get(path).status_code for _ in range(3)] == [200] * 3
        assert cache.computed == before + 1, path


def test_requests_arriving_during_a_catch_up_share_the_next_one_not_that_one() -> None:
    """A position read that began before a request arrived may miss a write acknowledged
    before it: such requests wait for the next catch-up, one for all of them."""
    started, release = threading.Event(), threading.Event()
    calls: list[int] = []

    def fresh() -> int:
        calls.append(1)
        if len(calls) == 1:
            started.set()
            release.wait(30)
        return len(calls)

    async def requests() -> tuple[int | None, list[int | None]]:
        reads = PositionReads(fresh)
        first = asyncio.create_task(reads.position())
        await asyncio.to_thread(started.wait, 30)
        later = [asyncio.create_task(reads.position()) for _ in range(3)]
        await asyncio.sleep(0.05)  # all three are waiting
        release.set()
        return await first, [await t for t in later]

    first, later = asyncio.run(requests())
    assert first == 1 and later == [2, 2, 2] and len(calls) == 2


def test_a_client_gone_while_waiting_for_a_slot_leaves_no_one_waiting_on_it(
    one_slot: tuple[Served, Any],
) -> None:
    served, (started, release) = one_slot
    app = served.app
    cache: ReadCache = app.state.read_cache

    async def requests() -> Reply:
        first, gone, later = Reply(), Reply(), Reply()
        blocked = asyncio.create_task(app(_scope("/v1/search", b"q=b200", "a"), _no_body, first))
        await asyncio.to_thread(started.wait, 30)
        leaving = asyncio.create_task(app(_scope("/v1/search", b"q=fp8", "b"), _no_body, gone))
        await asyncio.sleep(0.05)  # waiting for the slot
        leaving.cancel()
        await asyncio.gather(leaving, return_exceptions=True)
        assert cache.flight(b"/v1/search?q=fp8") is None
        release.set()
        await asyncio.wait_for(blocked, 30)
        await asyncio.wait_for(app(_scope("/v1/search", b"q=fp8", "c"), _no_body, later), 30)
        return later

    assert asyncio.run(requests()).status == 200
