"""Leaderboards and operations on the real data (issue 34): lookalike groups told apart on
every face, GPUs as people type them, SOL scores and their order, each user's best, sweeps,
operations explained, the CLI at 80 columns, and pages no wider than their viewport."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import sync_playwright
from real_ledger import RealLedger

from api.server.app import create_app
from tests.live_server import live_server
from tests.served_app import TEST_CONFIG

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = Path(os.environ.get("KERNELINDEX_SCREENSHOTS", "test-artifacts/screenshots"))
NVFP4 = "nvfp4_group_gemm"
# Groups of the catalog (their keys are recomputed from its manifests, so they are stable):
# a SOL-ExecBench group whose SOL-score order is not its latency ranking, a GPU MODE board
# with many runs of few users, and a FlashInfer workload of a batch-size sweep.
SOL_REORDERED = "sha256:cc5519abec0f06bdce8db4398b3b33ccb682c4069f4bff37ed850a82a8f9ff22"
GPUMODE_NVIDIA = "sha256:b264d8044b3e365e558c3529a2a6526926894cc2c8c5d78557e74ac4446932ec"
FLASHINFER_SWEEP = "fused_add_rmsnorm_h2048"
# Its run of batch size 16254, the only run of that workload (the sweep's last of 7).
SWEEP_ALONE = "sha256:385b82b87eef4902f70fd45e8dfd78d5722734b5699e1ee268a6bc44a61c3f6d"


@pytest.fixture(scope="module")
def site(real: RealLedger) -> Iterator[str]:
    ledger = real.open()
    with live_server(create_app(ledger, TEST_CONFIG)) as running:
        yield running.url
    ledger.close()


def _cli80(real: RealLedger, *args: str) -> subprocess.CompletedProcess[str]:
    """`kernelindex ARGS | cat` in an 80-column terminal: a pipe, COLUMNS=80."""
    env = {
        **os.environ,
        "COLUMNS": "80",
        "KERNELINDEX_HOME": str(real.home),
        "KERNELINDEX_DB": real.cli.db_url,
        "KERNELINDEX_KEY_PASSPHRASE": "",
    }
    code = "from api.cli.main import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=False
    )


def test_lookalike_groups_read_apart_on_every_face(real: RealLedger, site: str) -> None:
    operation = httpx.get(f"{site}/v1/operations/{NVFP4}").json()
    groups = operation["groups"]
    assert len(groups) == 2 and {g["gpu"] for g in groups} == {"NVIDIA B200"}
    apart = [g["apartBy"] for g in groups]
    assert len(set(apart)) == 2
    assert {g["apartShort"] for g in groups} == {"runner:B200", "runner:NVIDIA"}
    page = httpx.get(f"{site}/operations/{NVFP4}").text
    for g in groups:
        assert g["apartBy"] in page
        assert f"NVIDIA B200 · {g['apartShort']}" in page  # the chart's label of the group
    printed = real.cli.json("leaderboard", "--definition", NVFP4, "--limit", "1")
    assert {b["comparisonKey"]: b["label"] for b in printed["groups"]} == {
        g["comparisonKey"]: g["apartBy"] for g in groups
    }
    for g in groups:
        board = httpx.get(f"{site}/leaderboards/{g['comparisonKey']}").text
        assert g["apartBy"] in board
    # Compared, the two groups' #1 runs say the field that separates them, not only "environment".
    tops = ",".join(g["top"]["run"] for g in groups)
    compared = httpx.get(f"{site}/v1/comparisons", params={"runs": tops}).json()
    assert compared["comparable"] is False
    assert compared["notComparableField"].startswith("environment (spec.hardware.formFactor: ")
    assert "runner:B200" in compared["notComparableField"]
    assert "spec.hardware.formFactor" in httpx.get(f"{site}/compare", params={"runs": tops}).text


def test_a_gpu_is_found_as_people_type_it(real: RealLedger, site: str) -> None:
    definition = "004_attention_output_projection_with_reshape_backward"
    found = _cli80(real, "leaderboard", "--definition", definition, "--gpu", "B200")
    assert found.returncode == 0, found.stderr
    assert "sol-submission-" in found.stdout
    exact = httpx.get(f"{site}/v1/groups", params={"benchmark": definition, "gpu": "NVIDIA B200"})
    typed = httpx.get(f"{site}/v1/groups", params={"benchmark": definition, "gpu": "b200"})
    assert typed.json() == exact.json() and exact.json()
    ambiguous = _cli80(real, "leaderboard", "--gpu", "nvidia")
    assert ambiguous.returncode != 0
    for name in ("NVIDIA A100", "NVIDIA B200", "NVIDIA GB200", "NVIDIA H100", "NVIDIA L4"):
        assert name in ambiguous.stdout + ambiguous.stderr
    answer = httpx.get(f"{site}/v1/groups", params={"gpu": "MI3"})
    assert answer.status_code == 400 and "MI355X" in answer.json()["detail"]


def test_a_sol_board_shows_the_sol_score_and_can_be_ordered_by_it(site: str) -> None:
    board = httpx.get(f"{site}/v1/leaderboards/{SOL_REORDERED}").json()
    by_score = httpx.get(
        f"{site}/v1/leaderboards/{SOL_REORDERED}", params={"order": "sol-score"}
    ).json()
    assert board["group"]["hasSolScore"] is True
    ranked = [e["run"] for e in board["entries"]]
    scored = [e["run"] for e in by_score["entries"]]
    assert sorted(ranked) == sorted(scored) and ranked != scored  # the orders differ here
    scores = [e["solScore"] for e in by_score["entries"]]
    assert scores == sorted(scores, reverse=True) and None not in scores
    assert {e["run"]: e["rank"] for e in by_score["entries"]} == {
        e["run"]: e["rank"] for e in board["entries"]
    }
    refused = httpx.get(f"{site}/v1/leaderboards/{GPUMODE_NVIDIA}", params={"order": "sol-score"})
    assert refused.status_code == 400 and "no SOL score" in refused.json()["detail"]


def test_a_gpu_mode_board_shows_each_users_best(site: str) -> None:
    every = httpx.get(f"{site}/v1/leaderboards/{GPUMODE_NVIDIA}", params={"limit": 500}).json()
    best = httpx.get(
        f"{site}/v1/leaderboards/{GPUMODE_NVIDIA}", params={"perUser": "true", "limit": 500}
    ).json()
    authors = [e["author"] for e in every["entries"]]
    assert len(authors) > len(set(authors))  # one user, many runs
    assert best["total"] == len(set(authors)) == len(best["entries"])
    first_rank: dict[str, int] = {}
    for e in every["entries"]:
        first_rank.setdefault(e["author"], e["rank"])
    assert all(e["rank"] == first_rank[e["author"]] for e in best["entries"])
    assert sum(e["runsOfAuthor"] for e in best["entries"]) == every["total"]
    top, second = best["entries"][:2]
    assert top["gapToNext"] == pytest.approx(second["value"] / top["value"])


def test_a_sweep_says_what_its_rank_is_among_and_the_operation_explains_itself(
    site: str, shared: Path
) -> None:
    operation = httpx.get(f"{site}/v1/operations/{FLASHINFER_SWEEP}").json()
    groups = operation["groups"]
    assert len(groups) > 1
    board = httpx.get(f"{site}/v1/leaderboards/{groups[0]['comparisonKey']}").json()
    assert board["group"]["sweepWorkloads"] == len(groups)
    page = httpx.get(f"{site}/leaderboards/{groups[0]['comparisonKey']}").text
    assert f"has {len(groups)} workloads" in page and "among the runs of this one workload" in page
    # Each run of the sweep: its rank among its workload's runs and the workload's place, or
    # no rank as the only run of its workload; never a bare "Rank 1 of 1" (issue 34, item 7).
    places = []
    for group in groups:
        board = httpx.get(f"{site}/v1/leaderboards/{group['comparisonKey']}").json()
        place = board["group"]["sweep"]
        places.append((place["position"], place["workload"]))
        run = board["entries"][0]["run"]
        record = httpx.get(f"{site}/v1/runs/{run}").json()
        assert record["sweep"] == place
        label = record["standings"]["source-native"]["label"]
        where = f"workload {place['workload']} ({place['position']} of {len(groups)} in its sweep)"
        alone = group["runs"] == 1
        assert label.startswith("Not ranked: the only run of" if alone else "Rank 1 of ")
        assert where in label
        run_page = httpx.get(f"{site}/runs/{run}").text
        assert label in run_page and "Rank 1 of 1" not in run_page
    assert sorted(places) == [(i, w) for i, (_, w) in enumerate(sorted(places), 1)]
    assert sorted(places)[-1] == (len(groups), "batch_size=16254")
    alone = httpx.get(f"{site}/v1/runs/{SWEEP_ALONE}").json()
    assert alone["sweep"]["workload"] == "batch_size=16254"
    sizes = [int(w.rsplit("=", 1)[-1]) for _, w in sorted(places)]
    assert sizes == sorted(sizes)  # batch sizes in the order people count

    definition = json.loads((shared / "fixtures/flashinfer-trace/definition.json").read_text())
    about = operation["about"]
    assert about["description"] == definition["description"]
    assert [(a["name"], a["shape"]) for a in about["inputs"]] == [
        (name, body["shape"]) for name, body in definition["inputs"].items()
    ]
    assert [a["name"] for a in about["outputs"]] == list(definition["outputs"])
    assert {a["dtype"] for a in about["inputs"]} == {"bf16"}  # the definition's bfloat16
    assert about["reference"] == "python"
    html = httpx.get(f"{site}/operations/{FLASHINFER_SWEEP}").text
    assert definition["description"] in html and "hidden_states" in html


def test_the_cli_is_readable_at_80_columns(real: RealLedger) -> None:
    shown = _cli80(real, "leaderboard", "--definition", NVFP4, "--limit", "5")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    runs = [line for line in lines if "reported" in line]
    assert len(runs) == 10  # 5 places of each group, one line each
    assert all("kernelbot-" in line and "-leaderboard" in line for line in runs)  # whole names
    best = _cli80(real, "leaderboard", GPUMODE_NVIDIA[:19], "--per-user", "--limit", "5")
    assert best.returncode == 0 and all(len(line) <= 80 for line in best.stdout.splitlines())


PAGES = {
    "sol-board": f"/leaderboards/{SOL_REORDERED}?order=sol-score",
    "gpumode-board": f"/leaderboards/{GPUMODE_NVIDIA}?perUser=true",
    "flashinfer-operation": f"/operations/{FLASHINFER_SWEEP}",
    "flashinfer-sweep-run": f"/runs/{SWEEP_ALONE}",
    "operation-nvfp4-group-gemm": f"/operations/{NVFP4}",
}


def test_board_and_operation_pages_fit_their_viewport(site: str) -> None:
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the browser tests: {CHROMIUM} is missing")
        pytest.skip(f"{CHROMIUM} is missing; apt-get install -y chromium")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox"], headless=True
        )
        try:
            for width in (1280, 390):
                tab = browser.new_page(viewport={"width": width, "height": 900})
                for name, path in PAGES.items():
                    response = tab.goto(site + path)
                    assert response is not None and response.status == 200, path
                    scroll = tab.evaluate("document.documentElement.scrollWidth")
                    assert scroll <= width, (path, width, scroll)
                    tab.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
                tab.close()
        finally:
            browser.close()
