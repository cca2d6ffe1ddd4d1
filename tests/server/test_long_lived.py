"""A server worker's start-up heap is frozen out of the collector's walks once it is ready to
serve: full collections then walk only what requests allocated (they had walked the whole
app and ledger, and those pauses were most of the API's p99 under load: see
``ledger/long_lived.py``). The latency itself is measured in ``benchmarks/``, not here."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.demo import build_demo
from api.server.app import create_app_from_env
from ledger.home import DB_ENV, HOME_ENV, LedgerHome
from ledger.long_lived import YOUNG_GC_THRESHOLD


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()  # what the test froze goes back to the collector
    gc.set_threshold(*thresholds)


def test_an_api_worker_is_ready_with_its_start_up_heap_frozen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unfrozen: None
) -> None:
    home = LedgerHome.at(tmp_path / "home")
    ledger, _ = build_demo(home)
    ledger.close()
    monkeypatch.setenv(HOME_ENV, str(home.path))
    monkeypatch.setenv(DB_ENV, home.db_url)
    assert gc.get_freeze_count() == 0
    thresholds = gc.get_threshold()
    app = create_app_from_env()
    walked = {id(o) for o in gc.get_objects()}
    service = app.state.service
    long_lived = (app, service, service.ledger, service.ledger.store, app.openapi_schema)
    assert not any(id(o) in walked for o in long_lived)
    assert gc.get_freeze_count() > len(walked)  # most of the heap is out of the walks
    # Young collections every YOUNG_GC_THRESHOLD allocations, the older ones' as they were.
    assert gc.get_threshold() == (YOUNG_GC_THRESHOLD, *thresholds[1:])
    service.ledger.close()
