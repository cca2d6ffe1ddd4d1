"""The pages on the real data, in headless Chromium (issue 14): one run page per source with
every section of the seed page, a screenshot of each kept as a test artifact, and a big
leaderboard paginated with a chart named for its metric."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, sync_playwright
from real_ledger import RealLedger
from sqlalchemy import func, select

from api.server.app import create_app
from projections.tables import ranks, runs
from tests.live_server import live_server
from tests.served_app import RUN_PAGE_SECTIONS, TEST_CONFIG

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = Path(os.environ.get("KERNELINDEX_SCREENSHOTS", "test-artifacts/screenshots"))


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


@pytest.fixture(scope="module")
def page(site: str) -> Iterator[Page]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox"], headless=True
        )
        tab = browser.new_page(viewport={"width": 1280, "height": 900})
        yield tab
        browser.close()


def _one_run_per_source(real: RealLedger) -> dict[str, str]:
    ledger = real.open()
    try:
        with ledger.store.transaction(commit=False) as session:
            rows = session.execute(
                select(runs.c.source, func.min(runs.c.run_digest))
                .where(runs.c.claimed.is_not(None))
                .group_by(runs.c.source)
            ).all()
            score = session.execute(
                select(runs.c.run_digest).where(runs.c.metric == "score").limit(1)
            ).scalar_one()
    finally:
        ledger.close()
    return {str(source): str(digest) for source, digest in rows} | {"gpumode-score": score}


def test_a_run_page_of_every_source_has_every_section_of_the_seed_page(
    real: RealLedger, site: str, page: Page
) -> None:
    chosen = _one_run_per_source(real)
    assert {"sol-execbench", "flashinfer-bench", "gpumode-kernelbot"} <= set(chosen)
    SHOTS.mkdir(parents=True, exist_ok=True)
    for source, digest in sorted(chosen.items()):
        response = page.goto(f"{site}/runs/{digest}")
        assert response is not None and response.status == 200, source
        headings = page.locator("main h2").all_inner_texts()
        missing = [s for s in RUN_PAGE_SECTIONS if not any(h.startswith(s) for h in headings)]
        assert not missing, (source, missing)
        primary = page.locator(".primary-value").inner_text()
        assert primary != "—", (source, digest)
        page.screenshot(path=str(SHOTS / f"run-{source}.png"), full_page=True)


def test_a_big_leaderboard_is_paginated_with_a_chart_named_for_its_metric(
    real: RealLedger, site: str, page: Page
) -> None:
    ledger = real.open()
    try:
        with ledger.store.transaction(commit=False) as session:
            key, size = session.execute(
                select(ranks.c.comparison_key, func.count())
                .join(runs, runs.c.run_digest == ranks.c.run_digest)
                .where(ranks.c.view == "source-native", runs.c.metric == "score")
                .group_by(ranks.c.comparison_key)
                .order_by(func.count().desc())
                .limit(1)
            ).one()
    finally:
        ledger.close()
    assert size > 50
    page.goto(f"{site}/leaderboards/{key}")
    assert (
        page.locator("#chart-heading")
        .inner_text()
        .startswith(f"Score chart: entries 1–50 of {size}")
    )
    assert page.locator("svg.chart rect.bar").count() == 50
    assert page.locator("table.ranking tbody tr").count() == 50
    page.screenshot(path=str(SHOTS / "leaderboard-score.png"), full_page=False)
    page.get_by_role("link", name="more entries →").click()
    page.wait_for_url("**start=51")
    # The second page starts at the 51st entry of the ranking (ranks can tie).
    board = httpx.get(f"{site}/v1/leaderboards/{key}", params={"start": 51, "limit": 1}).json()
    first_run = page.locator("table.ranking tbody tr").first.get_attribute("data-run")
    assert board["start"] == 51 and first_run == board["entries"][0]["run"]


def test_the_index_is_a_summary_and_operations_lead_to_every_group(
    real: RealLedger, site: str, page: Page
) -> None:
    response = page.goto(f"{site}/")
    assert response is not None and response.status == 200
    assert len(page.content()) < 150_000  # was 713 KB: every one of ~1,900 groups
    assert page.locator("table.groups").first.locator("tbody tr").count() == 30
    page.locator("a.operation-link").first.click()
    page.wait_for_url("**/operations/*")
    assert page.locator("table.groups tbody tr").count() >= 1
    page.screenshot(path=str(SHOTS / "operation-real.png"), full_page=False)
    listing = page.goto(f"{site}/operations")
    assert listing is not None and listing.status == 200
    assert page.locator("a.operation-link").count() > 100
    # GPU MODE operations are named like amd-fp8-mm/10: their pages and JSON answer too.
    slashed = page.locator("a.operation-link", has_text="/").first
    name = slashed.inner_text()
    slashed.click()
    page.wait_for_url("**/operations/**")
    assert page.locator("h1").inner_text() == f"All results for {name}"
    assert httpx.get(f"{site}/v1/operations/{name}").json()["operation"] == name
