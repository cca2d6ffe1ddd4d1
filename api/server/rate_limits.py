"""Token-bucket rate limits, per client address and per signing key id.

Kept in process memory: with several workers each enforces its own share, which bounds a
client by workers × rate. Refusals answer 429 with Retry-After; nothing is appended.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

MAX_TRACKED = 100_000  # clients remembered; the least recently seen are forgotten first


@dataclass
class _Bucket:
    tokens: float
    updated: float


class TokenBuckets:
    """``rate`` requests per second sustained, bursts of up to ``burst``; rate 0 = unlimited."""

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = max(1, burst)
        self.clock = clock
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: str, *, spend: bool = True) -> float | None:
        """Spend one token for ``key`` (or, with ``spend=False``, only check that one is
        there); None if allowed, else seconds until one is free."""
        if self.rate <= 0:
            return None
        now = self.clock()
        with self._lock:
            bucket = self._buckets.pop(key, None) or _Bucket(float(self.burst), now)
            bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.updated) * self.rate)
            bucket.updated = now
            self._buckets[key] = bucket
            if len(self._buckets) > MAX_TRACKED:
                self._buckets.popitem(last=False)
            if bucket.tokens >= 1:
                bucket.tokens -= 1 if spend else 0
                return None
            return (1 - bucket.tokens) / self.rate


def retry_after_header(wait: float) -> dict[str, str]:
    return {"Retry-After": str(max(1, math.ceil(wait)))}
