"""Bounded cost per anonymous request: expensive reads are computed once per views position,
and the address limit charges a computed expensive answer more than a cheap read.

The feed's own cache test (computed once, a write makes a new answer) is in
test_records_feed.py; minting keys from one address is in tests/abuse.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from served_app import TEST_CONFIG, Served, serve

import api.server.service as service_module
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
    search = Calls(service_module.search_groups)
    monkeypatch.setattr(service_module, "search_groups", search)
    c = served.client
    first = c.get("/v1/search", params={"q": "b200"})
    assert first.status_code == 200 and first.json()["groups"]
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
    operation = Calls(service_module.queries.operation_groups)
    monkeypatch.setattr(service_module.queries, "operation_groups", operation)
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
    assert [c.get(f"/v1/runs/{SEED}").status_code for _ in range(20)] == [200] * 20
    refused = c.get(FEED)  # 983 tokens left: the feed costs 1,000
    assert refused.status_code == 429 and refused.json()["code"] == "rate-limited"
    # Until 17 more tokens at 0.01 a second: far longer than a cheap read ever waits here.
    assert int(refused.headers["retry-after"]) >= 1700
    assert c.get(f"/v1/runs/{SEED}").status_code == 200  # a cheap read still passes


def test_the_cache_holds_its_byte_budget_and_only_the_newest_position() -> None:
    cache = ReadCache(4000)  # a reply at most 1,000 bytes

    def reply(position: int, size: int) -> CachedReply:
        return CachedReply(position, 200, (), b"x" * size)

    cache.put(b"big", reply(1, 1001))
    assert cache.get(b"big", 1) is None  # over a quarter of the budget: never kept
    for i in range(6):
        cache.put(b"%d" % i, reply(1, 1000))
    assert cache.size == 4000
    assert cache.get(b"0", 1) is None and cache.get(b"1", 1) is None  # least recent out
    assert cache.get(b"5", 1) is not None
    # A reply at position 1 answers a request that saw position 1 or earlier, not later.
    assert cache.get(b"5", 0) is not None and cache.get(b"5", 2) is None
    cache.put(b"new", reply(2, 10))  # a newer position: what was kept at 1 goes
    assert cache.size == 10 and cache.get(b"5", 1) is None
    assert cache.get(b"new", 2) is not None


def test_new_expensive_answers_share_one_budget_per_server(tmp_path: Path) -> None:
    """However many addresses ask, the process computes a bounded rate of new expensive
    answers; cached answers and cheap reads are not held back by it."""
    settings = {"address_rate": 1000.0, "computed_rate": 0.01, "computed_burst": ROUTE_COSTS[FEED]}
    config = ServerConfig(**(TEST_CONFIG.__dict__ | settings))
    for served in serve(LedgerHome.at(tmp_path / "home"), config):
        c = served.client
        assert c.get(FEED).status_code == 200
        refused = c.get(FEED, params={"limit": 5})
        assert refused.status_code == 429 and refused.json()["code"] == "rate-limited"
        assert "new answers" in refused.json()["detail"]
        assert int(refused.headers["retry-after"]) > 1000
        assert c.get(FEED).status_code == 200  # the answer computed before
        assert c.get(f"/v1/runs/{SEED}").status_code == 200


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
