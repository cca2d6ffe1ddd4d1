"""Issue 17's "must show", on CPU: imported runs are rerun as their authors wrote them.

An SOL-ExecBench example run (a PyTorch solution, with a trace) is imported into a fresh home
with ``kernelindex import``, and a solution that needs a package the agent lacks is submitted
with ``kernelindex submit``; ``kernelindex rerun request`` asks for a rerun of each without
naming a solution or a workload (the run's digests bind both, and the home stored both),
on the CPU test backend's "hardware"; the agent then claims the job over HTTP from a live
server, fetches the artifacts by digest, measures with the cpu-test backend and posts the
signed result. The ledger accepts it; the run's history and page show it; the evidence does
not move, because the CPU double can never verify.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_session import Cli
from live_server import live_server

from api.server.app import create_app
from api.server.config import ServerConfig
from domain.importers.records import ImportRecord
from domain.importers.sol_execbench import map_sol_execbench
from domain.manifests.manifest_set import check_manifest_set
from domain.rerun_binding import DeviceClass
from domain.statements import Role
from gpu_agent.agent import Agent, Device, JobOutcome, LedgerApi, probe
from gpu_agent.harness import HarnessConfig
from gpu_agent.stats import StopPolicy
from ledger.home import LedgerHome
from ledger.signing.authoring import key_registration_envelope
from ledger.signing.keys import SigningKey
from tests.sol_traces import SOL_EXAMPLES, traced_files, traced_folder

CONFIG = HarnessConfig(
    stop=StopPolicy(warmup=1, batch=10, min_samples=20, max_samples=40, time_budget_s=0.5),
    start_method="forkserver",
    bootstrap_resamples=200,
)
SERVER = ServerConfig(key_rate=0, address_rate=0, json_logs=False)
# A Python package no agent has: the dependency a solution names and the agent lacks.
ABSENT_PACKAGE = "kernelindex-absent-package"


@dataclass
class Rerun:
    """A home with an agent key, the CLI on it, a live server and the CPU agent."""

    cli: Cli
    url: str
    agent: Agent
    device: Device

    def request(self, run: str) -> dict[str, Any]:
        """``kernelindex rerun request RUN`` on the agent's hardware: no solution, no workload."""
        requested: dict[str, Any] = self.cli.json(
            "rerun", "request", run[:16], "--gpu", self.device.product, "--arch", "cpu"
        )
        return requested

    def measure(self) -> JobOutcome:
        outcome = self.agent.run_once()
        assert outcome is not None, "the agent found no job"
        assert self.agent.run_once() is None  # the job is closed: nothing left to claim
        return outcome

    def history(self, run: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = httpx.get(f"{self.url}/v1/runs/{run}/history").json()[
            "events"
        ]
        return events

    def record(self, run: str) -> dict[str, Any]:
        record: dict[str, Any] = httpx.get(f"{self.url}/v1/runs/{run}").json()
        return record


@pytest.fixture
def rerun(tmp_path: Path, db_url: str) -> Iterator[Rerun]:
    cli = Cli(tmp_path / "home", db_url)
    cli("init")
    home = LedgerHome.at(cli.home, db_url)
    ledger = home.open()
    key = SigningKey.generate()
    on_cpu = (DeviceClass("cpu-test"),)  # a key of its own for the test double
    ledger.append(
        key_registration_envelope(key.public, [Role.AGENT], home.key("admin"), devices=on_cpu)
    )
    device, _ = probe("cpu-test", CONFIG)
    with live_server(create_app(ledger, SERVER)) as server:
        agent = Agent(LedgerApi(server.url), key, "cpu-test", CONFIG, log=lambda _: None)
        yield Rerun(cli, server.url, agent, device)


def _run_digest(records: Any) -> str:
    [record] = [r for r in records if isinstance(r, ImportRecord)]
    return check_manifest_set(record.manifests).run_digest


def _assert_recorded(rerun: Rerun, run: str, job_id: str, level: str) -> dict[str, Any]:
    """The last event is the agent's accepted result, the run's page lists the rerun, and
    the evidence did not move."""
    events = rerun.history(run)
    assert [e["event"] for e in events][-3:] == [
        "Run.RerunRequested",
        "Run.RerunClaimed",
        "Run.RerunRecorded",
    ]
    recorded = events[-1]
    assert recorded["verified"] and recorded["role"] == "agent"
    assert recorded["changed"] == {}  # a CPU double never moves evidence
    page = rerun.record(run)
    [listed] = [r for r in page["measurements"]["reruns"] if r["jobId"] == job_id]
    assert listed["verified"] and listed["role"] == "agent"
    assert listed["environment"]["backend"] == "cpu-test"
    assert page["evidence"]["level"] == level != "verified"
    return recorded


def test_an_imported_sol_example_run_is_rerun_with_its_defences_and_build(
    rerun: Rerun, tmp_path: Path
) -> None:
    name = "pytorch-linear_backward"
    assert rerun.cli.json("import", "sol-execbench", traced_folder(name, tmp_path))["new"] == 1
    run = _run_digest(map_sol_execbench(traced_files(name)))
    level = rerun.record(run)["evidence"]["level"]
    requested = rerun.request(run)

    outcome = rerun.measure()
    assert (outcome.job_id, outcome.run_digest) == (requested["jobId"], run)
    assert (outcome.outcome, outcome.all_correct) == ("completed", True)
    predicate = _assert_recorded(rerun, run, requested["jobId"], level)["predicate"]
    assert predicate["environment"]["backend"] == "cpu-test"
    build = predicate["build"]
    assert (build["solutionKind"], build["language"]) == ("python", "pytorch")
    assert "torch" in build["runtime"] and build["flags"]
    [case] = predicate["cases"]  # the run's one workload
    assert case["status"] == "passed", case
    outcomes = {d["name"]: d["outcome"] for d in case["defences"]}
    assert "failed" not in outcomes.values()
    assert {n for n, o in outcomes.items() if o == "passed"} >= {
        "harness-integrity",
        "thread-injection",
        "strict-output-type",
        "fresh-inputs",
        "input-mutation",
        "secret-round",
    }
    check = case["timerCrossCheck"]
    assert check["outcome"] == "passed" and check["calls"] > 0 and check["wallNs"] > 0


def test_a_submitted_run_fails_as_the_agents_for_a_missing_dependency(
    rerun: Rerun, tmp_path: Path
) -> None:
    """A direct submission (its implementation pins the solution, its workload artifact
    rebuilds its suite: a job can be bound to it) whose solution needs a package this agent
    lacks. A FlashInfer-Bench import is no longer rerunnable: its implementation pins the
    entry file, not the solution document the agent would run."""
    folder = tmp_path / "submission"
    folder.mkdir()
    example = SOL_EXAMPLES / "pytorch-linear_backward"
    for name in ("definition.json", "workload.jsonl"):
        (folder / name).write_bytes((example / name).read_bytes())
    solution = json.loads((example / "solution_python.json").read_bytes())
    solution["spec"]["dependencies"] = ["torch", ABSENT_PACKAGE]
    (folder / "solution.json").write_text(json.dumps(solution))
    submitted = rerun.cli.json(
        "submit", folder, "--latency-ns", "12000", "--gpu", "NVIDIA H200", "--arch", "sm_90"
    )
    run = submitted["run"]
    level = rerun.record(run)["evidence"]["level"]
    requested = rerun.request(run)
    assert (requested["artifactDigest"], requested["workloadDigest"]) == (
        submitted["solutionDigest"],
        submitted["workloadDigest"],
    )

    outcome = rerun.measure()
    assert (outcome.job_id, outcome.run_digest) == (requested["jobId"], run)
    assert outcome.outcome == "failed" and outcome.all_correct is False
    # The vocabulary's word (issue 32): the package's name came from the solution.
    assert outcome.reason == "missing-dependency"
    recorded = _assert_recorded(rerun, run, requested["jobId"], level)
    assert "job FAILED: missing-dependency" in recorded["says"]
    assert recorded["predicate"]["failure"] == outcome.reason
