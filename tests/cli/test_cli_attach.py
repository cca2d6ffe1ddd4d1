"""`kernelindex ingest` and `attach` complete a run from the manifests the ledger holds
(issue 14): the seed run, ingested as the README says, joins its comparison group whether
the catalog runs on its workload came before it or after. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from tests.cli_session import Cli

SEED = "sha256:7e18c26ca3b60572c4fc8589c4b3b9a86b548ef031df4242ea2483b649bd6a47"
GROUP = "sha256:5cd4617efda4cb445cf7a71560098124df3a89c27d0ed74bc852d46e306c1e62"
COHORT = json.loads(
    resources.files("api.demo_data").joinpath("sol-056-cohort.json").read_text("utf-8")
)["cohort"]


@pytest.fixture
def cli(tmp_path: Path, db_url: str) -> Cli:
    session = Cli(tmp_path / "home", db_url)
    session("init")
    return session


def _ingest_cohort(cli: Cli, tmp_path: Path) -> None:
    for i, manifests in enumerate(COHORT):
        path = tmp_path / f"cohort-{i}.json"
        path.write_text(json.dumps(manifests))
        cli("ingest", path)


def test_the_seed_ingested_after_its_cohort_takes_the_workload_from_the_ledger(
    cli: Cli, seed_path: Path, tmp_path: Path
) -> None:
    _ingest_cohort(cli, tmp_path)
    said = cli("ingest", seed_path).output
    assert "workload 056-language-model-decoder" in said and "taken from the ledger" in said
    record = cli.json("show", SEED[:15])
    assert record["comparisonKey"] == GROUP
    assert "Rank 3 of 3" in cli("show", SEED[:15]).output
    history = cli.json("history", SEED)["events"]
    assert [e["event"] for e in history] == ["Run.Ingested"]


def test_the_seed_ingested_before_its_cohort_is_attached_its_workload_on_reingest(
    cli: Cli, seed_path: Path, tmp_path: Path
) -> None:
    cli("ingest", seed_path)
    level = cli.json("show", SEED[:15])["evidence"]
    assert cli.json("show", SEED[:15])["comparisonKey"] is None
    shown = " ".join(cli("show", SEED[:15]).output.split())
    assert "not ranked: it has no comparison group: the ledger does not hold its workload" in shown
    # Nothing to attach yet: a clear error, nothing appended.
    before = cli.event_count()
    refused = cli("attach", SEED[:15], ok=False)
    assert "error[not-found]" in refused.output and "lacks no manifest" in refused.output
    assert cli.event_count() == before
    _ingest_cohort(cli, tmp_path)
    said = cli("ingest", seed_path).output
    assert "attached (the run was already ingested without it)" in said
    record = cli.json("show", SEED[:15])
    assert record["comparisonKey"] == GROUP and record["evidence"] == level
    assert "Rank 3 of 3" in cli("show", SEED[:15]).output
    events = cli.json("history", SEED)["events"]
    assert [(e["event"], e["role"], e["verified"]) for e in events] == [
        ("Run.Ingested", "ingester", True),
        ("Run.ManifestsAttached", "ingester", True),
    ]
    # Complete now: ingesting again is refused as it always was, and appends nothing.
    before = cli.event_count()
    again = cli("ingest", seed_path, ok=False)
    assert "error[already-exists]" in again.output
    assert cli.event_count() == before


def test_attach_takes_a_file_and_refuses_one_that_is_not_the_named_workload(
    cli: Cli, seed_path: Path, tmp_path: Path
) -> None:
    cli("ingest", seed_path)
    workload = COHORT[0]["workload"]
    wrong = json.loads(json.dumps(workload))
    wrong["spec"]["cases"] = wrong["spec"]["cases"][:1]
    before = cli.event_count()
    refused = cli("attach", SEED[:15], "--file", _write(tmp_path / "w.json", wrong), ok=False)
    assert "digests to" in refused.output and cli.event_count() == before
    receipt = cli.json("attach", SEED[:15], "--file", _write(tmp_path / "ok.json", workload))
    assert receipt["event"] == "Run.ManifestsAttached"
    assert cli.json("show", SEED[:15])["comparisonKey"] == GROUP


def _write(path: Path, document: object) -> Path:
    path.write_text(json.dumps(document))
    return path
