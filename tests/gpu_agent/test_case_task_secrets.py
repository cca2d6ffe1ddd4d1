"""No case child is ever handed the job's nonce, on either path (issue 32).

A case child holds submitted code (on a GPU the kernel shares the child's CUDA context and,
with HMM, can read the child's memory), so the agent derives every nonce-seeded value — the
secret, post-timing, hidden and audit rounds, the order of the pre-timing rounds, the timed
launches' input variants — and sends the child only those seeds. These tests run a
declarative sample and a Python solution on the cpu-test backend, capture the very bytes
each case child is sent on stdin, and check that (1) the nonce is in none of them and (2) the
seeds they carry are the ones the published formulas give (written out again here, so a
change of derivation fails), so every result is what it was before the seeds moved.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpu_agent import child_process
from gpu_agent.case_task import CaseTask
from gpu_agent.harness import HarnessConfig, JobSpec, run_job
from gpu_agent.python_solutions.task import TorchCaseTask
from gpu_agent.samples import SAMPLE_JOB_ID, load_sample
from gpu_agent.stats import StopPolicy
from tests.paths import FIXTURES

NONCE = "c0ffee" + "5a" * 29  # distinct from every other test's nonce
STOP = StopPolicy(warmup=1, batch=5, min_samples=10, max_samples=20, time_budget_s=0.2)
CONFIG = HarnessConfig(stop=STOP, bootstrap_resamples=50, case_timeout_s=120)
DATA = Path(__file__).parent / "data" / "python_solutions"
RMSNORM = json.loads(
    (FIXTURES / "sol-execbench" / "triton-rmsnorm" / "definition.json").read_text()
)


def _seed(text: str) -> int:
    """The protocol's seed rule (gpu_agent/inputs.py docstring), restated independently."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def _p(kind: str, *parts: object) -> int:
    return _seed("|".join(["kernelindex-rerun-v1", kind, *map(str, parts)]))


def _pre_timing(job_id: str, case: str) -> list[tuple[str, int]]:
    rounds = [(f"public-{i}", _p("public", job_id, case, i)) for i in range(2)]
    rounds.append(("secret", _p("secret", NONCE, case)))
    order = np.random.default_rng(_p("order", NONCE, case)).permutation(3)
    return [rounds[int(i)] for i in order]


def _nonce_forms() -> list[bytes]:
    """How the nonce could appear in a pickle: its text (as str or ASCII bytes), raw bytes."""
    return [NONCE.encode(), NONCE.upper().encode(), bytes.fromhex(NONCE)]


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    """Every task written to a jailed case child's stdin, in order."""
    captured: list[bytes] = []
    original = child_process._Watch.result

    def recording(self: Any, task: bytes, timeout_s: float) -> child_process.ChildResult:
        captured.append(task)
        return original(self, task, timeout_s)

    monkeypatch.setattr(child_process._Watch, "result", recording)
    yield captured


def _payload(task: bytes) -> Any:
    _target, payload, _sandbox = pickle.loads(task)
    return payload


def test_a_declarative_case_child_gets_the_derived_seeds_never_the_nonce(
    sent: list[bytes],
) -> None:
    sample = load_sample("rmsnorm_h4096_bf16")
    workloads = sample.workloads[:2]
    spec = JobSpec(SAMPLE_JOB_ID, NONCE, sample.solution, sample.definition, workloads)
    result = run_job(spec, "cpu-test", CONFIG)
    assert [c["status"] for c in result["cases"]] == ["passed", "passed"]
    assert result["nonce"] == NONCE  # the signed result still names it: only children lack it

    assert len(sent) == len(workloads)
    for task, workload in zip(sent, workloads, strict=True):
        for form in _nonce_forms():
            assert form not in task
        payload = _payload(task)
        assert isinstance(payload, CaseTask)
        case = workload["uuid"]
        seeds = payload.seeds
        assert [(r.label, r.seed) for r in seeds.pre_timing] == _pre_timing(SAMPLE_JOB_ID, case)
        assert (seeds.post_timing.label, seeds.post_timing.seed) == (
            "post-timing",
            _p("post", NONCE, case),
        )
        assert list(seeds.timing_variants) == [_p("timing", NONCE, case, i) for i in range(3)]


def test_a_python_case_child_gets_the_derived_seeds_never_the_nonce(
    sent: list[bytes],
) -> None:
    solution = {
        "name": "honest_dps",
        "definition": "rmsnorm_h4096",
        "author": "tests",
        "spec": {
            "languages": ["pytorch"],
            "target_hardware": ["LOCAL"],
            "entry_point": "kernel.py::run",
            "dependencies": ["torch"],
            "destination_passing_style": True,
        },
        "sources": [{"path": "kernel.py", "content": (DATA / "honest_dps.py").read_text()}],
    }
    workload = {
        "uuid": "rows-3",
        "axes": {"batch_size": 3},
        "inputs": {"hidden_states": {"type": "random"}, "weight": {"type": "random"}},
    }
    job_id = "0c0c0c0c-1111-4222-8333-444455556666"
    result = run_job(JobSpec(job_id, NONCE, solution, RMSNORM, [workload]), "cpu-test", CONFIG)
    assert result["cases"][0]["status"] == "passed", result["cases"][0]

    assert len(sent) == 1
    for form in _nonce_forms():
        assert form not in sent[0]
    payload = _payload(sent[0])
    assert isinstance(payload, TorchCaseTask)
    seeds = {r.label: r.seed for r in payload.rounds}
    labels = [r.label for r in payload.rounds]
    expected_pre = _pre_timing(job_id, "rows-3")
    assert labels[:3] == [label for label, _ in expected_pre]
    assert all(seeds[label] == seed for label, seed in expected_pre)
    assert seeds["post-timing"] == _p("post", NONCE, "rows-3")
    assert seeds["timing-audit"] == _p("audit", NONCE, "rows-3")
    # The job's only case also runs the hidden workload (the definition has a var axis).
    assert seeds["hidden-workload"] == _p("hidden", NONCE, "rows-3")
