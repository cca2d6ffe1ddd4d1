"""The registry on the real data (issue 34): GPU pages count each GPU's runs, an
implementation's page lists its author's runs, the records timeline holds every record event
of the KernelIndex catalog with the catalog's date, newest first, and the Atom feed carries
the same dates; the pages in headless Chromium at 1280 and 390 px, none wider than its
viewport, screenshots kept as test artifacts.

The oracles are the catalog export itself (its ``record_events`` and ``implementations``
tables, read here straight from the fixture) and the runs list (``GET /v1/runs``, another
read than the registry's counts)."""

from __future__ import annotations

import io
import json
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote
from xml.etree import ElementTree as ET

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

A = "{http://www.w3.org/2005/Atom}"
CHROMIUM = Path("/usr/bin/chromium")
SHOTS = Path(os.environ.get("KERNELINDEX_SCREENSHOTS", "test-artifacts/screenshots"))
AUTHOR = "Geometric"  # a SOL-ExecBench team: its runs come from the catalog alone


@pytest.fixture(scope="module")
def client(real: RealLedger) -> Iterator[TestClient[Litestar]]:
    ledger = real.open()
    with TestClient(create_app(ledger, TEST_CONFIG)) as c:
        yield c
    ledger.close()


@pytest.fixture(scope="module")
def catalog(shared: Path) -> dict[str, list[dict[str, Any]]]:
    """The catalog export's rows of the tables these tests read, by table."""
    wanted = {"benchmark_runs", "implementations", "record_events"}
    tables: dict[str, list[dict[str, Any]]] = {name: [] for name in wanted}
    with (shared / CATALOG).open("rb") as raw:
        reader = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(raw), "utf-8")
        for line in reader:
            item = json.loads(line)
            if item["table"] in wanted:
                tables[item["table"]].append(item["row"])
    return tables


def _pages(client: TestClient[Litestar], path: str, cursor: str, **query: Any) -> list[Any]:
    """Every item of a paged list, following its ``next`` as ``cursor``."""
    items: list[Any] = []
    params: dict[str, Any] = dict(query)
    while True:
        reply = client.get(path, params=params)
        assert reply.status_code == 200, reply.text
        page = reply.json()
        items += page["items"]
        if page["next"] is None:
            return items
        params[cursor] = page["next"]


@pytest.fixture(scope="module")
def timeline(client: TestClient[Litestar]) -> list[dict[str, Any]]:
    return _pages(client, "/v1/records", "before", limit=100)


def test_each_gpu_lists_as_many_runs_as_the_runs_list_holds(
    client: TestClient[Litestar], catalog: dict[str, list[dict[str, Any]]]
) -> None:
    gpus = {g["name"]: g for g in client.get("/v1/gpus").json()}
    runs = _pages(client, "/v1/runs", "cursor", limit=200)
    assert {name: g["runs"] for name, g in gpus.items()} == dict(
        Counter(r["gpu"] for r in runs if r["gpu"])
    )
    # Every GPU of the catalog is there, with at least the catalog's runs on it.
    for name, count in Counter(r["hardwareModel"] for r in catalog["benchmark_runs"]).items():
        assert gpus[name]["runs"] >= count, name
    assert sum(g["runs"] for g in gpus.values()) == len(runs) > 7_857
    h100 = client.get(f"/v1/gpus/{quote('NVIDIA H100')}", params={"limit": 200}).json()
    listed = [r["digest"] for r in h100["runs"]]
    while h100["runsNext"] is not None:
        h100 = client.get(
            f"/v1/gpus/{quote('NVIDIA H100')}", params={"limit": 200, "cursor": h100["runsNext"]}
        ).json()
        listed += [r["digest"] for r in h100["runs"]]
    assert listed == [r["digest"] for r in runs if r["gpu"] == "NVIDIA H100"]
    assert len(listed) == gpus["NVIDIA H100"]["runs"]


