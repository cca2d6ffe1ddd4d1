"""Issue 34 on the real ledger (the whole KernelIndex catalog, every source fixture, the seed):
publication, admission and observation as three facts on every face; every catalog run signed
with the catalog's publication time and its source's own name; the seed's identity from its
source record; the commands with each run's own latency; a KernelBot case's published
standard deviation; no run page wider than its viewport; HEAD; the SOL-ExecBench example
folder's import; and every element of the KernelIndex run page the seed page reproduces."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, sync_playwright
from real_ledger import CATALOG, RealLedger
from sqlalchemy import func, select

from api.server.app import create_app
from domain.quantities import format_value
from domain.statements import PredicateType
from domain.timestamps import format_time, parse_time
from ledger.aggregates import Run
from ledger.store.stored_events import statement_of
from projections.tables import runs
from tests.live_server import live_server
from tests.served_app import TEST_CONFIG

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = Path(os.environ.get("KERNELINDEX_SCREENSHOTS", "test-artifacts/screenshots"))
REPO = Path(__file__).resolve().parents[2]
SEED = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
SOURCES = ("sol-execbench", "flashinfer-bench", "gpumode-kernelbot")


def _catalog(shared: Path) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """The catalog's sources (by id) and its benchmark run rows, read from the fixture."""
    import zstandard

    sources: dict[str, dict[str, Any]] = {}
    rows: list[dict[str, Any]] = []
    with (shared / CATALOG).open("rb") as raw:
        text = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(raw), "utf-8")
        for line in text:
            item = json.loads(line)
            if item["table"] == "sources":
                sources[item["row"]["id"]] = item["row"]
            elif item["table"] == "benchmark_runs":
                rows.append(item["row"])
    return sources, rows


def _one_run_per_source(real: RealLedger) -> dict[str, str]:
    ledger = real.open()
    try:
        with ledger.store.transaction(commit=False) as session:
            rows = session.execute(
                select(runs.c.source, func.min(runs.c.run_digest))
                .where(runs.c.claimed.is_not(None), runs.c.source.in_(SOURCES))
                .group_by(runs.c.source)
            ).all()
    finally:
        ledger.close()
    return {str(source): str(digest) for source, digest in rows}


@pytest.fixture(scope="module")
def site(real: RealLedger) -> Iterator[str]:
    ledger = real.open()
    with live_server(create_app(ledger, TEST_CONFIG)) as running:
        yield running.url
    ledger.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the browser tests: {CHROMIUM} is missing")
        pytest.skip(f"{CHROMIUM} is missing; apt-get install -y chromium")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox"], headless=True
        )
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def page(browser: Any) -> Iterator[Page]:
    tab = browser.new_page(viewport={"width": 1280, "height": 900})
    yield tab
    tab.close()


def test_every_catalog_run_is_signed_with_the_catalogs_publication_time_and_source_name(
    real: RealLedger, shared: Path
) -> None:
    sources, rows = _catalog(shared)
    ledger = real.open()
    try:
        signed: dict[str, dict[str, Any]] = {}
        for stored in ledger.stored_states(Run.Ingested):
            statement = statement_of(stored)
            assert statement["predicateType"] == PredicateType.INGESTION
            signed["sha256:" + statement["subject"][0]["digest"]["sha256"]] = statement["predicate"]
    finally:
        ledger.close()
    assert len(rows) == 7857
    for row in rows:
        predicate = signed[row["runDigest"]]
        assert predicate["publishedAt"] == format_time(parse_time(row["publishedAt"])), row["id"]
        assert predicate["sourceName"] == sources[row["sourceId"]]["name"], row["id"]
    names = {signed[row["runDigest"]]["sourceName"] for row in rows}
    assert {"GPU MODE KernelBot", "NVIDIA SOL-ExecBench", "FlashInfer-Bench"} <= names


