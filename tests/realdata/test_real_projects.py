"""Projects on the real data (issue 34, "pages per project"): the KernelIndex catalog names a
project for each of its 4,250 implementations (its rows' ``projectId``; the implementation's
manifest has no project field), and the registry lists each project with the runs of its
implementations, the same on ``GET /v1/projects``, the pages and ``kernelindex projects``;
the pages in headless Chromium at 1280 and 390 px, none wider than its viewport.

The oracle is the catalog export itself: its ``projects``, ``implementations`` and
``benchmark_runs`` rows, read here from the fixture."""

from __future__ import annotations

import io
import json
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import zstandard
from litestar import Litestar
from litestar.testing import TestClient
from playwright.sync_api import sync_playwright
from real_ledger import CATALOG, RealLedger

from api.server.app import create_app
from tests.live_server import live_server
from tests.served_app import TEST_CONFIG

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = Path(os.environ.get("KERNELINDEX_SCREENSHOTS", "test-artifacts/screenshots"))
PROJECT = "Geometric"  # the seed's project on KernelIndex


@pytest.fixture(scope="module")
def client(real: RealLedger) -> Iterator[TestClient[Litestar]]:
    ledger = real.open()
    with TestClient(create_app(ledger, TEST_CONFIG)) as c:
        yield c
    ledger.close()


@pytest.fixture(scope="module")
def catalog_runs(shared: Path) -> tuple[Counter[str], int]:
    """Runs per project as the catalog's rows link them, and how many projects it names."""
    wanted = {"projects", "implementations", "benchmark_runs"}
    tables: dict[str, list[dict[str, Any]]] = {name: [] for name in wanted}
    with (shared / CATALOG).open("rb") as raw:
        reader = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(raw), "utf-8")
        for line in reader:
            item = json.loads(line)
            if item["table"] in wanted:
                tables[item["table"]].append(item["row"])
    # A project is its slug; its display name is shared by other people's projects (two
    # "steve"s), so a shared name is told apart by the slug, as the registry shows it.
    namesakes = Counter(p["name"] for p in tables["projects"])
    names = {
        p["id"]: p["name"] if namesakes[p["name"]] == 1 else f"{p['name']} ({p['slug']})"
        for p in tables["projects"]
    }
    project_of = {i["id"]: names[i["projectId"]] for i in tables["implementations"]}
    counted = Counter(project_of[r["implementationId"]] for r in tables["benchmark_runs"])
    assert len(set(names.values())) == len(names)  # no two projects under one name
    return counted, len(names)


def test_every_project_lists_the_runs_the_catalog_links_to_it(
    client: TestClient[Litestar], catalog_runs: tuple[Counter[str], int]
) -> None:
    counted, named = catalog_runs
    listed = client.get("/v1/projects", params={"limit": 500}).json()
    assert listed["named"] == named
    assert listed["total"] == len(counted)  # every project with a run, none without
    items = listed["items"]
    if listed["next"] is not None:
        items += client.get("/v1/projects", params={"start": 501, "limit": 500}).json()["items"]
    assert {i["name"]: i["runs"] for i in items} == dict(counted)
    runs = [i["runs"] for i in items]
    assert runs == sorted(runs, reverse=True)


def test_a_projects_page_holds_its_runs_and_records(
    client: TestClient[Litestar], catalog_runs: tuple[Counter[str], int], real: RealLedger
) -> None:
    counted, _ = catalog_runs
    path = f"/v1/projects/{quote(PROJECT)}"
    first = client.get(path).json()
    assert first["kind"] == "project" and first["summary"]["runs"] == counted[PROJECT]
    digests = [r["digest"] for r in first["runs"]]
    cursor = first["runsNext"]
    while cursor is not None:
        page = client.get(path, params={"cursor": cursor}).json()
        digests += [r["digest"] for r in page["runs"]]
        cursor = page["runsNext"]
    assert len(digests) == len(set(digests)) == counted[PROJECT]
    assert first["records"]["items"] and first["summary"]["records"] > 0
    assert all(r["author"] == PROJECT for r in first["records"]["items"])
    printed = real.cli("projects", PROJECT, "--json").stdout_bytes
    assert printed == client.get(path).content + b"\n"
    assert client.get("/v1/projects/no%20such%20project").status_code == 404
    assert client.get("/projects/no%20such%20project").status_code == 404


@pytest.fixture(scope="module")
def site(real: RealLedger) -> Iterator[str]:
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the browser tests: {CHROMIUM} is missing")
        pytest.skip(f"{CHROMIUM} is missing; apt-get install -y chromium")
    ledger = real.open()
    with live_server(create_app(ledger, TEST_CONFIG)) as running:
        yield running.url
    ledger.close()


PAGES = {
    "projects": ("/projects", "FlashInfer-Bench baselines"),
    "project": (f"/projects/{quote(PROJECT)}", f"#1 records set by {PROJECT}"),
}


def test_the_project_pages_fit_1280_and_390_px(site: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox"], headless=True
        )
        try:
            for width in (1280, 390):
                tab = browser.new_page(viewport={"width": width, "height": 900})
                for name, (path, shown) in PAGES.items():
                    response = tab.goto(f"{site}{path}")
                    assert response is not None and response.status == 200, path
                    assert shown in tab.locator("main").inner_text(), (path, shown)
                    scroll = tab.evaluate("document.documentElement.scrollWidth")
                    assert scroll <= width, (path, width, scroll)
                    tab.screenshot(path=str(SHOTS / f"registry-{name}-{width}.png"))
                tab.close()
        finally:
            browser.close()
