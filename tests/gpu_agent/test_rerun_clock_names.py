"""``environment.clocks`` names only clocks the agent names (issue 32, review F2 item 3).

The timed clocks come from a case child's report and the end fingerprint from a case child
too; a solution that writes the report could put any text in a clock's *name*. The agent
keeps only its own names, and admission refuses any other key (stored results still read).
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.errors import DomainError
from domain.statements import RERUN_CLOCK_KEYS, PredicateType, build_predicate
from gpu_agent.case_task import CaseOutcome
from gpu_agent.result_assembly import environment, timing_clocks

BASE: dict[str, Any] = {
    "protocol": "kernelindex-rerun-v1",
    "issuedAt": "2026-12-06T00:00:00Z",
    "jobId": "0a0a0a0a-1111-4222-8333-444455556666",
    "nonce": "5e" * 32,
    "cases": [{"case": "c", "status": "incorrect", "reason": "output-mismatch"}],
    "summary": {"allCorrect": False, "samples": 0},
    "environment": {
        "product": "CPU test backend (not a GPU)",
        "architecture": "cpu",
        "gpuUuidHash": "0" * 64,
        "backend": "cpu-test",
    },
    "calibration": {},
}
DEVICE = {
    "product": "NVIDIA H100",
    "architecture": "sm_90",
    "gpu_uuid_hash": "0" * 64,
    "backend": "pycuda",
    "clocks_mhz": {"sm": 345.0, "memory": 2619.0, "sm_max": 1980.0, "memory_max": 2619.0},
}


def _admits(clocks: dict[str, float], *, stored: bool = False) -> bool:
    predicate = copy.deepcopy(BASE)
    predicate["environment"]["clocks"] = clocks
    try:
        build_predicate(PredicateType.RERUN, predicate, stored=stored)
    except DomainError:
        return False
    return True


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=60))
def test_admission_takes_only_the_vocabularys_clock_keys(key: str) -> None:
    assert _admits({key: 1980.0}) == (key in RERUN_CLOCK_KEYS)
    assert _admits({key: 1980.0}, stored=True)  # an old result still reads


def test_every_key_the_agent_makes_is_admitted() -> None:
    timed = {"sm": [1755.0, 1980.0], "memory": [2619.0]}
    env = environment(DEVICE, DEVICE, timed)
    assert set(env["clocks"]) == RERUN_CLOCK_KEYS
    assert _admits(env["clocks"])


def test_clock_names_a_child_reports_are_never_signed() -> None:
    forged = {"ATTACKER TEXT: visit evil.example": [1980.0], "sm": [1900.0]}
    outcome = CaseOutcome("passed", timing_clocks_mhz=forged)
    end = {**DEVICE, "clocks_mhz": {"sm": 1.0, "ATTACKER TEXT": 2.0}}  # a child's fingerprint
    env = environment(DEVICE, end, timing_clocks([outcome]))
    assert "ATTACKER" not in repr(env)
    assert env["clocks"]["sm.timed.min"] == 1900.0
    assert env["clocks"]["sm.end"] == 1.0
