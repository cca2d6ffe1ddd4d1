"""`kernelindex agent` reads its own key's registration before it polls (issue 32).

One key per backend: an agent key is bound to device classes, and the agent refuses to start
on a device its key is not bound to. The CPU double runs submitted code on the CPU, so a key
used there must never be taken to a GPU, nor a GPU key pointed at the CPU double. Each test
runs the real command against a live ledger, with a rerun job open for the CPU double's
device, and reads the exit code, what the operator sees and what the ledger stored.
"""

from __future__ import annotations

import subprocess
import sys
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
from gpu_agent.agent import probe
from gpu_agent.backends.registry import CPU_TEST
from gpu_agent.harness import HarnessConfig
from ledger.home import LedgerHome
from ledger.signing.authoring import key_registration_envelope
from ledger.signing.keys import SigningKey

SAMPLE = Path(__file__).resolve().parents[2] / "gpu_agent" / "samples" / "rmsnorm_h4096_bf16"
B200 = DeviceClass("cuda", "NVIDIA B200", "sm_100")


@dataclass
class Ledger:
    home: LedgerHome
    url: str
    device: Any
    folder: Path

    def key_file(self, name: str, devices: list[DeviceClass] | None) -> tuple[SigningKey, Path]:
        """A new agent key saved as ``name``.pem, registered with ``devices`` (None: never)."""
        key = SigningKey.generate()
        path = self.folder / f"{name}.pem"
        key.save(path)
        if devices is not None:
            self.home.open().append(
                key_registration_envelope(
                    key.public, [Role.AGENT], self.home.key("admin"), devices=devices
                )
            )
        return key, path

    def open_job(self) -> str:
        """A rerun job for the CPU double's device: the run's digest."""
        return submit_with_job(self.home, SAMPLE, self.device, 50_000_000)

    def events(self, run: str) -> list[str]:
        """The run's stored events, as its public history shows them."""
        reply = httpx.get(f"{self.url}/v1/runs/{run}/history")
        assert reply.status_code == 200, reply.text
        return [e["event"] for e in reply.json()["events"]]

    def agent(self, key_file: Path, *options: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "api.cli", "agent", "--server", self.url]
        return subprocess.run(
            [*command, "--key", str(key_file), "--backend", "cpu-test", "--poll", "0.1", *options],
            capture_output=True,
            text=True,
            # Only a wide bound, for an agent that never stops (the refusal it must give
            # comes at once, before the first poll).
            timeout=120,
            check=False,
        )


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    home = LedgerHome.at(tmp_path / "home")
    opened = home.initialise()
    device, _ = probe(CPU_TEST, HarnessConfig(start_method="forkserver"))
    app = create_app(opened, ServerConfig(key_rate=0, address_rate=0, json_logs=False))
    with live_server(app) as server:
        yield Ledger(home, server.url, device, tmp_path)


def test_a_key_bound_to_the_cpu_double_runs_on_it(ledger: Ledger) -> None:
    key, path = ledger.key_file("cpu", [DeviceClass(CPU_TEST)])
    done = ledger.agent(path, "--once")
    assert done.returncode == 0, done.stderr
    assert f"agent key {key.key_id} is bound to cpu-test" in done.stdout
    assert "polling" in done.stdout
    assert "no open job for this device" in done.stdout


def test_a_gpu_key_on_the_cpu_double_stops_at_once_naming_both_and_claims_nothing(
    ledger: Ledger,
) -> None:
    run = ledger.open_job()
    key, path = ledger.key_file("b200", [B200])
    before = ledger.events(run)
    assert before[-1] == "Run.RerunRequested"
    done = ledger.agent(path)  # not --once: an agent that would retry must stop by itself
    assert done.returncode != 0
    stderr = " ".join(done.stderr.split())
    assert "error[device-not-bound]" in stderr
    assert key.key_id in stderr
    assert "NVIDIA B200/sm_100" in stderr  # the key's device class
    assert f"{ledger.device.product} ({ledger.device.architecture}, backend cpu-test)" in stderr
    assert "one key per backend" in stderr
    assert "--device cpu-test" in stderr  # how to register the key this device needs
    assert "polling" not in done.stdout  # it never polled, let alone claimed
    assert ledger.events(run) == before  # no claim stored


def test_an_unregistered_key_stops_the_agent_before_it_polls(ledger: Ledger) -> None:
    run = ledger.open_job()
    key, path = ledger.key_file("stranger", None)
    before = ledger.events(run)
    done = ledger.agent(path, "--once")
    assert done.returncode != 0
    stderr = " ".join(done.stderr.split())
    assert "error[unknown-key]" in stderr
    assert f"key {key.key_id} is not registered" in stderr
    assert "polling" not in done.stdout
    assert ledger.events(run) == before
