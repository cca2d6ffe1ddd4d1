"""The demo ledger behind the API in a Litestar test client: shared by tests/server and
tests/abuse."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from litestar import Litestar
from litestar.testing import TestClient

from api.demo import build_demo
from api.server.app import create_app
from api.server.config import ServerConfig
from ledger.application import Ledger
from ledger.home import LedgerHome

# Generous limits so tests measure behaviour, not throttling; rate-limit tests set their own.
TEST_CONFIG = ServerConfig(key_rate=0, address_rate=0, json_logs=False)


@dataclass
class Served:
    home: LedgerHome
    ledger: Ledger
    seed: str
    app: Litestar
    client: TestClient[Litestar]

    def settle_views(self) -> None:
        """Let the server's views folder fold what the log holds now. It folds on a thread
        (and connections) of its own, and decodes each new event as it folds it: a test
        counting what a read decodes then counts the read's alone (the folds of later
        writes are the waits of the reads that follow them)."""
        self.app.state.service.views.position()

    stop_follower = settle_views  # its name from when PostgreSQL alone had a follower


def serve(home: LedgerHome, config: ServerConfig = TEST_CONFIG) -> Iterator[Served]:
    ledger, seed = build_demo(home)
    app = create_app(ledger, config)
    with TestClient(app) as client:
        yield Served(home, ledger, seed, app, client)


# The run page's sections, in order: the seed page's elements (DESIGN.md §1).
RUN_PAGE_SECTIONS = (
    "Primary measurement",
    "Evidence level",
    "Rank and view",
    "Compare with #1",
    "Source-native metrics",
    "Identity and digests",
    "Correctness",
    "Workload",
    "Measurements",
    "Protocol",
    "Environment",
    "Implementation and artifacts",
    "Replications and notes",
    "Badge",
    "Take part",
    "Canonical manifest",
    "Citation",
)
