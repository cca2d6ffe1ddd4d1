"""The service's features are made on first use, once per service (api/service/features.py).

A command makes the one or two it uses (tests/cli/test_cli_start.py holds which modules a
read command loads); a server makes each at its first request, and requests arriving at once
share one.
"""

from __future__ import annotations

import threading
from pathlib import Path

from cli_session import Cli

from api.cli.service import local_service
from api.service.features import Feature
from api.service.ledger_service import LedgerService

FEATURES = ["runs", "history", "boards", "compare", "search", "keys", "log", "jobs", "admin"]
FEATURES += ["records", "registry"]


def test_every_feature_is_a_feature_of_the_service() -> None:
    declared = {name for name, value in vars(LedgerService).items() if isinstance(value, Feature)}
    assert declared == set(FEATURES)


def test_each_feature_is_made_once_on_first_use_and_shared(tmp_path: Path) -> None:
    home, db = tmp_path / "home", f"sqlite:///{tmp_path / 'ledger.db'}"
    Cli(home, db)("init")
    with local_service(home, db) as service:
        assert not any(Feature.made(service, name) for name in FEATURES)
        assert service.keys.list_page().items  # the home's three keys
        assert Feature.made(service, "keys") is service.keys
        assert Feature.made(service, "log") is None  # not used: not made
        # Requests arriving at once share one (the log's making makes runs and boards too).
        start = threading.Barrier(8)
        seen: list[object] = []

        def first_use() -> None:
            start.wait()
            seen.append(service.log)

        threads = [threading.Thread(target=first_use) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(seen) == 8 and all(log is service.log for log in seen)
        assert service.log.runs is service.runs and service.log.boards is service.boards