def test_each_face_says_published_admitted_and_observed_apart(
    real: RealLedger, shared: Path, site: str
) -> None:
    sources, rows = _catalog(shared)
    by_digest = {row["runDigest"]: row for row in rows}
    for source, digest in sorted(_one_run_per_source(real).items()):
        record = httpx.get(f"{site}/v1/runs/{digest}").json()
        facts = record["provenance"]
        assert facts["admittedAt"] == record["ingestedAt"], source
        assert facts["observedAt"] == record["manifests"]["run"]["spec"]["observedAt"]
        row = by_digest.get(digest)
        if row is not None:  # a catalog run: the catalog's own time and name
            assert facts["publishedAt"] == format_time(parse_time(row["publishedAt"]))
            assert facts["sourceName"] == sources[row["sourceId"]]["name"]
            assert facts["publishedAt"] != facts["admittedAt"]
        text = httpx.get(f"{site}/runs/{digest}").text
        published = (
            f'<time datetime="{facts["publishedAt"]}">{facts["publishedAt"][:10]}</time>'
            f" · {facts['sourceName']}"
            if facts["publishedAt"]
            else f"{facts['sourceName']} states no publication date"
        )
        assert published in text, source
        assert f'<time datetime="{facts["admittedAt"]}">' in text
        assert f"Published {facts['admittedAt'][:10]}" not in text
        shown = " ".join(real.cli("show", digest).output.split())  # the table, unwrapped
        assert f"admitted {facts['admittedAt']} (by this ledger)" in shown, source
        assert f"observed {facts['observedAt']}" in shown, source
        if facts["publishedAt"]:
            assert f"published {facts['publishedAt']} (by {facts['sourceName']})" in shown
        # The CLI's --json is the API's record.
        assert real.cli.json("show", digest)["provenance"] == facts


def test_the_reproduction_command_on_every_run_attests_that_runs_own_latency(
    real: RealLedger, site: str
) -> None:
    for source, digest in sorted((_one_run_per_source(real) | {"seed": SEED}).items()):
        record = httpx.get(f"{site}/v1/runs/{digest}").json()
        part = record["takePart"]
        primary = record["primary"]
        timing = record["measurements"]["timing"] or {}
        own = primary["latencyNs"]
        if own is None:
            own = (timing.get("latencyNs") or {}).get(timing.get("primaryStatistic"))
        assert part["observedNs"] == (round(own) if own is not None else None), source
        text = httpx.get(f"{site}/runs/{digest}").text
        assert "1750000" not in text, source
        if own is not None:
            assert f"--observed-ns {round(own)} " in part["attest"]
            assert f"--observed-ns {round(own)} " in text, source
    seed = httpx.get(f"{site}/v1/runs/{SEED}").json()["takePart"]
    assert seed["observedNs"] == 1750693 and seed["observed"] == "1.751 ms"


def test_a_kernelbot_case_shows_its_published_standard_deviation(
    real: RealLedger, site: str
) -> None:
    ledger = real.open()
    try:
        with ledger.store.transaction(commit=False) as session:
            digest = session.execute(
                select(runs.c.run_digest).where(
                    runs.c.source == "gpumode-kernelbot",
                    runs.c.external_id.like("submission/30771#amd-fp8-mm/0@%"),
                )
            ).scalar_one()
    finally:
        ledger.close()
    record = httpx.get(f"{site}/v1/runs/{digest}").json()
    [std] = [m for m in record["measurements"]["reported"] if m["statistic"] == "std"]
    # fp8-mm-top.json, submission 30771, benchmark 0: "benchmark.0.std": "1107.44…", 100 runs.
    assert std["unit"] == "ns" and std["sampleCount"] == 100
    assert abs(std["value"] - 1107.4411117800378) < 1e-9
    text = httpx.get(f"{site}/runs/{digest}").text
    row = (
        '<tr><th scope="row">latency</th><td class="statistic">std</td>'
        f'<td class="num">{format_value(std["value"], "ns")}</td><td class="num">100</td></tr>'
    )
    assert row in text


def test_the_seed_states_who_from_its_source_record(real: RealLedger, site: str) -> None:
    identity = httpx.get(f"{site}/v1/runs/{SEED}").json()["identity"]
    assert (identity["implementation"], identity["project"], identity["revision"]) == (
        "Geometric",
        "Geometric",
        "submission-38823",
    )
    assert identity["statedBy"] == "the run's source record"
    shown = " ".join(real.cli("show", "38823").output.split())  # the table, unwrapped
    assert "implementation Geometric (from the run's source record)" in shown
    assert "submission-38823" in shown


def test_no_run_page_is_wider_than_its_viewport(real: RealLedger, site: str, browser: Any) -> None:
    chosen = {"seed": SEED} | _one_run_per_source(real)
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in (1280, 390):
        tab = browser.new_page(viewport={"width": width, "height": 900})
        try:
            for name, digest in chosen.items():
                response = tab.goto(f"{site}/runs/{digest}")
                assert response is not None and response.status == 200
                scroll = tab.evaluate("document.documentElement.scrollWidth")
                assert scroll <= width, (name, width, scroll)
                tab.screenshot(path=str(SHOTS / f"run-width-{name}-{width}.png"), full_page=True)
        finally:
            tab.close()


