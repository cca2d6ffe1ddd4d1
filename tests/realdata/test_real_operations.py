"""Operation pages on the real data explain the operation with its reference implementation
(issue 34, "Operation pages that explain the operation"): the code the source's definition
gives (SOL-ExecBench's ``rmsnorm_h4096``, whose runs come from the catalog and whose
definition from the imported folder; FlashInfer-Bench's ``fused_add_rmsnorm_h2048``), the
same in ``GET /v1/operations/{name}``, shown in its own box that scrolls sideways on a phone
while the page does not; screenshots at 1280 and 390 px kept as test artifacts.

The oracle is the definition files themselves, read here from the fixtures."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from litestar import Litestar
from litestar.testing import TestClient
from playwright.sync_api import sync_playwright
from real_ledger import RealLedger

from api.server.app import create_app
from tests.live_server import live_server
from tests.served_app import TEST_CONFIG

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = Path(os.environ.get("KERNELINDEX_SCREENSHOTS", "test-artifacts/screenshots"))
DEFINITIONS = {
    "rmsnorm_h4096": "fixtures/sol-execbench/cuda_cpp-rmsnorm/definition.json",
    "fused_add_rmsnorm_h2048": "fixtures/flashinfer-trace/definition.json",
}
WITHOUT_CODE = "gemm_n2048_k4096"  # a catalog spec only


@pytest.fixture(scope="module")
def client(real: RealLedger) -> Iterator[TestClient[Litestar]]:
    ledger = real.open()
    with TestClient(create_app(ledger, TEST_CONFIG)) as c:
        yield c
    ledger.close()


@pytest.mark.parametrize("operation", sorted(DEFINITIONS))
def test_the_operation_gives_its_definitions_reference_code(
    client: TestClient[Litestar], shared: Path, operation: str
) -> None:
    definition = json.loads((shared / DEFINITIONS[operation]).read_text())
    reply = client.get(f"/v1/operations/{operation}")
    assert reply.status_code == 200, reply.text
    about = reply.json()["about"]
    assert about["reference"] == "python"
    assert about["referenceCode"] == definition["reference"]
    assert client.get(f"/v1/artifacts/{about['referenceArtifact']}").status_code == 200


def test_a_catalog_operation_without_the_code_says_so(client: TestClient[Litestar]) -> None:
    """The catalog's FlashInfer-Bench specs state a Python reference but carry no code, and
    no definition of this one was imported: the page says the ledger lacks it."""
    reply = client.get(f"/v1/operations/{WITHOUT_CODE}")
    about = reply.json()["about"]
    assert about["reference"] == "python" and about["referenceCode"] is None
    page = client.get(f"/operations/{WITHOUT_CODE}").text
    assert "the ledger holds the definition's shape, not that code" in page
    assert "reference-code" not in page


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


def test_the_reference_code_scrolls_in_its_own_box_at_1280_and_390_px(
    site: str, shared: Path
) -> None:
    code = json.loads((shared / DEFINITIONS["rmsnorm_h4096"]).read_text())["reference"]
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox"], headless=True
        )
        try:
            for width in (1280, 390):
                tab = browser.new_page(viewport={"width": width, "height": 900})
                response = tab.goto(f"{site}/operations/rmsnorm_h4096")
                assert response is not None and response.status == 200
                box = tab.locator("pre.reference-code")
                assert box.inner_text() == code.rstrip("\n") or box.inner_text() == code
                page_width = tab.evaluate("document.documentElement.scrollWidth")
                assert page_width <= width, (width, page_width)
                inside = box.evaluate("e => [e.scrollWidth, e.clientWidth]")
                if width == 390:  # its 68-character lines are wider than a phone
                    assert inside[0] > inside[1], inside
                box.scroll_into_view_if_needed()
                tab.screenshot(path=str(SHOTS / f"operation-reference-{width}.png"))
                tab.close()
        finally:
            browser.close()
