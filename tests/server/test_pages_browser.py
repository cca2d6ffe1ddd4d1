"""The pages in a real headless Chromium, against a real uvicorn server on loopback.

What a person sees: the seed run's page, the leaderboard in rank order with its chart, links
that lead from the index to a run's history, JSON links that answer JSON, and no console
errors anywhere. Uses Debian's Chromium (apt-get install chromium); skipped when it is
missing, except under CI, which must run these.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from live_server import live_server
from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright
from served_app import TEST_CONFIG

from api.demo import build_demo
from api.server.app import create_app
from ledger.home import LedgerHome

CHROMIUM = Path("/usr/bin/chromium")
SEED = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
SEED_NAME = "sol-submission-38823"


def _require_chromium() -> None:
    if CHROMIUM.exists():
        return
    message = f"{CHROMIUM} is missing; install it with: apt-get install -y chromium"
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the browser tests: {message}")
    pytest.skip(f"browser tests skipped: {message}")


@pytest.fixture(scope="module")
def site_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The demo ledger served by uvicorn in a background thread (SQLite)."""
    _require_chromium()
    ledger, seed = build_demo(LedgerHome.at(tmp_path_factory.mktemp("pages") / "home"))
    assert seed == SEED
    with live_server(create_app(ledger, TEST_CONFIG)) as running:
        yield running.url


@pytest.fixture(scope="module")
def browser(site_url: str) -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox"], headless=True
        )
        yield chromium
        chromium.close()


@dataclass
class Tab:
    """A fresh browser page that records every console error and uncaught script error."""

    page: Page
    base: str
    errors: list[str] = field(default_factory=list)

    def open(self, path: str) -> None:
        response = self.page.goto(self.base + path)
        assert response is not None and response.status == 200, path
        assert response.headers["content-type"].startswith("text/html")

    def path(self) -> str:
        return self.page.url.removeprefix(self.base)

    def json_link_answers_json(self) -> object:
        link = self.page.locator("a.json-link")
        assert link.count() == 1 and link.get_attribute("type") == "application/json"
        href = link.get_attribute("href")
        assert href is not None and href.startswith("/v1/")
        reply = self.page.request.get(self.base + href)
        assert reply.status == 200, href
        assert reply.headers["content-type"].startswith("application/json")
        return reply.json()

    def assert_clean(self) -> None:
        assert self.errors == [], self.errors


@pytest.fixture
def tab(browser: Browser, site_url: str) -> Iterator[Tab]:
    context = browser.new_context()
    page = context.new_page()
    opened = Tab(page, site_url)

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            opened.errors.append(f"{page.url}: {message.text}")

    page.on("console", on_console)
    page.on("pageerror", lambda error: opened.errors.append(f"{page.url}: {error}"))
    yield opened
    context.close()


def test_the_seed_run_page_shows_its_digest_evidence_and_rank(tab: Tab) -> None:
    record = httpx.get(f"{tab.base}/v1/runs/{SEED}").json()
    for reference in ("/runs/7e18c26c", f"/runs/{SEED}"):
        tab.open(reference)
        page = tab.page
        assert page.locator("html").get_attribute("lang") == "en"
        assert page.locator("h1").inner_text() == record["title"]
        assert SEED in page.locator(".run-digest").inner_text()
        badge = page.locator("#evidence-heading + p .badge")
        assert badge.inner_text() == record["evidence"]["level"] == "reported"
        assert badge.is_visible()
        rank = page.locator(".rank-label").first.inner_text()
        assert "Rank 3 of 3" in rank and "source-native comparison" in rank
        assert page.locator(".primary-value").inner_text() == "1.751 ms"
        assert page.locator("pre.canonical").inner_text() == record["canonicalManifest"]
    tab.assert_clean()


def test_the_leaderboard_lists_the_cohort_in_rank_order_with_a_bar_per_run(tab: Tab) -> None:
    key = httpx.get(f"{tab.base}/v1/runs/{SEED}").json()["comparisonKey"]
    entries = httpx.get(f"{tab.base}/v1/leaderboards/{key}").json()["entries"]
    tab.open(f"/leaderboards/{key}")
    page = tab.page
    rows = page.locator("table.ranking tbody tr")
    assert rows.count() == len(entries) == 3
    shown = [
        (int(rows.nth(i).locator("td.rank").inner_text()), rows.nth(i).locator("a").inner_text())
        for i in range(rows.count())
    ]
    assert shown == [(e["rank"], e["name"]) for e in entries]
    assert shown[-1] == (3, SEED_NAME)

    chart = page.locator("svg.chart[role='img']")
    assert chart.count() == 1 and chart.is_visible()
    labelled_by = (chart.get_attribute("aria-labelledby") or "").split()
    assert page.locator(f"[id='{labelled_by[0]}']").text_content() == (
        "Mean latency per run, source-native view (shorter is faster)"
    )
    bars = chart.locator("rect.bar")
    assert bars.count() == len(entries)
    widths = []
    for i in range(bars.count()):
        box = bars.nth(i).bounding_box()
        assert box is not None and box["width"] > 0
        widths.append(box["width"])
    assert widths == sorted(widths)  # rank order: lower latency, shorter bar

    page.get_by_role("link", name="verified view").click()
    page.wait_for_url(f"**/leaderboards/{key}?view=verified")
    assert page.locator("svg.chart").count() == 0
    assert "No run is ranked in the verified view" in page.locator("main").inner_text()
    tab.assert_clean()