def test_an_implementation_page_lists_its_authors_runs(
    client: TestClient[Litestar], catalog: dict[str, list[dict[str, Any]]]
) -> None:
    by_author = {
        row["id"]
        for row in catalog["implementations"]
        if [a.get("name") for a in row["manifest"]["metadata"].get("authors", [])] == [AUTHOR]
    }
    every = {r["runDigest"] for r in catalog["benchmark_runs"]}
    runs = catalog["benchmark_runs"]
    theirs = {r["runDigest"] for r in runs if r["implementationId"] in by_author}
    assert len(theirs) == 89
    page = client.get(f"/v1/implementations/{AUTHOR}", params={"limit": 200}).json()
    listed = {r["digest"] for r in page["runs"]}
    assert page["summary"]["runs"] == len(page["runs"]) == len(listed)
    # The catalog's runs of its implementations, and those the SOL leaderboard's own rows add.
    assert theirs <= listed and not (listed - theirs) & every
    assert all(r["source"] == "sol-execbench" for r in page["runs"])
    authors = client.get("/v1/implementations", params={"limit": 500}).json()
    mine = next(a for a in authors["items"] if a["name"] == AUTHOR)
    assert (mine["runs"], mine["records"]) == (len(listed), page["summary"]["records"])
    # Its records are the timeline's records of its runs.
    assert all(r["author"] == AUTHOR for r in page["records"]["items"])


def test_the_timeline_holds_the_catalogs_record_events_with_their_dates_in_order(
    timeline: list[dict[str, Any]], catalog: dict[str, list[dict[str, Any]]]
) -> None:
    digests = {r["id"]: r["runDigest"] for r in catalog["benchmark_runs"]}
    events = [(e["comparisonKey"], digests[e["runId"]], e["at"]) for e in catalog["record_events"]]
    assert len(events) == 2_948
    ours = [(r["comparisonKey"], r["run"], r["at"]) for r in timeline]
    assert len(set(ours)) == len(ours)
    assert set(events) <= set(ours)  # every catalog record event, with the catalog's date
    # What the ledger adds are records of runs the other sources brought (not the catalog's).
    extra = [r for r in timeline if (r["comparisonKey"], r["run"], r["at"]) not in set(events)]
    assert all(r["run"] not in set(digests.values()) for r in extra), extra
    assert all(r["dated"] == "observed" for r in timeline)
    # Newest first; each group's records in the catalog's order, each beating the one before.
    assert [(r["at"], r["position"]) for r in timeline] == sorted(
        ((r["at"], r["position"]) for r in timeline), reverse=True
    )
    previous = {
        (e["comparisonKey"], digests[e["runId"]]): digests.get(e["previousRunId"])
        for e in catalog["record_events"]
    }
    keys_with_extra = {r["comparisonKey"] for r in extra}
    for r in timeline:
        if r["comparisonKey"] not in keys_with_extra:
            assert r["previousRun"] == previous[(r["comparisonKey"], r["run"])]


def test_the_feeds_entries_carry_the_timelines_dates(
    client: TestClient[Litestar], timeline: list[dict[str, Any]]
) -> None:
    seen: list[tuple[str, str]] = []
    path: str | None = "/feeds/records.atom"
    while path is not None:
        reply = client.get(path)
        assert reply.status_code == 200
        feed = ET.fromstring(reply.content)
        assert feed.findtext(f"{A}updated") == timeline[0]["at"]
        for entry in feed.findall(f"{A}entry"):
            seen.append((entry.findtext(f"{A}id") or "", entry.findtext(f"{A}updated") or ""))
        nxt = [link.get("href") for link in feed.findall(f"{A}link") if link.get("rel") == "next"]
        path = nxt[0] if nxt else None
    assert seen == [
        (f"urn:kernelindex:record:{r['comparisonKey']}:{r['run']}", r["at"]) for r in timeline
    ]
    # None is dated at ingestion (the whole ledger was imported within minutes).
    assert len({at for _, at in seen}) > 2_000


# --- the pages in a browser ---------------------------------------------------------------


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
    "gpus": ("/gpus", "NVIDIA B200"),
    "gpu-b200": (f"/gpus/{quote('NVIDIA B200')}", "#1 records set on NVIDIA B200"),
    "implementations": ("/implementations", AUTHOR),
    "implementation": (f"/implementations/{AUTHOR}", f"#1 records set by {AUTHOR}"),
    "records": ("/records", "source's date"),
}


def test_the_registry_pages_fit_1280_and_390_px(site: str) -> None:

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
