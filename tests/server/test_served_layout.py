"""The layout `kernelindex serve` runs when no worker count is given, and the rate limits'
share each of several workers takes: however a client's requests are spread over the
workers, together they never allow more than the configured limits."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from api.cli import serve
from api.demo import build_demo
from api.server import app as server_app
from api.server.app import create_app_from_env
from api.server.config import ServerConfig
from api.server.rate_limits import TokenBuckets
from ledger.home import DB_ENV, HOME_ENV, LedgerHome


@pytest.mark.parametrize(
    ("sqlite", "cores", "workers"),
    [(True, 1, 1), (True, 2, 2), (True, 16, 2), (False, 2, 1), (False, 16, 1)],
)
def test_default_workers(sqlite: bool, cores: int, workers: int) -> None:
    """Two workers in front of SQLite's one writer process where there are two cores;
    PostgreSQL (each worker writes itself) and a single core keep one."""
    assert serve.default_workers(sqlite, cores) == workers


def test_serve_and_the_app_name_the_same_variable() -> None:
    assert serve.WORKERS_ENV == server_app.WORKERS_ENV


@pytest.mark.parametrize("workers", [1, 2, 3, 4])
def test_shares_add_up_to_no_more_than_the_limits(workers: int) -> None:
    whole = ServerConfig()
    part = whole.shared_by(workers)
    for rate, burst in (
        ("key_rate", "key_burst"),
        ("address_rate", "address_burst"),
        ("registration_rate", "registration_burst"),
    ):
        assert getattr(part, rate) * workers == pytest.approx(getattr(whole, rate))
        assert getattr(part, burst) == math.ceil(getattr(whole, burst) / workers)
    assert part.max_body_bytes == whole.max_body_bytes  # only the token buckets are shared
    assert part.compute_slots == whole.compute_slots


def test_a_burst_spread_over_two_workers_gets_the_one_burst() -> None:
    """One address's requests landing on both workers of a two-worker server: refused once
    the configured burst is spent, as one worker alone refused them before."""
    config = ServerConfig().shared_by(2)
    still = 1_000.0  # no time passes: nothing refills
    workers = [
        TokenBuckets(config.address_rate, config.address_burst, clock=lambda: still)
        for _ in range(2)
    ]
    allowed = 0
    for n in range(ServerConfig().address_burst + 10):
        if workers[n % 2].take("203.0.113.7") is None:
            allowed += 1
    assert allowed <= ServerConfig().address_burst


def test_a_served_worker_takes_its_share(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = LedgerHome.at(tmp_path / "home")
    build_demo(home)[0].close()
    monkeypatch.setenv(HOME_ENV, str(home.path))
    monkeypatch.setenv(DB_ENV, home.db_url)
    monkeypatch.setenv(serve.WORKERS_ENV, "2")
    app = create_app_from_env()
    try:
        assert app.state.config.key_rate == ServerConfig().key_rate / 2
        assert app.state.key_limiter.rate == ServerConfig().key_rate / 2
    finally:
        app.state.service.ledger.close()