def test_links_lead_from_the_index_to_a_runs_history_and_json_links_answer_json(
    tab: Tab,
) -> None:
    key = httpx.get(f"{tab.base}/v1/runs/{SEED}").json()["comparisonKey"]
    tab.open("/")
    page = tab.page
    page.keyboard.press("Tab")  # the first stop skips the navigation, for keyboard users
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    groups = tab.json_link_answers_json()
    assert isinstance(groups, list) and key in [g["comparisonKey"] for g in groups]

    page.locator(f"a.leaderboard-link[href^='/leaderboards/{key}']").click()
    page.wait_for_url(f"**/leaderboards/{key}?view=source-native")
    board = tab.json_link_answers_json()
    assert isinstance(board, dict) and board["comparisonKey"] == key

    page.locator("table.ranking a.run-link", has_text=SEED_NAME).click()
    page.wait_for_url(f"**/runs/{SEED}")
    record = tab.json_link_answers_json()
    assert isinstance(record, dict) and record["digest"] == SEED

    page.locator("a.history-link").click()
    page.wait_for_url(f"**/runs/{SEED}/history")
    assert page.locator("h1").inner_text() == f"History of {SEED_NAME}"
    history = tab.json_link_answers_json()
    assert isinstance(history, dict) and history["run"] == SEED
    events = page.locator("li.event")
    assert events.count() == len(history["events"]) == 2
    assert all("✓ verified" in events.nth(i).inner_text() for i in range(events.count()))

    page.locator("a.run-link").click()  # and back to the run record
    page.wait_for_url(f"**/runs/{SEED}")
    page.get_by_role("link", name="Home").click()
    page.wait_for_url(f"{tab.base}/")
    tab.assert_clean()


def test_no_page_logs_a_console_error(tab: Tab) -> None:
    key = httpx.get(f"{tab.base}/v1/runs/{SEED}").json()["comparisonKey"]
    for path in (
        "/",
        f"/runs/{SEED}",
        f"/runs/{SEED}/history",
        f"/leaderboards/{key}",
        f"/leaderboards/{key}?view=verified",
    ):
        tab.open(path)
        tab.page.wait_for_load_state("networkidle")
        # The stylesheet applied (so it loaded): the header has its panel colour.
        colour = tab.page.evaluate(
            "getComputedStyle(document.querySelector('header.site')).backgroundColor"
        )
        assert colour == "rgb(244, 245, 247)", path
    tab.assert_clean()


def test_a_missing_run_is_an_html_page_with_status_404(tab: Tab) -> None:
    response = tab.page.goto(tab.base + "/runs/abcdef00")
    assert response is not None and response.status == 404
    assert response.headers["content-type"].startswith("text/html")
    assert tab.page.locator("h1").inner_text() == "404 · Not found"
    # Chromium notes the document's own 404 on the console, and nothing else: this also
    # shows the console listener works, so the "no console error" checks are not vacuous.
    assert len(tab.errors) == 1 and "404" in tab.errors[0], tab.errors


SHOTS = Path(os.environ.get("KERNELINDEX_SCREENSHOTS", "test-artifacts/screenshots"))


def test_search_finds_the_seed_group_and_leads_to_its_leaderboard(tab: Tab) -> None:
    """A person types what they look for; the result names what sets lookalikes apart."""
    key = httpx.get(f"{tab.base}/v1/runs/{SEED}").json()["comparisonKey"]
    tab.open("/")
    page = tab.page
    page.get_by_role("link", name="Search").click()
    page.wait_for_url(f"{tab.base}/search")
    page.get_by_label("Words that must all match", exact=False).fill("B200 056_language")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url("**/search?q=*")
    rows = page.locator("table.ranking tbody tr")
    assert rows.count() == 2
    text = page.locator("table.ranking").inner_text()
    assert "stack v1.0" in text and "stack v1.1" in text and SEED_NAME.rsplit("-", 1)[0] in text
    found = tab.json_link_answers_json()
    assert isinstance(found, dict) and key in [g["comparisonKey"] for g in found["items"]]
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "search.png"), full_page=True)
    page.locator(f"a[href^='/leaderboards/{key}']").click()
    page.wait_for_url(f"**/leaderboards/{key}?view=source-native")
    assert page.locator("table.ranking tbody tr").count() == 3
    tab.assert_clean()


def test_a_run_leads_to_all_results_for_its_operation_and_on_to_each_group(tab: Tab) -> None:
    operation = "056_language_model_decoder_prenorm_attention_ffn_residual_backward"
    found = httpx.get(f"{tab.base}/v1/operations/{operation}").json()
    tab.open(f"/runs/{SEED}")
    page = tab.page
    # Publication, admission and observation: three facts, each under its own name.
    facts = page.locator("dl.provenance").inner_text()
    assert all(
        name in facts
        for name in ("Published by the source", "Admitted to this ledger", "Observed (measured)")
    )
    page.get_by_role("link", name=f"All results for {operation} →").click()
    page.wait_for_url(f"**/operations/{operation}")
    rows = page.locator("table.groups tbody tr")
    assert rows.count() == len(found["groups"]) == 2
    text = page.locator("table.groups").inner_text()
    assert "stack v1.0" in text and "stack v1.1" in text
    assert page.locator("svg.chart rect.bar").count() == 2
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "operation.png"), full_page=True)
    key = httpx.get(f"{tab.base}/v1/runs/{SEED}").json()["comparisonKey"]
    page.locator(f"a.leaderboard-link[href^='/leaderboards/{key}']").click()
    page.wait_for_url(f"**/leaderboards/{key}?view=source-native")
    tab.open("/")
    page.locator("a.operation-link", has_text=operation).first.click()
    page.wait_for_url(f"**/operations/{operation}")
    tab.assert_clean()
