"""schemathesis' default run against the served OpenAPI document: no reply is a 5xx.

This is the `schemathesis run` command line a user would type (all phases: coverage,
fuzzing, stateful), against a real uvicorn server on loopback serving the demo ledger. The
number of generated cases is printed (``-s``) and must be substantial.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import TEST_CONFIG
from live_server import LiveServer, live_server

from api.demo import build_demo
from api.server.app import create_app
from ledger.home import LedgerHome


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    home = LedgerHome.at(Path(tmp_path_factory.mktemp("schemathesis")) / "home")
    ledger, _ = build_demo(home)
    with live_server(create_app(ledger, TEST_CONFIG)) as running:
        yield running


def test_schemathesis_default_run_finds_no_server_error(server: LiveServer) -> None:
    st = shutil.which("schemathesis") or str(Path(sys.executable).parent / "schemathesis")
    result = subprocess.run(
        [st, "run", f"{server.url}/schema/openapi.json", "--checks", "not_a_server_error"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    generated = re.search(r"(\d+) generated, (\d+) passed", output)
    assert generated is not None, output[-2000:]
    print(f"\nschemathesis: {generated.group(0)}; no 5xx")
    assert int(generated.group(1)) >= 1000
    assert generated.group(1) == generated.group(2)
