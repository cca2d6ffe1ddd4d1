"""schemathesis' default run against the served OpenAPI document: no reply is a 5xx, and
every reply is one the document describes (its status, media type, headers and body schema).

This is the `schemathesis run` command line a user would type (all phases: coverage,
fuzzing, stateful — the last following the schema's OpenAPI links), against a real uvicorn
server on loopback serving the demo ledger. The number of generated cases is printed (``-s``)
and must be substantial.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_server import LiveServer, live_server
from served_app import TEST_CONFIG

from api.demo import build_demo
from api.server.app import create_app
from ledger.home import LedgerHome

# No 5xx; and each reply conforms to the document (api/server/openapi_problems.py derives
# the refusals each operation documents, api/server/responses the bodies).
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    home = LedgerHome.at(Path(tmp_path_factory.mktemp("schemathesis")) / "home")
    ledger, _ = build_demo(home)
    with live_server(create_app(ledger, TEST_CONFIG)) as running:
        yield running


def test_schemathesis_default_run_finds_no_server_error(server: LiveServer) -> None:
    st = shutil.which("schemathesis") or str(Path(sys.executable).parent / "schemathesis")
    result = subprocess.run(
        [
            st,
            "run",
            f"{server.url}/schema/openapi.json",
            "--checks",
            ",".join(CHECKS),
            # A generation check, not a server one: for the path-typed names
            # (/v1/implementations/{name}, /v1/projects/{name}: any text, "/" included)
            # schemathesis filters out the values a URL path cannot carry, and on some seeds
            # it gives up as "filter too much" though no request failed.
            "--suppress-health-check",
            "filter_too_much",
        ],
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
    # The stateful phase follows the OpenAPI links (api/server/openapi_links.py) from lists
    # to the records they name: real runs, groups, keys and log sizes, not random ids.
    links = re.search(r"API Links:\s+(\d+) covered", output)
    assert links is not None, output[-2000:]
    print(f"schemathesis stateful phase: {links.group(1)} API links followed")
    assert int(links.group(1)) >= 6  # of 15 declared + inferred; the walk is random


def test_the_served_schema_links_lists_to_the_records_they_name(server: LiveServer) -> None:
    import httpx

    doc = httpx.get(f"{server.url}/schema/openapi.json", trust_env=False).json()
    runs = doc["paths"]["/v1/runs"]["get"]["responses"]["200"]["links"]
    assert runs["RunRecord"] == {
        "operationId": "V1RunsDigestRecord",
        "parameters": {"path.digest": "$response.body#/items/0/digest"},
    }
    operations = {
        op["operationId"]
        for item in doc["paths"].values()
        for op in item.values()
        if isinstance(op, dict) and "operationId" in op
    }
    declared = [
        link
        for item in doc["paths"].values()
        for op in item.values()
        if isinstance(op, dict)
        for reply in op.get("responses", {}).values()
        for link in reply.get("links", {}).values()
    ]
    assert len(declared) == 15
    assert all(link["operationId"] in operations for link in declared)
