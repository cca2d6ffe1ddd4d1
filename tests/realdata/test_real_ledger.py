"""User flows on the real data: the whole catalog, every source fixture, the seed run."""

from __future__ import annotations

from pathlib import Path

import pytest
from real_ledger import SOURCES, RealLedger
from sqlalchemy import select

from api.service.ledger_service import LedgerService
from projections.tables import runs

pytestmark = pytest.mark.slow

SEED = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
GROUP = "sha256:5cd4617efda4cb445cf7a71560098124df3a89c27d0ed74bc852d46e306c1e62"


def test_the_seed_ingested_as_the_readme_says_is_ranked_in_its_cohort(real: RealLedger) -> None:
    record = real.cli.json("show", SEED[:15])
    assert record["comparisonKey"] == GROUP
    shown = real.cli("show", SEED[:15]).output
    assert "Rank " in shown and "in its comparison group" in shown and "not ranked" not in shown


def test_every_score_run_shows_the_value_it_is_ranked_by(real: RealLedger) -> None:
    ledger = real.open()
    try:
        with ledger.store.transaction(commit=False) as session:
            rows = session.execute(
                select(runs.c.run_digest, runs.c.metric, runs.c.unit, runs.c.claimed).where(
                    runs.c.metric != "latency"
                )
            ).all()
        scores = [r for r in rows if r.metric == "score"]
        assert len(scores) >= 3000, len(scores)  # GPU MODE's 3,135 score runs
        service = LedgerService(ledger)
        for digest, metric, unit, claimed in rows:
            # The record's primary measurement is read from the run's signed events, the
            # views' row from the fold: the two must agree.
            primary = service.runs.record(digest).primary
            assert (primary.metric, primary.unit) == (metric, unit), digest
            assert primary.value == (pytest.approx(claimed) if claimed is not None else None)
    finally:
        ledger.close()


def test_sources_imported_after_the_catalog_supersede_nothing_and_repeat_as_nothing(
    real: RealLedger, shared: Path
) -> None:
    for target, report in real.reports.items():
        assert report["superseded"] == 0 and report["rejected"] == [], (target, report)
    for kind, target in SOURCES:
        again = real.cli.json("import", kind, shared / target)
        assert (again["new"], again["superseded"], again["events"]) == (0, 0, 0), target


def test_search_finds_the_seed_group_on_b200(real: RealLedger) -> None:
    found = real.cli.json("search", "B200", "056_language", "v1.1")["items"]
    assert GROUP in [g["comparisonKey"] for g in found]
    rmsnorm = real.cli.json("search", "B200", "rmsnorm")["items"]
    assert rmsnorm and all("rmsnorm" in str(g["benchmark"]).lower() for g in rmsnorm[:10])


def test_the_readmes_leaderboard_example_works_as_written(real: RealLedger) -> None:
    definition = "056_language_model_decoder_prenorm_attention_ffn_residual_backward"
    boards = real.cli.json("leaderboard", "--definition", definition, "--gpu", "NVIDIA B200")
    keys = [g["comparisonKey"] for g in boards["groups"]]
    assert GROUP in keys
    labels = [g["label"] for g in boards["groups"]]
    assert len(set(labels)) == len(labels)  # each group says what sets it apart
