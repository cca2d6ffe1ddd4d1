"""`kernelindex submit` and `kernelindex rerun request`, as a user drives them, on each backend.

A submission stores the two artifacts a rerun agent fetches (the solution file's exact bytes,
and the canonical {definition, workloads}); a rerun request for the run names exactly those.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import typer
from cli_session import Cli
from live_server import live_server
from sqlalchemy import delete

from api.cli.rerun import parse_duration
from api.server.app import create_app
from api.server.config import ServerConfig
from domain.importers.records import WORKLOAD_MEDIA_TYPE
from ledger.home import LedgerHome
from ledger.jobs import job
from ledger.store.artifacts import ArtifactStore, artifacts
from ledger.submission import (
    SOLUTION_MEDIA_TYPE,
    prepare_submission,
    read_submission_folder,
    submit_solution,
)

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "gpu_agent" / "samples"
RMSNORM = SAMPLES / "rmsnorm_h4096_bf16"
SILU = SAMPLES / "silu_and_mul_bf16"
FIGURES = ("--latency-ns", "12000", "--gpu", "NVIDIA H200", "--arch", "sm_90")


@pytest.fixture
def cli(tmp_path: Path, db_url: str) -> Cli:
    made = Cli(tmp_path / "home", db_url)
    made("init")
    return made


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def copy_sample(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


# ---------------------------------------------------------------------------- submit


def test_submit_stores_the_artifacts_and_ingests_a_reported_run(cli: Cli) -> None:
    before = cli.event_count()
    made = cli.json("submit", RMSNORM, *FIGURES)
    assert made["appended"] is True and made["receipt"]["event"] == "Run.Ingested"
    assert cli.event_count() == before + 1

    solution = cli("artifact", "get", made["solutionDigest"]).stdout_bytes
    assert sha256(solution) == made["solutionDigest"]
    assert solution == (RMSNORM / "solution.json").read_bytes()  # the file as submitted
    workload = cli("artifact", "get", made["workloadDigest"]).stdout_bytes
    assert sha256(workload) == made["workloadDigest"]
    lines = (RMSNORM / "workload.jsonl").read_text().splitlines()
    definition = json.loads((RMSNORM / "definition.json").read_text())
    package = json.loads(workload)
    assert package == {
        "definition": definition,
        "workloads": [json.loads(line) for line in lines if line],
    }
    # In the document's order: the inputs' order is the solution's argument order.
    assert list(package["definition"]["inputs"]) == list(definition["inputs"])

    record = cli.json("show", made["run"])
    assert record["status"] == "passed" and record["source"] == "direct"
    assert record["primary"] == {
        "metric": "latency",
        "statistic": "mean",
        "unit": "ns",
        "value": 12000,
        "latencyNs": 12000,
    }
    assert record["environment"]["product"] == "NVIDIA H200"
    assert record["environment"]["architecture"] == "sm_90"
    # Pinned source but no raw evidence: the submitter's word only.
    assert record["evidence"]["level"] == "reported"
    text_record = cli("show", made["run"][:16]).stdout
    assert "reported" in text_record


def test_submitting_the_same_folder_again_appends_nothing(cli: Cli) -> None:
    first = cli.json("submit", RMSNORM, *FIGURES)
    count = cli.event_count()
    again = cli("submit", RMSNORM, *FIGURES).stdout
    assert "already ingested" in again and first["run"] in again
    second = cli.json("submit", RMSNORM, *FIGURES)
    assert second["run"] == first["run"] and second["appended"] is False
    assert cli.event_count() == count
    # Other figures are another claim: another run.
    other = cli.json(
        "submit", RMSNORM, "--latency-ns", "12500", "--gpu", "NVIDIA H200", "--arch", "sm_90"
    )
    assert other["run"] != first["run"] and other["appended"] is True
    assert other["solutionDigest"] == first["solutionDigest"]


def test_a_submissions_run_digest_is_pinned() -> None:
    """What the run is about never depends on how its rerun artifacts are laid out."""
    prepared = prepare_submission(
        read_submission_folder(RMSNORM),
        latency_ns=12000,
        product="NVIDIA H200",
        architecture="sm_90",
        observed_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    assert prepared.run_digest == (
        "sha256:b64dcb9520f51af693656ec8a5712aca8fad0894fc7e9dc93a2d2d2e3bbba383"
    )


def test_submit_with_a_fixed_observation_time_is_idempotent(tmp_path: Path, db_url: str) -> None:
    home = LedgerHome.at(tmp_path / "home", db_url)
    ledger = home.initialise()
    files = read_submission_folder(RMSNORM)
    moment = datetime(2026, 11, 1, 12, tzinfo=UTC)
    figures: dict[str, Any] = {
        "latency_ns": 9000,
        "product": "NVIDIA H200",
        "architecture": "sm_90",
        "observed_at": moment,
    }
    first = submit_solution(ledger, home.key("ingester"), files, **figures)
    again = submit_solution(ledger, home.key("ingester"), files, **figures)
    assert first.appended and not again.appended
    assert again.run_digest == first.run_digest
    later = submit_solution(
        ledger, home.key("ingester"), files, **(figures | {"observed_at": moment + timedelta(1)})
    )
    assert later.appended and later.run_digest != first.run_digest


def test_a_torch_binding_solution_may_be_submitted(cli: Cli, tmp_path: Path) -> None:
    folder = copy_sample(RMSNORM, tmp_path / "torch")
    solution = json.loads((folder / "solution.json").read_text())
    solution["spec"]["binding"] = "torch"
    (folder / "solution.json").write_text(json.dumps(solution))
    made = cli.json("submit", folder, *FIGURES)
    assert made["appended"] is True


def test_submit_refuses_bad_folders_and_appends_nothing(cli: Cli, tmp_path: Path) -> None:
    count = cli.event_count()
    missing = copy_sample(RMSNORM, tmp_path / "missing")
    (missing / "workload.jsonl").unlink()
    result = cli("submit", missing, *FIGURES, ok=False)
    assert "error[bad-submission]" in result.output and "workload.jsonl" in result.output

    broken = copy_sample(RMSNORM, tmp_path / "broken")
    (broken / "solution.json").write_text('{"name": "x", ')
    result = cli("submit", broken, *FIGURES, ok=False)
    assert "error[malformed-document]" in result.output

    bad_line = copy_sample(RMSNORM, tmp_path / "bad-line")
    with (bad_line / "workload.jsonl").open("a") as handle:
        handle.write("not json\n")
    result = cli("submit", bad_line, *FIGURES, ok=False)
    assert "error[bad-submission]" in result.output and "line 6" in result.output

    other = copy_sample(RMSNORM, tmp_path / "other")
    solution = json.loads((other / "solution.json").read_text())
    solution["definition"] = "some_other_definition"
    (other / "solution.json").write_text(json.dumps(solution))
    result = cli("submit", other, *FIGURES, ok=False)
    assert "error[malformed-source]" in result.output and "solves" in result.output

    result = cli("submit", RMSNORM, "--latency-ns", "0", "--gpu", "H", "--arch", "sm_90", ok=False)
    assert "error[bad-submission]" in result.output
    result = cli("submit", RMSNORM, "--latency-ns", "5", "--gpu", "H", "--arch", "SM 90", ok=False)
    assert "error[schema-violation]" in result.output
    assert cli.event_count() == count


# ---------------------------------------------------------------------- rerun request


def test_rerun_request_names_the_submitted_artifacts(cli: Cli) -> None:
    made = cli.json("submit", RMSNORM, *FIGURES)
    before = cli.event_count()
    requested = cli.json("rerun", "request", made["run"][:20])
    assert cli.event_count() == before + 1
    assert requested["receipt"]["event"] == "Run.RerunRequested"
    assert requested["requirements"] == {"product": "NVIDIA H200", "architecture": "sm_90"}
    assert requested["artifactDigest"] == made["solutionDigest"]
    assert requested["workloadDigest"] == made["workloadDigest"]
    expires = datetime.fromisoformat(requested["expiresAt"].replace("Z", "+00:00"))
    assert timedelta(hours=23) < expires - datetime.now(UTC) <= timedelta(hours=24)

    history = cli.json("history", made["run"])
    events = [e["event"] for e in history["events"]]
    assert events == ["Run.Ingested", "Run.RerunRequested"]
    assert all(e["verified"] for e in history["events"])
    request = history["events"][1]
    assert request["role"] == "admin"
    assert request["predicate"]["artifactDigest"] == made["solutionDigest"]
    assert request["predicate"]["workloadDigest"] == made["workloadDigest"]

    ledger = LedgerHome.at(cli.home, cli.db_url).open()
    view = job(ledger, requested["jobId"])
    assert view.artifact_digest == made["solutionDigest"]
    assert view.workload_digest == made["workloadDigest"]
    assert (view.product, view.architecture) == ("NVIDIA H200", "sm_90")
    store_types = {
        made["solutionDigest"]: SOLUTION_MEDIA_TYPE,
        made["workloadDigest"]: WORKLOAD_MEDIA_TYPE,
    }
    store = ArtifactStore(ledger.store)
    for digest, media_type in store_types.items():
        assert store.get(digest).media_type == media_type

    text_reply = cli(
        "rerun", "request", made["run"], "--expires-in", "30m", "--arch", "sm_90"
    ).stdout
    assert "rerun requested: job" in text_reply and "NVIDIA H200 (sm_90)" in text_reply


def test_rerun_request_with_other_hardware(cli: Cli) -> None:
    made = cli.json("submit", RMSNORM, *FIGURES)
    requested = cli.json("rerun", "request", made["run"], "--gpu", "NVIDIA H100", "--arch", "sm_90")
    assert requested["requirements"] == {"product": "NVIDIA H100", "architecture": "sm_90"}


def test_rerun_request_needs_an_admin_key(cli: Cli, tmp_path: Path) -> None:
    made = cli.json("submit", RMSNORM, *FIGURES)
    alice = tmp_path / "alice.pem"
    cli("keys", "generate", alice)
    cli("keys", "register", alice, "--role", "attester", "--self")
    count = cli.event_count()
    result = cli("rerun", "request", made["run"], "--key", alice, ok=False)
    assert "error[wrong-role]" in result.output
    result = cli(
        "rerun", "request", made["run"], "--key", cli.home / "keys" / "ingester.pem", ok=False
    )
    assert "error[wrong-role]" in result.output
    assert cli.event_count() == count


def test_rerun_request_for_an_unknown_run_is_not_found(cli: Cli) -> None:
    result = cli("rerun", "request", "sha256:" + "0" * 64, ok=False)
    assert "error[not-found]" in result.output


def test_rerun_request_asks_only_for_the_runs_own_stored_code(cli: Cli, seed_path: Path) -> None:
    """A job measures the code the run's manifests name (issue 32): no option names other
    code, a run that names none cannot be rerun, and the code must be stored."""
    rmsnorm = cli.json("submit", RMSNORM, *FIGURES)
    silu = cli.json("submit", SILU, *FIGURES)
    count = cli.event_count()
    for option in ("--workload", "--solution"):
        result = cli("rerun", "request", rmsnorm["run"], option, silu["workloadDigest"], ok=False)
        assert result.exit_code == 2 and "No such option" in result.output
    # A run that `submit` did not make names no code (the seed's source published none).
    cli("ingest", seed_path)
    result = cli("rerun", "request", "sha256:7e18c26ca3b6", ok=False)
    assert "error[bad-rerun-request]" in result.output and "published no solution" in result.output
    # An artifact the run names that is not stored could not be fetched by an agent.
    ledger = LedgerHome.at(cli.home, cli.db_url).open()
    with ledger.store.transaction(commit=True) as session:
        session.execute(delete(artifacts).where(artifacts.c.digest == rmsnorm["solutionDigest"]))
    result = cli("rerun", "request", rmsnorm["run"], ok=False)
    assert "error[not-found]" in result.output and "not stored" in result.output
    assert cli.event_count() == count + 1


def test_rerun_request_refuses_a_bad_expiry(cli: Cli) -> None:
    made = cli.json("submit", RMSNORM, *FIGURES)
    result = cli("rerun", "request", made["run"], "--expires-in", "tomorrow", ok=False)
    assert result.exit_code == 2 and "--expires-in" in result.output


def test_parse_duration() -> None:
    assert parse_duration("24h") == timedelta(hours=24)
    assert parse_duration("1h30m") == timedelta(minutes=90)
    assert parse_duration("7d") == timedelta(days=7)
    assert parse_duration(" 90S ") == timedelta(seconds=90)
    for bad in ("", "0s", "h", "12", "1x", "1h 30m", "-1h"):
        with pytest.raises(typer.BadParameter):
            parse_duration(bad)


def test_prepared_submission_reuses_the_sol_mapping() -> None:
    prepared = prepare_submission(
        read_submission_folder(RMSNORM),
        latency_ns=12000,
        product="NVIDIA H200",
        architecture="sm_90",
    )
    manifests = prepared.manifests
    assert manifests["workload"]["kind"] == "WorkloadSuite"
    assert len(manifests["workload"]["spec"]["cases"]) == 5
    assert manifests["workload"]["metadata"]["sourceRefs"] == [
        {"url": "kernelindex:artifact/" + prepared.workload.digest}
    ]
    assert (
        manifests["implementation"]["spec"]["source"]["contentDigest"] == prepared.solution.digest
    )
    assert manifests["environment"]["spec"]["hardware"] == {
        "vendor": "nvidia",
        "product": "NVIDIA H200",
        "architecture": "sm_90",
    }


# ----------------------------------------------------------------------------- server

TEST_CONFIG = ServerConfig(key_rate=0, address_rate=0, json_logs=False)


def test_rerun_request_through_a_server(cli: Cli, tmp_path: Path) -> None:
    made = cli.json("submit", RMSNORM, *FIGURES)
    ledger = LedgerHome.at(cli.home, cli.db_url).open()
    with live_server(create_app(ledger, TEST_CONFIG)) as server:
        url = server.url
        requested = cli.json("rerun", "request", made["run"][:18], "--server", url)
        assert requested["receipt"]["event"] == "Run.RerunRequested"
        assert requested["artifactDigest"] == made["solutionDigest"]
        assert requested["workloadDigest"] == made["workloadDigest"]
        alice = tmp_path / "alice.pem"
        cli("keys", "generate", alice)
        cli("keys", "register", alice, "--role", "attester", "--self")
        refused = cli("rerun", "request", made["run"], "--server", url, "--key", alice, ok=False)
        assert "error[wrong-role]" in refused.output
        missing = cli("rerun", "request", "sha256:" + "0" * 64, "--server", url, ok=False)
        assert "error[not-found]" in missing.output
        both = cli("rerun", "request", made["run"], "--server", url, "--home", cli.home, ok=False)
        assert both.exit_code == 2
    assert job(ledger, requested["jobId"]).workload_digest == made["workloadDigest"]
