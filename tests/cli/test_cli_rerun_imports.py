"""`kernelindex rerun request` on imported runs (issue 17), as a user drives it, on each backend.

A SOL-ExecBench folder with a trace and the FlashInfer-Bench fixture are imported into a fresh
home; the import stores the rerun artifacts (the solution document, and the definition with
the run's workload), so a request needs no ``--solution`` or ``--workload``, and the job names
digests whose bytes the agent fetches over HTTP. A run whose source published no solution is
refused with what is missing, and nothing is appended; so is a FlashInfer-Bench run, whose
implementation pins only its entry file, not the solution document an agent would run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_session import Cli
from live_server import live_server
from sqlalchemy import create_engine, delete, text

from api.server.app import create_app
from api.server.config import ServerConfig
from domain.importers.flashinfer_trace import map_flashinfer_trace
from domain.importers.records import WORKLOAD_MEDIA_TYPE, ImportRecord, rerun_artifacts
from domain.importers.sol_execbench import map_sol_execbench
from domain.importers.sol_leaderboard import map_sol_leaderboard
from domain.manifests.manifest_set import check_manifest_set
from ledger.home import LedgerHome
from ledger.jobs import job
from ledger.store.artifacts import ArtifactStore, artifacts
from tests.paths import FIXTURES
from tests.sol_traces import (
    FLASHINFER,
    definition_of,
    first_workload,
    folder_files,
    traced_files,
    traced_folder,
)

TEST_CONFIG = ServerConfig(key_rate=0, address_rate=0, json_logs=False)
B200 = {"product": "NVIDIA B200", "architecture": "sm_100"}


@pytest.fixture
def cli(tmp_path: Path, db_url: str) -> Cli:
    made = Cli(tmp_path / "home", db_url)
    made("init")
    return made


def _artifact_count(cli: Cli) -> int:
    engine = create_engine(cli.db_url)
    try:
        with engine.connect() as conn:
            query = text("select count(*) from kernelindex_artifacts")
            return int(conn.execute(query).scalar_one())
    finally:
        engine.dispose()


def _records(items: Any) -> list[ImportRecord]:
    return [item for item in items if isinstance(item, ImportRecord)]


def _digest(record: ImportRecord) -> str:
    return check_manifest_set(record.manifests).run_digest


def _flashinfer_record(solution: str, uuid_prefix: str) -> ImportRecord:
    for record in _records(map_flashinfer_trace(folder_files(FLASHINFER))):
        trace = json.loads(record.snapshot.content)
        if trace["solution"] == solution and trace["workload"]["uuid"].startswith(uuid_prefix):
            return record
    raise AssertionError(f"no trace of {solution} on {uuid_prefix}")


def _assert_request_names_the_imported_artifacts(
    cli: Cli, record: ImportRecord, requested: dict[str, Any]
) -> None:
    named = rerun_artifacts(record.manifests)
    assert requested["receipt"]["event"] == "Run.RerunRequested"
    assert requested["requirements"] == B200
    assert (requested["artifactDigest"], requested["workloadDigest"]) == (
        named.solution,
        named.workload,
    )
    ledger = LedgerHome.at(cli.home, cli.db_url).open()
    view = job(ledger, requested["jobId"])
    assert (view.artifact_digest, view.workload_digest) == (named.solution, named.workload)
    assert ArtifactStore(ledger.store).get(view.workload_digest).media_type == WORKLOAD_MEDIA_TYPE


# ------------------------------------------------------------------------- SOL-ExecBench


@pytest.mark.parametrize("name", ["pytorch-linear_backward", "cuda_cpp-rmsnorm"])
def test_an_imported_sol_example_run_is_rerun_without_naming_its_artifacts(
    cli: Cli, tmp_path: Path, name: str
) -> None:
    folder = traced_folder(name, tmp_path)
    assert cli.json("import", "sol-execbench", folder)["new"] == 1
    [record] = _records(map_sol_execbench(traced_files(name)))
    run = _digest(record)
    before = cli.event_count()

    requested = cli.json("rerun", "request", run[:16])
    assert cli.event_count() == before + 1
    _assert_request_names_the_imported_artifacts(cli, record, requested)
    # What the job's digests resolve to: the definition with the run's one workload, and the
    # solution document the implementation pins.
    workload = json.loads(cli("artifact", "get", requested["workloadDigest"]).stdout_bytes)
    assert workload == {"definition": definition_of(name), "workloads": [first_workload(name)]}
    solution = json.loads(cli("artifact", "get", requested["artifactDigest"]).stdout_bytes)
    assert solution["definition"] == definition_of(name)["name"] and solution["sources"]
    history = cli.json("history", run)["events"]
    assert [(e["event"], e["verified"]) for e in history] == [
        ("Run.Ingested", True),
        ("Run.RerunRequested", True),
    ]


def test_importing_a_folder_again_appends_and_stores_nothing_new(cli: Cli, tmp_path: Path) -> None:
    folder = traced_folder("cuda_cpp-rmsnorm", tmp_path)
    cli.json("import", "sol-execbench", folder)
    events, artifacts = cli.event_count(), _artifact_count(cli)
    again = cli.json("import", "sol-execbench", folder)
    assert (again["new"], again["unchanged"], again["events"]) == (0, 1, 0)
    assert (cli.event_count(), _artifact_count(cli)) == (events, artifacts)


# ---------------------------------------------------------------------- FlashInfer-Bench


def test_an_imported_flashinfer_run_cannot_be_rerun_its_solution_is_pinned_by_no_digest(
    cli: Cli,
) -> None:
    """A FlashInfer-Bench implementation pins only its entry file; the solution document an
    agent would run is named by a reference no digest covers, so no job is bound to the run:
    refused with why, locally and through a server, and nothing is appended."""
    assert cli.json("import", "flashinfer-trace", FLASHINFER)["new"] == 5
    record = _flashinfer_record("flashinfer_wrapper_74a870", "906efdc6")
    named = rerun_artifacts(record.manifests)
    assert named.solution is None and named.unpinned_solution is not None
    count = cli.event_count()
    refused = cli("rerun", "request", _digest(record), ok=False)
    assert refused.exit_code == 1 and "Traceback" not in refused.output
    assert "error[bad-rerun-request]" in refused.output
    assert f"references the solution artifact {named.unpinned_solution}" in refused.output
    assert "not the source it pins" in refused.output
    ledger = LedgerHome.at(cli.home, cli.db_url).open()
    with live_server(create_app(ledger, TEST_CONFIG)) as server:
        remote = cli("rerun", "request", _digest(record)[:20], "--server", server.url, ok=False)
        assert "not the source it pins" in remote.output
    assert cli.event_count() == count


# ---------------------------------------------------------------- no solution, no request


def test_a_run_whose_source_published_no_solution_is_refused(cli: Cli) -> None:
    board = FIXTURES / "sol-leaderboard"
    cli.json("import", "sol-leaderboard", board)
    [first, *_] = _records(map_sol_leaderboard(folder_files(board)))
    count = cli.event_count()
    refused = cli("rerun", "request", _digest(first), ok=False)
    assert refused.exit_code == 1 and "Traceback" not in refused.output
    assert "error[bad-rerun-request]" in refused.output
    assert "published no solution" in refused.output and "no definition and workloads" in (
        refused.output
    )
    assert "a rerun measures only the code and workload the run's own manifests" in (refused.output)
    ledger = LedgerHome.at(cli.home, cli.db_url).open()
    with live_server(create_app(ledger, TEST_CONFIG)) as server:
        remote = cli("rerun", "request", _digest(first), "--server", server.url, ok=False)
        assert "published no solution" in remote.output
    assert cli.event_count() == count


# ------------------------------------------------------------------------------- bundles


def test_a_runs_bundle_carries_its_rerun_artifacts_and_verifies(cli: Cli, tmp_path: Path) -> None:
    """Offline, a bundle holds what a rerun agent would fetch (solution and workload), so the
    run can be checked and its rerun asked for without the ledger."""
    folder = traced_folder("pytorch-linear_backward", tmp_path)
    cli.json("import", "sol-execbench", folder)
    [record] = _records(map_sol_execbench(traced_files("pytorch-linear_backward")))
    named = rerun_artifacts(record.manifests)
    out = tmp_path / "run.bundle.jsonl"
    cli("export", "--run", _digest(record)[:16], "-o", str(out))
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    carried = {line["digest"]: line["mediaType"] for line in lines if line["type"] == "artifact"}
    assert named.workload in carried and carried[named.workload] == WORKLOAD_MEDIA_TYPE
    assert named.solution in carried
    root = cli.home / "trust-root.json"
    checked = cli("verify", str(out), "--workers", "1", "--trust-root", str(root))
    assert checked.exit_code == 0 and "VERIFIED" in checked.output


# ------------------------------------------------- artifacts checked through a server too


def test_a_server_request_checks_the_artifacts_the_agent_would_fetch(
    cli: Cli, tmp_path: Path
) -> None:
    """Through --server the CLI fetches both artifacts and re-hashes them before it signs,
    as it checks the home's own store: a workload the run names that the server does not
    hold is refused, and nothing is appended (nor would the server admit the request)."""
    folder = traced_folder("pytorch-linear_backward", tmp_path)
    cli.json("import", "sol-execbench", folder)
    [record] = _records(map_sol_execbench(traced_files("pytorch-linear_backward")))
    named = rerun_artifacts(record.manifests)
    count = cli.event_count()
    ledger = LedgerHome.at(cli.home, cli.db_url).open()
    with ledger.store.transaction(commit=True) as session:
        session.execute(delete(artifacts).where(artifacts.c.digest == named.workload))
    with live_server(create_app(ledger, TEST_CONFIG)) as server:
        refused = cli("rerun", "request", _digest(record), "--server", server.url, ok=False)
    assert refused.exit_code == 1 and "Traceback" not in refused.output
    assert f"workload artifact {named.workload}" in refused.output
    assert "not stored there" in refused.output
    assert cli.event_count() == count


def test_the_client_refuses_artifact_bytes_that_do_not_hash_to_their_digest() -> None:
    import httpx

    from api.client import LedgerClient, RemoteError

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("ab" * 32):
            return httpx.Response(404, json={"code": "not-found", "detail": "no such artifact"})
        return httpx.Response(200, content=b"not what was asked for")

    with LedgerClient("http://ledger.test", transport=httpx.MockTransport(answer)) as client:
        assert client.artifact("sha256:" + "ab" * 32) is None
        with pytest.raises(RemoteError, match="do not hash to"):
            client.artifact("sha256:" + "cd" * 32)
