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

    def stop_follower(self) -> None:
        """Stop the views' follower (PostgreSQL), whose thread decodes each new event as it
        is committed: a test counting what a read decodes must count the read's alone (reads
        catch the views up themselves)."""
        follower = self.app.state.service.follower
        if follower is not None:
            follower.stop()


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
