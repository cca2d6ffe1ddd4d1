"""Server settings: limits and the public address used in permalinks."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True)
class ServerConfig:
    # Request bodies: an ingestion carries manifests of up to 1 MiB, base64 in the envelope.
    max_body_bytes: int = 2 * MIB
    # Writes per signing key id, sustained per second and burst.
    key_rate: float = 20.0
    key_burst: int = 200
    # Requests per client address (all routes), sustained per second and burst.
    address_rate: float = 500.0
    address_burst: int = 2000
    # Keys a client address may register for themselves (self-signed: attesters), per second
    # and burst: anyone may mint keys, so without this the per-key limit multiplies by the
    # keys a client mints. A per-address limit: off, like the one above, when address_rate is 0.
    registration_rate: float = 1 / 60
    registration_burst: int = 5
    # Expensive answers (ROUTE_COSTS routes, not from the read cache) each process computes
    # at once, whoever asks; 0: no bound. The rest wait for a slot up to compute_wait seconds,
    # then answer 503 with Retry-After: a busy server slows everyone a little, it never
    # refuses an address for what other addresses asked (the address limit is their own).
    # compute_wait is also how long a request waits for the same answer being computed by
    # another before computing it itself.
    compute_slots: int = 4
    compute_wait: float = 10.0
    # Bytes of expensive answers (feed, search, operations, exports) each process keeps, by
    # request and views position (``api.server.read_cache``); 0: none kept.
    read_cache_bytes: int = 64 * MIB
    # Seconds a client has to send a whole request body (0: no limit). uvicorn has none, so
    # without it a stalled upload holds its request open forever (slow-loris).
    body_timeout: float = 30.0
    # Base of permalinks in citations, e.g. https://ledger.kernelindex.dev; None: the request's.
    public_url: str | None = None
    # Structured log lines as JSON (False: human-readable console lines).
    json_logs: bool = True
