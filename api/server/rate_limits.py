"""Token-bucket rate limits, per client address and per signing key id; what a request costs.

Kept in process memory: with several workers each enforces its own share, which bounds a
client by workers × rate. Refusals answer 429 with Retry-After; nothing is appended.

A request costs its client address ``CHEAP`` tokens, except an expensive read that the read
cache (``api.server.read_cache``) has no answer for at the current position: that costs its
route's ``ROUTE_COSTS`` entry, so a client asking for new expensive answers in a loop runs out
long before it holds the server's CPU. What all clients together may compute at once is
bounded apart, by slots, never by refusing an address for what others asked.
Self-registrations of keys (anyone may mint attester keys) have their own, much smaller,
per-address bucket: minting keys cannot multiply the per-key write limit.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from litestar.exceptions import HTTPException

from domain.documents import parse_json
from domain.errors import DomainError
from ledger.signing.dsse import MAX_ENVELOPE_BYTES, parse_envelope

MAX_TRACKED = 100_000  # clients remembered; the least recently seen are forgotten first

CHEAP = 1  # tokens a request costs (a cached answer too)

# Tokens an expensive read costs when it must be computed (GET, by Litestar's route path
# template: parameters by name alone, no type), the one place they are declared; the app
# refuses to start with one that is no GET route of it (``read_cache.costed_routes``).
# A cheap read (a run record, ~10 ms of CPU on the catalog) is 1;
# these are set well above their CPU share (the feed ~700 ms, search ~150 ms, the index page
# and the group list ~50 ms, an export or an operation ~20-60 ms on the 7,857-run catalog) so
# that at the default 500 tokens/s an address gets at most a few new expensive answers a
# second; the same route answered from the cache costs CHEAP.
ROUTE_COSTS: dict[str, int] = {
    "/feeds/records.atom": 1000,
    "/v1/search": 250,
    "/search": 250,
    # Asked as a query is typed (a script waits 150 ms after the last key): a few a second.
    "/v1/search/suggest": 50,
    "/": 100,
    "/v1/groups": 100,
    "/v1/bundle": 200,
    # The whole registry (every run, or every event with its proof): a full bucket.
    "/v1/registry.jsonl": 1000,
    "/v1/registry.bundle": 1000,
    "/v1/operations": 50,
    "/operations": 50,
    "/v1/operations/{name}": 50,
    "/operations/{name}": 50,
    "/v1/leaderboards/{key}": 20,
    "/leaderboards/{key}": 20,
    # The registry (~50-300 ms on the catalog: a GPU's or an author's counts, a page of the
    # records timeline with its groups' names).
    "/v1/gpus": 250,
    "/gpus": 250,
    "/v1/gpus/{name}": 100,
    "/gpus/{name}": 100,
    "/v1/implementations": 200,
    "/implementations": 200,
    "/v1/implementations/{name}": 50,
    "/implementations/{name}": 50,
    # A project's counts read every run of its implementations (~45-75 ms of CPU on the
    # catalog, twice an author's: benchmarks/README.md, "Projects").
    "/v1/projects": 250,
    "/projects": 250,
    "/v1/projects/{name}": 100,
    "/projects/{name}": 100,
    "/v1/records": 100,
    "/records": 100,
}

# The route a key is registered (or self-registered) at.
KEY_REGISTRATION = "/v1/keys"


@dataclass
class _Bucket:
    tokens: float
    updated: float


class TokenBuckets:
    """``rate`` tokens per second sustained, bursts of up to ``burst``; rate 0 = unlimited."""

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = max(1, burst)
        self.clock = clock
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: str, *, spend: bool = True, cost: float = CHEAP) -> float | None:
        """Spend ``cost`` tokens for ``key`` (or, with ``spend=False``, only check that they
        are there); None if allowed, else seconds until they are. A cost above the burst
        takes a full bucket: every route stays reachable, however small the burst."""
        if self.rate <= 0:
            return None
        cost = min(float(cost), float(self.burst))
        now = self.clock()
        with self._lock:
            if not spend and key not in self._buckets:
                # A key with no bucket has a full one: nothing to check, and nothing kept
                # (the key may be anything a client sent: an unverified key id, say).
                return None
            bucket = self._buckets.pop(key, None) or _Bucket(float(self.burst), now)
            bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.updated) * self.rate)
            bucket.updated = now
            self._buckets[key] = bucket
            if len(self._buckets) > MAX_TRACKED:
                self._buckets.popitem(last=False)
            if bucket.tokens >= cost:
                bucket.tokens -= cost if spend else 0
                return None
            return (cost - bucket.tokens) / self.rate


def retry_after_header(wait: float) -> dict[str, str]:
    return {"Retry-After": str(max(1, math.ceil(wait)))}


def rate_limited(who: str, wait: float) -> HTTPException:
    """The 429 every limiter answers: ``too many <who>; retry in N s``, with Retry-After."""
    return HTTPException(
        status_code=429,
        detail=f"too many {who}; retry in {wait:.1f} s",
        headers=retry_after_header(wait),
    )


def self_registered_key(body: bytes) -> str | None:
    """The key id a posted key statement registers when that key signs it itself (a mint:
    no admin vouches for it), else None; a body that is no envelope is None too (its route
    refuses it as it would anyway)."""
    try:
        envelope = parse_envelope(parse_json(body, max_bytes=MAX_ENVELOPE_BYTES))
        predicate: Any = envelope.statement().predicate
    except (DomainError, ValueError, RecursionError):
        return None
    if not isinstance(predicate, dict) or predicate.get("action") != "register":
        return None
    key_id = predicate.get("keyId")
    return key_id if isinstance(key_id, str) and key_id == envelope.keyid else None