def test_the_seeds_constant_case_axes_are_one_line(site: str, page: Page) -> None:
    workload = httpx.get(f"{site}/v1/runs/{SEED}").json()["workload"]
    constants = workload["constants"]
    varying = [axis for axis in workload["axes"] if axis not in constants]
    assert constants and varying
    page.goto(f"{site}/runs/{SEED}")
    headers = page.locator("table.cases thead th").all_inner_texts()
    assert headers == ["Case", *varying]
    line = page.locator(".constant-axes").inner_text()
    assert all(f"{axis} = {value}" in line for axis, value in constants.items())


def test_head_answers_pages_and_api_gets(site: str) -> None:
    for path in (f"/runs/{SEED}", f"/v1/runs/{SEED}", f"/runs/{SEED}/history", "/"):
        head = httpx.head(f"{site}{path}")
        assert head.status_code == 200 and head.content == b"", path
        assert int(head.headers["content-length"]) == len(httpx.get(f"{site}{path}").content)


def test_the_sol_execbench_example_folder_makes_no_run_and_says_why(real: RealLedger) -> None:
    """The folder holds a definition, workloads and a solution but no traces, and a run is a
    trace's result: the import keeps the solution and makes no run, as docs/tour.md says."""
    report = real.reports["fixtures/sol-execbench/cuda_cpp-rmsnorm"]
    assert report["new"] == 0 and report["rejected"] == []
    skipped = report["skipped"]
    assert isinstance(skipped, list) and len(skipped) == 1
    assert "no trace*.jsonl in the folder" in skipped[0]["reason"]
    tour = (REPO / "docs" / "tour.md").read_text("utf-8")
    assert "but no traces: its solution is kept\nas an artifact, and no run is made" in tour


def test_the_seed_page_shows_every_element_of_the_kernelindex_run_page(
    real: RealLedger, site: str, page: Page
) -> None:
    """README (the demo's run record) and docs/design.md §1 list what the seed page keeps of
    the KernelIndex run page: primary measurement, evidence level with reasons, "Rank 3 of 3
    in its comparison group · source-native comparison", compare with #1, community notes
    that never change the level, and the verified history; with this ledger's values."""
    record = httpx.get(f"{site}/v1/runs/{SEED}").json()
    page.goto(f"{site}/runs/{SEED}")
    main = page.locator("main")
    # Primary measurement: the seed's mean latency, 1,750,693 ns.
    assert record["primary"]["value"] == 1750693
    assert page.locator(".primary-value").inner_text() == "1.751 ms"
    # Evidence level with its reasons.
    level = record["evidence"]["level"]
    assert level == "reported"
    assert main.locator(".badge.evidence").first.inner_text() == level
    assert main.locator("ul.reasons li").all_inner_texts() == record["evidence"]["reasons"]
    # Rank in its comparison group, source-native.
    label = "Rank 3 of 3 in its comparison group · source-native comparison"
    assert record["standings"]["source-native"]["label"] == label
    assert label in main.locator(".rank-label").first.inner_text()
    # Compare with #1.
    first = record["compareWithFirst"]
    assert first["b"] != SEED and abs(first["ratio"] - 1750693 / 1499085) < 1e-3
    compare = main.locator("section[aria-labelledby=compare-heading]").inner_text()
    assert "1.168×" in compare and first["b"][:19] in compare
    # Community notes, which never change the level.
    notes = main.locator("section[aria-labelledby=attestations-heading]").inner_text()
    assert "never change the evidence level" in notes
    # Its verified history.
    history = main.locator("a.history-link").inner_text()
    assert f"{record['events']} signed events" in history and "verified" in history
    # Identity as KernelIndex shows it, and the source's own name.
    identity = main.locator("section[aria-labelledby=identity-heading]").inner_text()
    assert "Geometric" in identity and "submission-38823" in identity
    assert "from the run's source record" in identity
    assert "NVIDIA SOL-ExecBench" in main.locator(".subtitle").inner_text()
    page.screenshot(path=str(SHOTS / "run-seed-real.png"), full_page=True)
