"""The whole rerun loop over HTTP with the CPU test backend: submit a sample solution,
request a rerun (admin), and let the agent poll, claim, fetch by digest, measure, sign and
post. The CPU double's results are recorded as such and never move evidence; adversarial
samples are caught with the check that caught them; a solution the agent will not run ends
the job as failed with the reason."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from live_server import live_server
from rerun_results import submit_with_job

from api.server.app import create_app
from api.server.config import ServerConfig
from domain.rerun_binding import DeviceClass
from domain.statements import Role
from gpu_agent.agent import Agent, AgentConfigError, LedgerApi, probe
from gpu_agent.backends.registry import CPU_TEST
from gpu_agent.harness import HarnessConfig
from gpu_agent.stats import StopPolicy
from ledger.home import LedgerHome
from ledger.signing.authoring import (
    key_registration_envelope,
    key_revocation_envelope,
)
from ledger.signing.keys import SigningKey
from tests.paths import FIXTURES

SAMPLES = Path(__file__).resolve().parents[2] / "gpu_agent" / "samples"
CONFIG = HarnessConfig(
    stop=StopPolicy(warmup=1, batch=10, min_samples=20, max_samples=40, time_budget_s=0.5),
    start_method="forkserver",
    bootstrap_resamples=200,
    backend_options={"emulation_modules": "gpu_agent.samples.emulations"},
)


@dataclass
class Loop:
    home: LedgerHome
    url: str
    agent: Agent
    device: Any

    def submit_and_request(self, sample: str, latency_ns: int = 50_000_000) -> str:
        return self.submit_folder_and_request(SAMPLES / sample, latency_ns)

    def submit_folder_and_request(self, folder: Path, latency_ns: int) -> str:
        """Submit the solution in ``folder``, then request a rerun of its run (as admin)."""
        return submit_with_job(self.home, folder, self.device, latency_ns)

    def history(self, run: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = httpx.get(f"{self.url}/v1/runs/{run}/history").json()[
            "events"
        ]
        return events

    def level(self, run: str) -> str:
        return str(httpx.get(f"{self.url}/v1/runs/{run}").json()["evidence"]["level"])


@pytest.fixture
def loop(tmp_path: Path) -> Iterator[Loop]:
    home = LedgerHome.at(tmp_path / "home")
    ledger = home.initialise()
    key = SigningKey.generate()
    ledger.append(
        key_registration_envelope(
            key.public, [Role.AGENT], home.key("admin"), devices=[DeviceClass(CPU_TEST)]
        )
    )
    device, _ = probe("cpu-test", CONFIG)
    app = create_app(ledger, ServerConfig(key_rate=0, address_rate=0, json_logs=False))
    with live_server(app) as server:
        agent = Agent(LedgerApi(server.url), key, "cpu-test", CONFIG, log=lambda _: None)
        yield Loop(home, server.url, agent, device)


def test_honest_sample_end_to_end_is_recorded_but_never_verifies(loop: Loop) -> None:
    assert loop.device.backend == "cpu-test"
    assert "not a GPU" in loop.device.product
    run = loop.submit_and_request("rmsnorm_h4096_bf16")
    before = loop.level(run)
    outcome = loop.agent.run_once()
    assert outcome is not None and outcome.run_digest == run
    assert (outcome.outcome, outcome.all_correct) == ("completed", True)
    assert loop.agent.run_once() is None  # nothing left to do
    events = loop.history(run)
    assert [e["event"] for e in events][-3:] == [
        "Run.RerunRequested",
        "Run.RerunClaimed",
        "Run.RerunRecorded",
    ]
    result = events[-1]
    assert result["verified"] and result["role"] == "agent"
    assert result["predicate"]["environment"]["backend"] == "cpu-test"
    assert result["predicate"]["summary"]["samples"] >= 20
    assert result["changed"] == {}  # a CPU double never moves evidence
    assert loop.level(run) == before == "reported"


@pytest.mark.parametrize(
    ("sample", "words"),
    [
        ("adv_unwritten_output", "unwritten-output"),
        ("adv_mutates_input", "input-mutation"),
        ("adv_cached_result", ""),
        ("adv_secret_round_wrong", ""),
    ],
)
def test_adversarial_samples_are_caught(loop: Loop, sample: str, words: str) -> None:
    run = loop.submit_and_request(sample)
    outcome = loop.agent.run_once()
    assert outcome is not None and outcome.outcome == "completed"
    assert outcome.all_correct is False
    cases = loop.history(run)[-1]["predicate"]["cases"]
    failed = [c for c in cases if c["status"] != "passed"]
    assert failed, cases
    assert all(c.get("reason") for c in failed)
    assert any(words in c["reason"] for c in failed), failed


def test_a_solution_the_agent_will_not_run_fails_the_job_with_its_reason(
    loop: Loop, tmp_path: Path
) -> None:
    folder = tmp_path / "torch-sample"
    folder.mkdir()
    source = SAMPLES / "rmsnorm_h4096_bf16"
    for name in ("definition.json", "workload.jsonl"):
        (folder / name).write_bytes((source / name).read_bytes())
    solution = (source / "solution.json").read_text().replace('"pycuda"', '"torch"')
    (folder / "solution.json").write_text(solution)
    run = loop.submit_folder_and_request(folder, latency_ns=40_000_000)
    outcome = loop.agent.run_once()
    assert outcome is not None and outcome.outcome == "failed"
    # A torch-binding C++ solution needs a build path this agent lacks: the agent's failure.
    assert outcome.reason == "unsupported-solution"
    last = loop.history(run)[-1]
    assert last["event"] == "Run.RerunRecorded" and last["verified"]
    assert "job FAILED" in last["says"]


def _python_folder(tmp_path: Path, name: str, solution: dict[str, Any]) -> Path:
    """A submission folder: the SOL fixtures' RMSNorm definition and two small workloads."""
    folder = tmp_path / name
    folder.mkdir()
    fixture = FIXTURES / "sol-execbench" / "triton-rmsnorm"
    (folder / "definition.json").write_bytes((fixture / "definition.json").read_bytes())
    lines = [
        json.dumps(
            {
                "uuid": f"rows-{n}",
                "axes": {"batch_size": n},
                "inputs": {"hidden_states": {"type": "random"}, "weight": {"type": "random"}},
            }
        )
        for n in (2, 5)
    ]
    (folder / "workload.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "solution.json").write_text(json.dumps(solution))
    return folder


def test_a_python_solution_is_measured_with_its_defences_and_the_ledger_accepts_it(
    loop: Loop, tmp_path: Path
) -> None:
    hack = json.loads(
        (FIXTURES / "sol-execbench" / "reward-hacks" / "solution_hack_lazy_output.json").read_text()
    )
    honest = dict(hack, name="rmsnorm_python_honest")
    honest["sources"] = [
        {
            "path": "kernel.py",
            "content": hack["sources"][0]["content"].replace(
                "return result.as_subclass(FakeTensor)", "return result"
            ),
        }
    ]
    run = loop.submit_folder_and_request(_python_folder(tmp_path, "honest", honest), 40_000_000)
    outcome = loop.agent.run_once()
    assert outcome is not None and (outcome.outcome, outcome.all_correct) == ("completed", True)
    predicate = loop.history(run)[-1]["predicate"]
    assert predicate["build"]["solutionKind"] == "python"
    for case in predicate["cases"]:
        assert case["status"] == "passed"
        assert {d["name"] for d in case["defences"]} >= {"harness-integrity", "thread-injection"}
        assert case["timerCrossCheck"]["outcome"] == "passed"
    assert loop.level(run) == "reported"  # the CPU double never moves evidence

    cheat = loop.submit_folder_and_request(_python_folder(tmp_path, "hack", hack), 40_000_000)
    outcome = loop.agent.run_once()
    assert outcome is not None and (outcome.outcome, outcome.all_correct) == ("completed", False)
    cases = loop.history(cheat)[-1]["predicate"]["cases"]
    assert all(c["reason"] == "reward-hack:strict-output-type" for c in cases)


def test_a_missing_dependency_fails_the_job_as_the_agents_not_the_solutions(
    loop: Loop, tmp_path: Path
) -> None:
    flashinfer = json.loads((FIXTURES / "flashinfer-trace" / "solution.json").read_text())
    folder = tmp_path / "flashinfer"
    folder.mkdir()
    (folder / "definition.json").write_bytes(
        (FIXTURES / "flashinfer-trace" / "definition.json").read_bytes()
    )
    trace = json.loads((FIXTURES / "flashinfer-trace" / "trace.jsonl").open().readline())
    (folder / "workload.jsonl").write_text(json.dumps(trace["workload"]) + "\n")
    (folder / "solution.json").write_text(json.dumps(flashinfer))
    run = loop.submit_folder_and_request(folder, 40_000_000)
    outcome = loop.agent.run_once()
    assert outcome is not None and outcome.outcome == "failed"
    assert outcome.reason == "missing-dependency"
    assert "job FAILED" in loop.history(run)[-1]["says"]


class _CutArtifacts(httpx.BaseTransport):
    """The real network, except that every artifact's reply breaks off after its first
    bytes, as a dropped connection or a lying Content-Length does."""

    def __init__(self) -> None:
        self.network = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        reply = self.network.handle_request(request)
        if not request.url.path.startswith("/v1/artifacts/"):
            return reply
        reply.close()

        def cut() -> Iterator[bytes]:
            yield b'{"name": '
            raise httpx.RemoteProtocolError("peer closed connection", request=request)

        return httpx.Response(reply.status_code, content=cut())

    def close(self) -> None:
        self.network.close()


def test_a_reply_that_breaks_off_still_ends_the_claimed_job_in_a_signed_result(
    loop: Loop,
) -> None:
    """A claimed job is never left without a result: an artifact whose reply breaks off is
    the ledger's or the network's failure, recorded as the job's, never a hang or a drop."""
    run = loop.submit_and_request("rmsnorm_h4096_bf16")
    agent = loop.agent
    agent.api = LedgerApi(loop.url, client=httpx.Client(transport=_CutArtifacts()))
    outcome = agent.run_once()
    assert outcome is not None and outcome.outcome == "failed"
    assert outcome.reason == "artifact-unavailable"
    last = loop.history(run)[-1]
    assert last["event"] == "Run.RerunRecorded" and last["verified"]
    assert "job FAILED" in last["says"]
    assert agent.run_once() is None  # the job is done, not claimed and left


# --- one key per backend: the agent's key must be bound to the device it runs on ----------


def _registered_agent(loop: Loop, roles: list[Role], devices: list[DeviceClass]) -> Agent:
    key = SigningKey.generate()
    loop.home.open().append(
        key_registration_envelope(key.public, roles, loop.home.key("admin"), devices=devices)
    )
    return Agent(LedgerApi(loop.url), key, "cpu-test", CONFIG, log=lambda _: None)


def test_the_agent_starts_with_a_key_bound_to_its_device(loop: Loop) -> None:
    assert loop.agent.start() == frozenset({DeviceClass(CPU_TEST)})


def test_the_agent_refuses_to_start_with_a_revoked_or_non_agent_key(loop: Loop) -> None:
    loop.home.open().append(key_revocation_envelope(loop.agent.key.public, loop.home.key("admin")))
    with pytest.raises(AgentConfigError, match="was revoked") as revoked:
        loop.agent.start()
    assert revoked.value.code == "revoked-key"
    ingester = Agent(LedgerApi(loop.url), loop.home.key("ingester"), "cpu-test", CONFIG)
    with pytest.raises(AgentConfigError, match="not an agent key") as wrong:
        ingester.start()
    assert wrong.value.code == "wrong-role"


def test_a_claim_refused_for_the_key_stops_the_agent_instead_of_retrying(loop: Loop) -> None:
    """An agent whose key is not bound to its device (started without ``start``): the ledger
    refuses its claim with 403 ``device-not-bound``, which no retry can fix. The agent stops
    with that code; it neither polls on nor records the job as failed."""
    run = loop.submit_and_request("rmsnorm_h4096_bf16")
    agent = _registered_agent(loop, [Role.AGENT], [DeviceClass("cuda", "NVIDIA B200", "sm_100")])
    lines: list[str] = []

    def log(line: str) -> None:
        lines.append(line)
        if sum("retrying" in seen for seen in lines) >= 3:
            raise RuntimeError(f"the agent retried a refusal no retry can fix: {lines}")

    agent.log = log
    with pytest.raises(AgentConfigError, match="NVIDIA B200/sm_100") as stopped:
        agent.run_forever(poll_seconds=0.01)
    assert stopped.value.code == "device-not-bound"
    assert [e["event"] for e in loop.history(run)][-1] == "Run.RerunRequested"
